"""The judge audit: length bias, score collapse, unscored rate, self-preference and position
consistency, against hand computations on small reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge.analysis.audit import (
    audit_pairwise,
    audit_report,
    audited_rubrics,
    judge_families,
    length_strata,
    load_pairwise,
    modal_score,
    model_family,
    slope_ci,
)
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError, DataError
from rag_judge.judge.pairwise_result import PairOutcome, PairVerdict, PairwiseResult
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricKind,
    MetricSummary,
    Report,
    Restatement,
    SampleResult,
    Signature,
)

LENGTHS = [10, 20, 30, 40, 50, 60, 70, 80]
SCORES: list[float | None] = [1, 2, 2, 3, 3, 4, 5, 5]


def words(n: int) -> str:
    return " ".join(["w"] * n)


def report_of(
    scores: list[float | None],
    lengths: list[int | None] | None = None,
    *,
    judge: str = "openai/gpt-4o-mini",
    generators: list[str | None] | None = None,
    config: dict[str, Any] | None = None,
    unscored: int = 0,
) -> Report:
    """One rubric ``faith`` (with its twin) over samples of the given answer lengths (None: no
    answer); a None score is a failure, the first ``unscored`` of them unscored verdicts."""
    lengths = lengths if lengths is not None else [10] * len(scores)
    generators = generators or [None] * len(scores)
    samples, failed = [], 0
    for i, (score, length, gen) in enumerate(zip(scores, lengths, generators)):
        errors = {}
        if score is None:
            kind = FailureKind.UNSCORED if failed < unscored else FailureKind.ERROR
            errors["faith"] = Failure(kind=kind, message="no verdict")
            failed += 1
        sample = Sample(
            id=f"q{i}",
            answer=None if length is None else words(length),
            metadata={} if gen is None else {"generator": gen},
        )
        samples.append(
            SampleResult(id=f"q{i}", scores={"faith": score}, errors=errors, sample=sample)
        )
    n = sum(s is not None for s in scores)
    summary = {
        "faith": MetricSummary(
            mean=3.0, n=n, errors=failed, unscored=unscored, kind=MetricKind.JUDGE, scale=(1, 5)
        ),
        "faith_norm": MetricSummary(mean=0.5, n=n, kind=MetricKind.JUDGE, normalises="faith"),
    }
    sig = Signature.of("faith", judge=judge)
    return Report(
        summary=summary,
        samples=samples,
        signatures={"faith": sig, "faith_norm": sig},
        config=config or {},
    )


# ---- length bias ------------------------------------------------------------------------------


def test_a_judge_that_likes_long_answers() -> None:
    (audit,) = audit_report(report_of(SCORES, LENGTHS), resamples=200, seed=3).values()
    # dx = ±35, ±25, ±15, ±5: Sxx = 4200; Sxy = Σ dx·y = 245; slope 245/4200 per word.
    assert audit.metric == "faith" and audit.n == 8
    assert audit.length_slope == pytest.approx(100 * 245 / 4200, abs=1e-12)
    assert audit.length_slope == pytest.approx(100 * np.polyfit(LENGTHS, SCORES, 1)[0], abs=1e-9)
    # The interval: the same seeded draws, each resample fitted with polyfit.
    x, y = np.array(LENGTHS, float), np.array(SCORES, float)
    idx = np.random.default_rng(3).integers(0, 8, size=(200, 8))
    boot = [100 * np.polyfit(x[i], y[i], 1)[0] for i in idx if len(set(x[i])) > 1]
    expected = np.quantile(boot, [0.025, 0.975])
    assert audit.length_slope_ci == pytest.approx(tuple(expected), abs=1e-9)
    assert audit.length_slope_ci[0] > 0  # the bias is clear at 95%
    strata = [(s.low, s.high, s.n, s.mean) for s in audit.length_strata]
    assert strata == [(10, 20, 2, 1.5), (30, 40, 2, 2.5), (50, 60, 2, 3.5), (70, 80, 2, 5.0)]


def test_the_interval_follows_the_reports_confidence() -> None:
    report = report_of(SCORES, LENGTHS)
    report.confidence = 0.5  # the level stored in the report
    (audit,) = audit_report(report, resamples=200, seed=3).values()
    x, y = np.array(LENGTHS, float), np.array(SCORES, float)
    idx = np.random.default_rng(3).integers(0, 8, size=(200, 8))
    boot = [100 * np.polyfit(x[i], y[i], 1)[0] for i in idx if len(set(x[i])) > 1]
    assert audit.length_slope_ci == pytest.approx(tuple(np.quantile(boot, [0.25, 0.75])))


def test_quartiles_are_near_equal_groups_by_sorted_length() -> None:
    lengths = np.array([7, 3, 9, 1, 5, 2, 8, 4, 6, 10], float)
    scores = np.arange(10, dtype=float)
    strata = [(s.low, s.high, s.n, s.mean) for s in length_strata(lengths, scores)]
    # sorted lengths 1..10 → groups of 3, 3, 2, 2; their scores: (3, 5, 1), (7, 4, 8), (0, 6),
    # (2, 9)
    assert strata == [(1, 3, 3, 3.0), (4, 6, 3, 19 / 3), (7, 8, 2, 3.0), (9, 10, 2, 5.5)]
    assert [s.n for s in length_strata(lengths[:2], scores[:2])] == [1, 1]


def test_failed_and_unanswered_samples_are_left_out_of_the_slope() -> None:
    scores = [*SCORES, None, 4]
    (audit,) = audit_report(report_of(scores, [*LENGTHS, 90, None]), resamples=0).values()
    assert audit.n == 9  # the unanswered sample is scored: it counts for the mode
    assert audit.length_slope == pytest.approx(100 * 245 / 4200)
    assert audit.length_slope_ci is None  # no resamples
    assert sum(s.n for s in audit.length_strata) == 8


@pytest.mark.parametrize(
    ("scores", "lengths"),
    [([4, 5], [10, 20]), ([1, 3, 5], [12, 12, 12]), ([4, 5, 3], [None, None, 30])],
)
def test_no_slope_from_fewer_than_three_answers_or_one_length(scores, lengths) -> None:
    (audit,) = audit_report(report_of(scores, lengths)).values()
    assert audit.length_slope is None and audit.length_slope_ci is None


# ---- collapse and unscored ----------------------------------------------------------------------


def test_a_judge_that_always_says_five_is_collapsed() -> None:
    (audit,) = audit_report(report_of([5.0] * 6, [3, 6, 9, 12, 15, 18])).values()
    assert (audit.modal_score, audit.modal_share, audit.collapsed) == (5.0, 1.0, True)
    assert audit.length_slope == 0.0 and audit.length_slope_ci == (0.0, 0.0)


def test_the_mode_rounds_half_up_and_ties_go_low() -> None:
    assert modal_score(np.array([4.5, 4.6, 3.4, 4.49])) == (5.0, 0.5)  # → 5, 5, 3, 4
    assert modal_score(np.array([2.0, 4.0, 4.0, 2.0, 3.0])) == (2.0, 0.4)
    assert modal_score(np.array([])) == (None, None)


@pytest.mark.parametrize(("threshold", "collapsed"), [(0.8, True), (0.81, False), (1.0, False)])
def test_collapse_is_a_share_at_least_the_threshold(threshold: float, collapsed: bool) -> None:
    (audit,) = audit_report(report_of([4, 4, 4, 4, 2]), collapse_threshold=threshold).values()
    assert audit.modal_share == 0.8 and audit.collapsed is collapsed


@pytest.mark.parametrize("threshold", [0.0, 1.5, -0.2])
def test_a_threshold_outside_0_1_is_refused(threshold: float) -> None:
    with pytest.raises(ConfigError, match=rf"collapse_threshold {threshold} .* \(0, 1\]"):
        audit_report(report_of([4]), collapse_threshold=threshold)


def test_the_unscored_rate_counts_failed_verdicts() -> None:
    # 8 scored, 2 failed, 1 of them unscored: 1 / (8 + 2)
    (audit,) = audit_report(report_of([*SCORES, None, None], unscored=1)).values()
    assert audit.unscored_rate == pytest.approx(0.1)
    (empty,) = audit_report(report_of([])).values()
    assert (empty.n, empty.unscored_rate, empty.modal_score, empty.collapsed) == (
        0,
        None,
        None,
        False,
    )


def test_only_1_to_5_rubrics_are_audited() -> None:
    report = report_of(SCORES)
    judge = {"kind": MetricKind.JUDGE}
    report.summary["claim_support"] = MetricSummary(mean=0.5, n=8, **judge)
    restated = Restatement(metric="faith", given="answered")
    report.summary["faith_answered"] = MetricSummary(
        mean=3, n=8, scale=(1, 5), restates=restated, **judge
    )
    report.signatures["faith_answered"] = Signature.of("faith", given="answered")
    report.summary["rouge"] = MetricSummary(mean=3, n=8, scale=(1, 5))
    assert audited_rubrics(report) == ["faith"]
    assert list(audit_report(report)) == ["faith"]


# ---- self-preference ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("openai/gpt-4o-mini", "gpt"),
        ("gpt-3.5-turbo", "gpt"),
        ("openai/o3-mini", "gpt"),
        ("chatgpt-4o-latest", "gpt"),
        ("anthropic/claude-3-5-sonnet", "claude"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama"),
        ("Llama-3.2-1B", "llama"),
        ("ollama/llama3.1:8b", "llama"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm"),
        ("/models/Qwen2.5-0.5B-Instruct/", "qwen"),
        ("mistralai/Mixtral-8x7B", "mistral"),
        ("google/gemma-2-9b", "gemma"),
        ("microsoft/Phi-3-mini", "phi"),
        ("stub/stub-lexical-support", "stub"),
        ("4o", None),
    ],
)
def test_model_families(model: str, family: str | None) -> None:
    assert model_family(model) == family


def test_a_jury_has_each_jurors_family() -> None:
    sig = Signature.of("faith", judge="jury[openai/gpt-4o, anthropic/claude-3-haiku]")
    assert judge_families(sig) == {"openai/gpt-4o": "gpt", "anthropic/claude-3-haiku": "claude"}
    assert judge_families(Signature.of("faith")) == {} == judge_families(None)


def test_the_generator_from_each_samples_metadata() -> None:
    gens = ["gpt-4o", "claude-3-opus", None, "openai/gpt-4.1"]
    report = report_of([4, 5, 3, None], generators=gens)
    (audit,) = audit_report(report).values()
    assert audit.self_preference is True
    # the failed sample (gpt-4.1) is not judged; the third has no generator
    assert audit.self_preference_note == (
        "judge family gpt (openai/gpt-4o-mini) generated 1/3 judged answers "
        "(generator families: claude (1), gpt (1); 1 with no generator recorded)"
    )


def test_metadata_model_and_the_run_level_generator() -> None:
    report = report_of([4, 5, 3], config={"generator": "meta-llama/Llama-3.1-8B"})
    report.samples[0].sample = Sample(id="q0", answer="a", metadata={"model": "Qwen2-7B"})
    (audit,) = audit_report(report).values()
    assert audit.self_preference is False
    assert audit.self_preference_note == (
        "judge family gpt (openai/gpt-4o-mini); generator families: llama (2), qwen (1)"
    )
    report.config["generator"] = "gpt-4o"
    (audit,) = audit_report(report).values()
    assert audit.self_preference is True  # two samples from the run's gpt-4o


def test_a_jury_prefers_itself_when_any_juror_shares_the_family() -> None:
    jury = "jury[openai/gpt-4o,anthropic/claude-3-haiku]"
    report = report_of([4, 5], judge=jury, config={"generator": "claude-3-5-sonnet"})
    (audit,) = audit_report(report).values()
    assert audit.self_preference is True
    assert "gpt (openai/gpt-4o), claude (anthropic/claude-3-haiku) generated 2/2" in (
        audit.self_preference_note
    )


def test_unknown_without_a_generator_or_a_judge() -> None:
    (audit,) = audit_report(report_of([4, 5])).values()
    assert audit.self_preference is None
    assert "no generator recorded" in audit.self_preference_note
    report = report_of([4, 5], config={"generator": "gpt-4o"})
    report.signatures["faith"] = Signature.of("faith")
    (audit,) = audit_report(report).values()
    assert audit.self_preference is None
    assert audit.self_preference_note == "the judge model is not recorded in the rubric's signature"


# ---- pairwise -----------------------------------------------------------------------------------


def pairwise_result() -> PairwiseResult:
    def pair(sid: str, outcome: Any, consistent: bool | None) -> PairOutcome:
        verdicts = [PairVerdict(order="AB", preferred=outcome), PairVerdict(order="BA")]
        return PairOutcome(sid, outcome, consistent, None if outcome else "no verdict", verdicts)

    pairs = [pair("q1", "A", True), pair("q2", "B", True), pair("q3", "tie", False)]
    return PairwiseResult(
        rubric="correctness",
        signature=Signature.of("pairwise-correctness", judge="stub/stub"),
        labels=("a.jsonl", "b.jsonl"),
        pairs=[*pairs, pair("q4", None, None)],
        only_a=[],
        only_b=["q9"],
        win_rate=0.5,
        ci=(0.1, 0.9),
        resamples=10,
        confidence=0.95,
        seed=0,
    )


def test_position_consistency_of_a_pairwise_run(tmp_path: Path) -> None:
    result = pairwise_result()
    audit = audit_pairwise(result)
    # 3 scored pairs, the tie from flipped verdicts: 2/3 consistent; 1 of 4 pairs unscored
    assert audit.position_consistency == pytest.approx(2 / 3) == result.position_consistency
    assert (audit.metric, audit.n, audit.unscored_rate) == ("correctness", 3, 0.25)
    path = tmp_path / "pairwise.json"
    path.write_text(json.dumps(result.to_dict()))
    assert audit_pairwise(load_pairwise(path)) == audit


def test_a_file_that_is_not_a_pairwise_json(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"summary": {}}')
    with pytest.raises(DataError, match=r"report.json: not a rag-judge pairwise JSON \(no key"):
        load_pairwise(path)
    data = pairwise_result().to_dict()
    data["samples"][0]["outcome"] = "C"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"outcome 'C'.*expected an outcome of A, B, tie or null"):
        load_pairwise(path)
    with pytest.raises(DataError, match=r"missing\.json: file not found"):
        load_pairwise(tmp_path / "missing.json")


def test_the_audit_reads_lengths_and_generators_from_the_index_not_the_samples_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rag_judge import Pipeline, load_config
    from rag_judge.report.samples import SampleFile
    from rag_judge.resources import resource_dir

    config = load_config(resource_dir("configs") / "demo.yaml")
    judges = [e for e in config.evaluators if e.type == "judge"]
    inline = Pipeline(config.model_copy(update={"evaluators": judges})).run().report
    in_file = Pipeline(config.model_copy(update={"evaluators": judges, "inline_samples": 0}))
    report = in_file.run().report
    assert isinstance(report.samples, SampleFile)
    report.index()  # built as the run wrote the file

    def unread(self: SampleFile) -> Any:
        raise AssertionError("the audit read samples.jsonl again")

    monkeypatch.setattr(SampleFile, "__iter__", unread)
    audited = audit_report(report)
    assert audited and audited == audit_report(inline)


def test_rubrics_on_the_same_answers_share_draws_and_others_keep_their_own() -> None:
    lengths = [12, 40, None, 25, 33, 18, 60, 41, 27, 9]
    faith = [2.0, 4.0, 3.0, 3.0, 4.0, 2.0, 5.0, 4.0, 3.0, 1.0]
    report = report_of(faith, lengths)  # type: ignore[arg-type]
    correct = [5.0, 4.0, 1.0, None, 2.0, 2.0, 1.0, 3.0, 3.0, 4.0]  # one failure: other answers
    relevant = [1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 5.0, 5.0, 5.0]  # faith's answers
    for name, column in (("correct", correct), ("relevant", relevant)):
        for r, value in zip(report.samples, column, strict=True):
            r.scores[name] = value
        n = sum(v is not None for v in column)
        info = report.summary["faith"].model_copy(update={"n": n, "errors": len(column) - n})
        report.summary[name] = info
        report.signatures[name] = report.signatures["faith"]
    audits = audit_report(report, resamples=300, seed=4)
    for name, column in (("faith", faith), ("correct", correct), ("relevant", relevant)):
        kept = [(x, y) for x, y in zip(lengths, column, strict=True) if None not in (x, y)]
        x, y = (np.array(v, dtype=np.float64) for v in zip(*kept, strict=True))
        assert audits[name].length_slope_ci == slope_ci(x, y, resamples=300, seed=4), name
