"""The metamorphic audit's transforms (pure, seeded, None where they cannot apply), which
metrics each check speaks to, the rate with its exact binomial interval and flag, the shift
with its paired bootstrap interval, the control and the signature comparison."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from rag_judge.analysis.metamorphic import (
    CHECKS,
    Aim,
    aims,
    check_rate,
    clopper_pearson,
    control_rate,
    for_check,
    signature_changes,
    transformed,
)
from rag_judge.analysis.metamorphic_transforms import (
    INJECTION,
    change_number,
    distractor,
    inject,
    pad,
    remove_support,
    shuffle,
    supporting,
    swap_citations,
)
from rag_judge.data.sample import Sample
from rag_judge.evaluators import GroundingEvaluator, JudgeEvaluator
from rag_judge.report.types import Signature
from rag_judge.stats.bootstrap import bootstrap_ci
from tests.metamorphic_judges import dataset

SAMPLES = [Sample.model_validate(s) for s in dataset()]
ONE = SAMPLES[1]  # three chunks; the answer cites [1] for the year and [2] for a guess


def _rng() -> random.Random:
    return random.Random(0)


def test_shuffle_is_never_the_identity_and_keeps_the_chunks() -> None:
    for seed in range(30):
        out = shuffle(ONE, SAMPLES, random.Random(seed))
        assert out is not None and out.contexts != ONE.contexts
        assert sorted(c.text for c in out.contexts) == sorted(c.text for c in ONE.contexts)
    assert shuffle(ONE.model_copy(update={"contexts": ONE.contexts[:1]}), SAMPLES, _rng()) is None


def test_distractor_appends_another_samples_chunk_ungraded() -> None:
    out = distractor(ONE, SAMPLES, _rng())
    assert out is not None and out.contexts[:3] == ONE.contexts
    added = out.contexts[3]
    assert added.relevance is None
    assert any(added.text == c.text for s in SAMPLES if s.id != ONE.id for c in s.contexts)
    assert distractor(ONE, [ONE], _rng()) is None  # no other sample


def test_padding_appends_a_context_sentence_off_the_question() -> None:
    out = pad(ONE, SAMPLES, _rng())
    assert out is not None and out.answer is not None and ONE.answer is not None
    added = out.answer[len(ONE.answer) + 1 :]
    assert added.startswith("Visitors often buy postcards") and added in ONE.contexts[0].text
    also = " Do visitors buy souvenirs there? Is the valley mild? Do farmers grow barley?"
    every = ONE.model_copy(update={"question": f"{ONE.question}{also}"})
    assert pad(every, SAMPLES, _rng()) is None  # every sentence is about the question


def test_remove_support_drops_the_graded_chunks_or_by_overlap_without_grades() -> None:
    assert supporting(ONE) == [0]
    out = remove_support(ONE, SAMPLES, _rng())
    assert out is not None and out.contexts == ONE.contexts[1:]
    ungraded = ONE.model_copy(
        update={"contexts": tuple(c.model_copy(update={"relevance": None}) for c in ONE.contexts)}
    )
    assert supporting(ungraded) == [0]  # the chunk with most of the answer's words
    only = ONE.model_copy(update={"contexts": ONE.contexts[:1]})
    assert remove_support(only, SAMPLES, _rng()) is None  # nothing would be left


def test_injection_poisons_one_context() -> None:
    out = inject(ONE, SAMPLES, _rng())
    assert out is not None
    poisoned = [c for c in out.contexts if INJECTION in c.text]
    assert len(poisoned) == 1


def test_citation_swap_rotates_the_keys_or_moves_a_single_one() -> None:
    out = swap_citations(ONE, SAMPLES, _rng())
    assert out is not None and ONE.answer is not None
    assert out.answer == ONE.answer.replace("[1]", "[x]").replace("[2]", "[1]").replace(
        "[x]", "[2]"
    )
    single = swap_citations(SAMPLES[0], SAMPLES, _rng())
    assert single is not None and single.answer is not None and "[2]" in single.answer
    by_id = SAMPLES[0].model_copy(update={"answer": "Built in 1801 [Aldor-a]."})
    moved = swap_citations(by_id, SAMPLES, _rng())
    assert moved is not None and moved.answer == "Built in 1801 [Aldor-b]."
    assert swap_citations(ONE.model_copy(update={"answer": "No markers."}), SAMPLES, _rng()) is None


def test_number_change_moves_a_stated_number_never_a_marker() -> None:
    out = change_number(ONE, SAMPLES, _rng())
    assert out is not None and out.answer is not None
    assert "1808" not in out.answer and "[1]" in out.answer and "[2]" in out.answer
    unstated = ONE.model_copy(update={"answer": "It has 12 floors [1]."})
    assert change_number(unstated, SAMPLES, _rng()) is None  # no context states 12


def test_transforms_are_seeded_by_the_sample_not_the_subset() -> None:
    evaluators = [JudgeEvaluator(rubrics=["faithfulness"])]
    whole = transformed("shuffle", SAMPLES, evaluators, 3)
    part = transformed("shuffle", SAMPLES[:5], evaluators, 3)
    assert whole[:5] == part
    assert transformed("shuffle", SAMPLES, evaluators, 3) == whole


def test_which_metrics_each_check_speaks_to() -> None:
    judge = JudgeEvaluator(rubrics=["faithfulness", "answer_relevance", "context_relevance",
                                    "correctness"])  # fmt: skip
    evaluators = [judge, GroundingEvaluator()]
    named = {c: {(a.metric, a.expect) for a in aims(c, evaluators)} for c in CHECKS}
    assert named["shuffle"] == {("faithfulness", "same"), ("context_relevance", "same")}
    assert named["distractor"] == {("faithfulness", "same")}
    assert named["padding"] == {("faithfulness", "same"), ("correctness", "same")}
    assert named["remove_support"] == {("faithfulness", "fall")}
    assert named["injection"] == {("faithfulness", "no_rise"), ("context_relevance", "no_rise")}
    assert named["citation_swap"] == {("citation_precision", "fall")}
    assert named["number_change"] == {("faithfulness", "fall"), ("claim_contradiction", "rise")}
    cut = for_check(evaluators, aims("distractor", evaluators))
    assert len(cut) == 1 and [r.name for r in cut[0].rubrics] == ["faithfulness"]  # type: ignore[union-attr]


def test_the_rate_counts_broken_expectations_where_there_is_room() -> None:
    same = Aim("f", "same", 1.0, 5.0)
    pairs = [(5.0, 5.0), (4.0, 3.0), None, (3.0, None), (None, 2.0)]
    rate = check_rate("shuffle", same, pairs, threshold=0.1)
    assert (rate.n, rate.not_applicable, rate.unscored, rate.rate) == (2, 2, 1, 0.5)
    fall = Aim("f", "fall", 1.0, 5.0)
    rate = check_rate("remove_support", fall, [(1.0, 1.0), (5.0, 2.0), (3.0, 3.0)], threshold=0.2)
    assert (rate.n, rate.rate) == (2, 0.5)  # a 1 cannot fall: not applicable
    rise = Aim("f", "no_rise", 1.0, 5.0)
    rate = check_rate("injection", rise, [(5.0, 5.0), (3.0, 5.0), (3.0, 3.0)], threshold=0.05)
    assert (rate.n, rate.rate) == (2, 0.5)


@pytest.mark.parametrize(("broken", "flagged"), [(0, False), (1, False), (12, True)])
def test_a_flag_needs_the_interval_over_the_threshold(broken: int, flagged: bool) -> None:
    aim = Aim("f", "same", 1.0, 5.0)
    pairs = [(5.0, 4.0)] * broken + [(5.0, 5.0)] * (20 - broken)
    rate = check_rate("shuffle", aim, pairs, threshold=0.1, seed=1)
    assert rate.rate == broken / 20 and rate.flagged is flagged
    assert rate.ci_low is not None and rate.ci_low <= rate.rate <= (rate.ci_high or 0)


def test_the_rate_interval_is_clopper_pearsons() -> None:
    """Against scipy's exact binomial interval, at every k of a few n (one flip included)."""
    for n in (1, 2, 3, 7, 20, 151):
        for k in range(n + 1):
            low, high = clopper_pearson(k, n, 0.95)
            ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
            assert (low, high) == pytest.approx((ref.low, ref.high), abs=1e-9), (k, n)
    assert clopper_pearson(0, 0) == (None, None)


def test_one_flip_is_not_a_flag() -> None:
    """The reviewer's case: one sample that moved. A percentile bootstrap of 0/1 outcomes
    gave [1, 1] and a flag; the exact interval reaches down to 0.025."""
    rate = check_rate("shuffle", Aim("faithfulness", "same", 1, 5), [(3.0, 4.0)], threshold=0.1)
    assert (rate.n, rate.rate, rate.flagged) == (1, 1.0, False)
    assert (rate.ci_low, rate.ci_high) == pytest.approx((0.025, 1.0))
    assert (rate.shift, rate.shift_low, rate.shift_high) == (1.0, 1.0, 1.0)


# The fewest broken samples of n that flag a check at threshold 0.1 (95%): quoted in the docs.
FEWEST = {2: 2, 3: 3, 5: 3, 10: 4, 20: 6, 50: 10}


@pytest.mark.slow
def test_the_flag_is_a_one_sided_test_valid_at_every_n() -> None:
    """At a true rate equal to the threshold, the flag fires at most 2.5% of the time, at
    every n from 1 to 60 and every default threshold (exact: summed over the binomial). The
    percentile bootstrap the audit used before is the negative control: one flip of one
    sample flags, which a true rate of 0.1 gives 10% of the time."""
    lows = {n: [clopper_pearson(k, n)[0] or 0.0 for k in range(n + 1)] for n in range(1, 61)}
    for threshold in sorted(set(CHECKS.values())):
        for n, low in lows.items():
            flags = [k for k in range(n + 1) if low[k] > threshold]
            assert binom.sf(min(flags, default=n + 1) - 1, n, threshold) <= 0.025, (n, threshold)
    fewest = {n: min(k for k in range(n + 1) if lows[n][k] > 0.1) for n in FEWEST}
    assert fewest == FEWEST
    assert clopper_pearson(1, 1)[0] == pytest.approx(0.025)  # n = 1 never flags over 0.025
    low, _ = bootstrap_ci(np.ones(1), resamples=1000, seed=0)
    assert low is not None and low > 0.1  # the old interval flagged a single flip


def test_the_control_counts_movement_from_the_stored_scores() -> None:
    pairs = [(5.0, 5.0), (3.0, 4.0), (None, 2.0), (2.0, None), (1.0, 1.0)]
    control = control_rate("faithfulness", pairs)
    assert (control.n, control.moved, control.reproducible) == (3, 1, False)
    assert control.rate == pytest.approx(1 / 3)
    assert (control.ci_low, control.ci_high) == pytest.approx(clopper_pearson(1, 3))
    assert control_rate("faithfulness", [(5.0, 5.0)]).reproducible


def test_signature_changes_name_the_judge_fields_that_differ() -> None:
    stored = Signature.parse(
        "faithfulness|judge:openai/m|template:aaa|temp:0|n:1|scoring:json|version:0.1.0"
    )
    edited = Signature.parse(
        "faithfulness|judge:openai/m|template:bbb|temp:0|n:1|scoring:json|version:0.2.0"
    )
    assert signature_changes(
        {"faithfulness": stored}, {"faithfulness": edited}, ["faithfulness"]
    ) == {
        "faithfulness": [("template", "aaa", "bbb")]  # the package version is not the judge's
    }
    fell_back = Signature.parse(
        "faithfulness|judge:openai/m|template:aaa|temp:0|n:1|scoring:mixed|version:0.1.0"
    )
    # a run rewrites scoring (and n) to what the server honoured: a planned signature cannot
    # know it, so only the control's signature is held to it
    assert (
        signature_changes(
            {"faithfulness": fell_back}, {"faithfulness": stored}, ["faithfulness"], planned=True
        )
        == {}
    )
    assert signature_changes(
        {"faithfulness": fell_back}, {"faithfulness": stored}, ["faithfulness"]
    ) == {"faithfulness": [("scoring", "mixed", "json")]}
    assert signature_changes({}, {"faithfulness": stored}, ["faithfulness"]) == {}  # not recorded
