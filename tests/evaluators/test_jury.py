"""A jury of judges for ``type: judge``: its settings, its aggregations (by hand), quorum and
failure policy with a juror that fails (the fake OpenAI server on 127.0.0.1), the per-juror
verdicts it keeps, its signature, its dry run and a run through the Pipeline."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from rag_judge import Pipeline
from rag_judge.analysis.jury import jury_agreement
from rag_judge.config import load_config
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.judge.jury import aggregate, juror_names
from rag_judge.llm.base import Completion, CompletionRequest
from rag_judge.llm.providers.stub import StubClient, fixed
from rag_judge.report.model import FailureKind, JudgeName
from tests.evaluators import judge_sample
from tests.fake_openai_server import FakeOpenAIServer, Reply, error

LEXICAL = {"provider": "stub"}
TWO = {"provider": "stub", "stub": "fixed", "stub_score": 2}
FIVE = {"provider": "stub", "stub": "fixed", "stub_score": 5}
NAMES = ["stub/stub-lexical-support", "stub/stub-fixed-2", "stub/stub-fixed-5"]


def _sample(i: int, context: str, **extra: Any) -> Sample:
    # The lexical stub scores faithfulness 1 + round(4 * share of the answer's 4 content words
    # found in the context): all -> 5, two -> 3, one -> 2, none -> 1.
    answer = "alpha beta gamma delta"
    return judge_sample(i, answer=answer, contexts=[{"id": f"d{i}", "text": context}], **extra)


SAMPLES = [
    _sample(1, "alpha beta gamma delta"),  # verdicts [5, 2, 5]
    _sample(2, "alpha beta"),  # [3, 2, 5]
    _sample(3, "zeta"),  # [1, 2, 5]
    _sample(4, "alpha"),  # [2, 2, 5]
]


def _jury(*judges: dict[str, Any], **options: Any) -> JudgeEvaluator:
    rubrics = options.pop("rubrics", ["faithfulness"])
    judges = judges or (LEXICAL, TWO, FIVE)
    return JudgeEvaluator(rubrics=rubrics, cache=None, judges=judges, **options)


# ---- the aggregation, by hand --------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "scores", "expected"),
    [
        ("mean", [1, 2, 4], 7 / 3),
        ("mean", [3.5], 3.5),
        ("median", [4, 1, 3], 3.0),
        ("median", [5, 1, 2, 4], 3.0),  # the mean of the middle two, 2 and 4
        ("median", [1.5, 4], 2.75),
        ("majority", [4, 4, 2], 4.0),
        ("majority", [2, 4], 2.0),  # a tie: the lowest
        ("majority", [5, 5, 1, 3, 3], 3.0),  # 3 and 5 tie at two each: the lowest
        ("majority", [2.5, 3.4, 4.5, 4.6], 3.0),  # rounded half up: 3, 3, 5, 5; a tie
        ("majority", [3.5], 4.0),
        ("trimmed", [1, 2, 4, 5], 3.0),  # without 1 and 5
        ("trimmed", [5, 1, 1], 1.0),  # without one 1 and the 5
        ("trimmed", [1, 1, 4, 5, 5], 10 / 3),
        ("trimmed", [1, 5], 3.0),  # fewer than 3: the mean
    ],
)
def test_each_aggregation_against_a_hand_computation(
    how: Any, scores: list[float], expected: float
) -> None:
    assert aggregate(scores, how) == pytest.approx(expected, abs=1e-12)
    assert aggregate(list(reversed(scores)), how) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="at least one scored verdict"):
        aggregate([], how)


# ---- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"judges": [LEXICAL]}, "judges: a jury needs at least 2 judges, got 1"),
        (
            {"judges": [LEXICAL, TWO], "client": {"provider": "stub", "stub": "fixed"}},
            "judges and client are both set",
        ),
        ({"judges": [LEXICAL, TWO, FIVE], "quorum": 4}, "quorum=4 must be between 1 and the "
         "number of judges, 3"),
        ({"judges": [LEXICAL, TWO], "quorum": 0}, "quorum=0 must be between 1"),
        ({"judges": [LEXICAL, TWO, LEXICAL]}, "judges[2] repeats judges[0]"),
        ({"aggregation": "median"}, "aggregation='median' without judges"),
        ({"quorum": 2, "on_judge_failure": "fail"}, "quorum=2, on_judge_failure='fail' without"),
        ({"judges": [LEXICAL, TWO], "aggregation": "mode"},
         "'mean', 'median', 'majority' or 'trimmed'"),
        ({"judges": [LEXICAL, TWO], "on_judge_failure": "skip"}, "'drop' or 'fail'"),
        ({"judges": [LEXICAL, {"provider": "gpt"}]}, "judges.1.provider"),
    ],
)  # fmt: skip
def test_invalid_jury_settings_say_what_and_the_legal_values(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as err:
        JudgeEvaluator.model_validate({"type": "judge", "cache": None, **config})
    assert message in str(err.value)


def test_a_yaml_jury_loads_and_a_bad_one_names_its_line(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "evaluators:\n  - type: judge\n    cache: null\n    aggregation: median\n"
        "    judges:\n      - {provider: stub}\n      - {provider: stub, stub: fixed}\n",
        encoding="utf-8",
    )
    (judge,) = load_config(good).evaluators
    assert isinstance(judge, JudgeEvaluator)
    assert [c.stub for c in judge.judges] == ["lexical_support", "fixed"]
    assert judge.aggregation == "median" and judge.jury.quorum == 2  # 2 // 2 + 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "evaluators:\n  - type: judge\n    judges:\n      - {provider: stub}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert str(err.value).startswith(f"{bad}:2: ")
    assert "a jury needs at least 2 judges, got 1" in str(err.value)


def test_a_missing_key_of_a_juror_names_the_juror(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JURY_TEST_KEY", raising=False)
    juror = {"provider": "openai", "model": "gpt-4o", "api_key_env": "JURY_TEST_KEY"}
    judge = _jury(LEXICAL, juror)
    with pytest.raises(ConfigError) as err:
        judge.prepare()
    assert err.value.loc == ("judges", 1, "api_key_env")
    assert str(err.value).startswith("judges[1].api_key_env: ")


def test_the_default_quorum_is_a_majority_and_a_client_override_must_match_the_jury() -> None:
    juries = [_jury(LEXICAL, TWO), _jury(), _jury(LEXICAL, TWO, FIVE, {**TWO, "stub_score": 1})]
    assert [j.jury.quorum for j in juries] == [2, 2, 3]  # 2 // 2 + 1, 3 // 2 + 1, 4 // 2 + 1
    assert _jury(quorum=1).jury.quorum == 1
    with pytest.raises(ValueError, match="takes one client per judge, in order; got one client"):
        _jury().evaluate(SAMPLES[:1], client=StubClient(fixed(3)))
    with pytest.raises(ValueError, match="a list of clients is for a jury"):
        JudgeEvaluator(cache=None).evaluate(SAMPLES[:1], client=[StubClient(), StubClient()])


def test_repeated_juror_names_are_numbered() -> None:
    names = [JudgeName(provider="stub", model=f"stub-fixed-{k}", stub=True) for k in (3, 3, 4)]
    assert [n.text for n in juror_names(names)] == [
        "stub/stub-fixed-3", "stub/stub-fixed-3#2", "stub/stub-fixed-4",
    ]  # fmt: skip
    assert all(n.stub for n in juror_names(names))


# ---- a jury of stubs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("mean", [4.0, 10 / 3, 8 / 3, 3.0]),
        ("median", [5.0, 3.0, 2.0, 2.0]),
        ("majority", [5.0, 2.0, 1.0, 2.0]),  # [3, 2, 5] and [1, 2, 5] tie: the lowest
        ("trimmed", [5.0, 3.0, 2.0, 2.0]),  # the middle verdict of three
    ],
)
def test_a_jury_of_stubs_scores_each_aggregation_by_hand(how: Any, expected: list[float]) -> None:
    result = _jury(aggregation=how).evaluate(SAMPLES)
    assert result.scores["faithfulness"] == pytest.approx(expected)
    assert result.scores["faithfulness_norm"] == pytest.approx([(s - 1) / 4 for s in expected])
    judged = [j["faithfulness"] for j in result.judgments]
    assert [j.scores for j in judged] == [[5, 2, 5], [3, 2, 5], [1, 2, 5], [2, 2, 5]]
    spreads = [math.sqrt(2), math.sqrt(14) / 3, math.sqrt(26) / 3, math.sqrt(2)]
    assert [j.spread for j in judged] == pytest.approx(spreads)
    assert all(j.reason == f"{how} of 3 of 3 judges" for j in judged)
    assert all(e == {} for e in result.errors)


def test_the_jury_keeps_each_jurors_verdict_under_its_name() -> None:
    result = _jury().evaluate(SAMPLES[1:2])
    entry = result.judgments[0]["faithfulness"]
    assert entry.jury is not None
    assert [(j.judge, j.score) for j in entry.jury] == list(zip(NAMES, [3.0, 2.0, 5.0]))
    assert entry.jury[1].reason == "fixed stub verdict"
    assert "50%" in entry.jury[0].reason  # the lexical stub's own reason: 2 of 4 words
    assert (entry.attempts, entry.cached) == (3, False)
    assert result.usage.requests == 3


def test_the_signature_names_the_jury_and_how_it_was_combined() -> None:
    judge = _jury(aggregation="trimmed", quorum=3, on_judge_failure="fail")
    options = judge.signature("faithfulness").options
    assert options["judge"] == f"jury[{','.join(NAMES)}]"
    assert (options["agg"], options["quorum"], options["on_fail"]) == ("trimmed", "3", "fail")
    assert options["scoring"] == "json"
    rendered = judge.signature("faithfulness_norm").render()
    assert rendered.startswith(f"faithfulness_norm|judge:jury[{','.join(NAMES)}]|template:")
    assert "|agg:trimmed|quorum:3|on_fail:fail|scale:(s-1)/4|version:" in rendered
    result = judge.evaluate(SAMPLES[:1])
    assert result.signatures["faithfulness"] == judge.signature("faithfulness")


def test_jurors_that_score_differently_are_joined_in_the_signature() -> None:
    labels = StubClient(fixed(4))
    labels.scores_labels = True  # as the local client: it scores a distribution
    judge = _jury(LEXICAL, TWO)
    result = judge.evaluate(SAMPLES[:1], client=[StubClient(), labels])
    assert result.signatures["faithfulness"].options["scoring"] == "json+distribution"
    (jury,) = [j["faithfulness"].jury for j in result.judgments]
    assert jury is not None and jury[1].probs == {"4": 1.0}
    assert result.scores["faithfulness"] == [4.5]  # (5 + 4) / 2


def test_a_per_context_rubric_is_averaged_over_contexts_then_judges() -> None:
    sample = judge_sample(
        1,
        question="alpha beta?",
        contexts=[{"id": "a", "text": "alpha beta"}, {"id": "b", "text": "zeta"}],
    )
    result = _jury(LEXICAL, TWO, rubrics=["context_relevance"]).evaluate([sample])
    entry = result.judgments[0]["context_relevance"]
    assert entry.jury is not None and entry.jury[0].contexts is not None
    assert [c.score for c in entry.jury[0].contexts] == [5, 1]  # lexical: 100% and 0%
    assert result.scores["context_relevance"] == [(3 + 2) / 2]
    assert result.signatures["context_relevance"].options["agg"] == "mean-over-contexts,mean"


def test_a_missing_input_is_reported_once_not_per_juror() -> None:
    samples = [*SAMPLES[:2], _sample(3, "zeta", references=[])]
    result = _jury(rubrics=["correctness"]).evaluate(samples)
    failure = result.errors[2]["correctness"]
    assert failure.kind is FailureKind.MISSING_INPUT
    assert "stub/" not in failure.message and "correctness" not in result.judgments[2]
    assert result.scores["correctness"][2] is None and result.scores["correctness"][0] is not None


def test_logprobs_fallback_is_still_said_per_juror(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rag_judge.evaluators.judge"):
        result = _jury(LEXICAL, TWO, logprobs=True).evaluate(SAMPLES[:2])
    assert result.signatures["faithfulness"].options["scoring"] == "integer"
    warned = [r.getMessage() for r in caplog.records if "logprobs were asked" in r.getMessage()]
    assert len(warned) == 2  # one per juror
    assert all("faithfulness 2 of 2 (scoring:integer)" in w for w in warned)


def test_a_jury_shares_one_cache_file(tmp_path: Path) -> None:
    judge = JudgeEvaluator(
        rubrics=["faithfulness"], cache=tmp_path / "judge.sqlite", judges=[LEXICAL, TWO, FIVE]
    )
    first = judge.evaluate(SAMPLES)
    again = judge.evaluate(SAMPLES)
    assert (first.usage.requests, first.usage.cache_hits) == (12, 0)
    assert (again.usage.requests, again.usage.cache_hits) == (0, 12)
    assert again.scores == first.scores
    assert all(j["faithfulness"].cached for j in again.judgments)


# ---- a juror that fails ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def _flaky(body: dict[str, Any]) -> Reply | str:
    """Scores 4, but a 500 for sample 2 and an unreadable reply (asked and re-asked) for 3."""
    prompt = json.dumps(body["messages"])
    if "Question 2?" in prompt:
        return error(500, "boom")
    if "Question 3?" in prompt:
        return "no verdict here"
    return '{"reason": "fine", "score": 4}'


def _with_server(srv: FakeOpenAIServer, **options: Any) -> JudgeEvaluator:
    fake = {"provider": "openai", "model": "fake-judge", "max_attempts": 1}
    return _jury(LEXICAL, TWO, {**fake, "base_url": srv.base_url}, **options)


def test_drop_aggregates_the_jurors_that_scored() -> None:
    with FakeOpenAIServer(_flaky) as srv:
        result = _with_server(srv).evaluate(SAMPLES[:3])
    # verdicts: [5, 2, 4], [3, 2, 500], [1, 2, unreadable]; quorum 2 of 3
    assert result.scores["faithfulness"] == pytest.approx([11 / 3, 2.5, 1.5])
    judged = [j["faithfulness"] for j in result.judgments]
    assert judged[1].reason.startswith("mean of 2 of 3 judges; dropped openai/fake-judge: ")
    assert "HTTP 500" in judged[1].reason and "boom" in judged[1].reason
    assert judged[2].reason.startswith("mean of 2 of 3 judges; dropped openai/fake-judge: unscored")
    assert judged[1].jury is not None and judged[1].jury[2].judge == "openai/fake-judge"
    assert judged[1].jury[2].score is None and judged[1].scores == [3, 2]
    assert judged[1].spread == pytest.approx(0.5)
    assert judged[2].jury is not None and judged[2].jury[2].attempts == 2  # asked and re-asked
    assert all(e == {} for e in result.errors)
    assert result.usage.failures == 1  # the 500


def test_below_quorum_the_sample_is_unscored_naming_each_failed_judge() -> None:
    with FakeOpenAIServer(_flaky) as srv:
        result = _with_server(srv, quorum=3).evaluate(SAMPLES[:3])
    assert result.scores["faithfulness"] == [pytest.approx(11 / 3), None, None]
    failure = result.errors[1]["faithfulness"]
    assert failure.kind is FailureKind.UNSCORED
    assert failure.message.startswith("2 of 3 judges scored, fewer than the quorum of 3: ")
    assert "openai/fake-judge: " in failure.message and "HTTP 500" in failure.message
    assert result.errors[1]["faithfulness_norm"] == failure
    entry = result.judgments[1]["faithfulness"]
    assert entry.score is None and entry.scores == [3, 2] and entry.jury is not None


def test_fail_unscores_a_sample_any_juror_failed() -> None:
    with FakeOpenAIServer(_flaky) as srv:
        result = _with_server(srv, on_judge_failure="fail", quorum=1).evaluate(SAMPLES[:3])
    assert result.scores["faithfulness"] == [pytest.approx(11 / 3), None, None]
    message = result.errors[2]["faithfulness"].message
    assert message.startswith("1 of 3 judges failed (on_judge_failure: fail): openai/fake-judge: ")
    assert "unscored: " in message
    assert result.errors[2]["faithfulness"].kind is FailureKind.UNSCORED


class Rendezvous:
    """A juror whose calls wait until the other juror is called: both must be in flight."""

    provider = "test"
    base_url: str | None = None
    scores_labels = False
    supports_logprobs = False
    cancellable = True

    def __init__(self, model: str, other: str, called: dict[str, asyncio.Event]) -> None:
        self.model, self.other, self.called = model, other, called

    async def complete(self, request: CompletionRequest) -> Completion:
        self.called[self.model].set()
        await asyncio.wait_for(self.called[self.other].wait(), timeout=30)
        return Completion(choices=['{"reason": "r", "score": 3}'])


def test_the_jurors_requests_run_concurrently_in_one_loop() -> None:
    # Events bind to the loop that first waits on them: a second loop would be refused.
    called = {"a": asyncio.Event(), "b": asyncio.Event()}
    jurors = [Rendezvous("a", "b", called), Rendezvous("b", "a", called)]
    scored: list[float | None] = []

    def emit(result: Any) -> None:
        scored.extend(result.scores["faithfulness"])

    chunks = [SAMPLES[:2], SAMPLES[2:]]
    tail = _jury(LEXICAL, TWO).prepare(client=jurors).evaluate_chunks(chunks, emit)
    assert scored == [3.0] * 4 and tail.usage.requests == 8
    assert tail.signatures["faithfulness"].options["judge"] == "jury[test/a,test/b]"


# ---- dry run -------------------------------------------------------------------------------------


def test_the_dry_run_sums_over_the_jurors() -> None:
    samples = [*SAMPLES[:3], _sample(4, "alpha", references=[])]
    rubrics = ["faithfulness", "correctness"]
    priced = {"prompt_price_per_1k": 1.0, "completion_price_per_1k": 0.0}
    one = JudgeEvaluator(rubrics=rubrics, cache=None, client={**LEXICAL, **priced})
    single = one.dry_run(samples)
    assert (single.prompts, single.skipped) == (4 + 3, 1)
    jury = _jury(*({**j, **priced} for j in (LEXICAL, TWO, FIVE)), rubrics=rubrics).dry_run(samples)
    assert (jury.prompts, jury.requests, jury.cache_hits, jury.skipped) == (21, 21, 0, 1)
    # the stubs see the same prompts: three times one judge's tokens and cost
    assert jury.prompt_tokens_estimate == 3 * single.prompt_tokens_estimate
    assert jury.completion_tokens_max == 3 * single.completion_tokens_max == 3 * 7 * 512
    assert single.cost_estimate is not None
    assert jury.cost_estimate == pytest.approx(3 * single.cost_estimate)
    unpriced = _jury({**LEXICAL, **priced}, TWO, rubrics=rubrics).dry_run(samples)
    assert unpriced.cost_estimate is None and unpriced.prompts == 14


# ---- through the pipeline ------------------------------------------------------------------------


def test_a_pipeline_run_keeps_the_jury_in_the_report() -> None:
    report = Pipeline([_jury(aggregation="median")]).run(SAMPLES).report
    judged = [s.judgments["faithfulness"] for s in report.samples]
    assert [j.score for j in judged] == [5.0, 3.0, 2.0, 2.0]
    assert all(j.jury is not None and [v.judge for v in j.jury] == NAMES for j in judged)
    assert report.signatures["faithfulness"].options["judge"] == f"jury[{','.join(NAMES)}]"
    assert report.summary["faithfulness"].mean == pytest.approx(3.0)
    # the spread is the per-sample uncertainty: lower (more negative) is more uncertain
    keys, is_spread = report.index().uncertainty("faithfulness")
    spreads = [math.sqrt(2), math.sqrt(14) / 3, math.sqrt(26) / 3, math.sqrt(2)]
    assert keys == pytest.approx(-np.array(spreads)) and is_spread.all()
    # and the agreement reads the kept verdicts (matrix [[5,2,5],[3,2,5],[1,2,5],[2,2,5]])
    agreement = jury_agreement(report)["faithfulness"]
    assert agreement.judges == NAMES and agreement.units == 4
    # D_o = (1/12) * sum 2*3*S_u/2 with S_u = 6, 14/3, 26/3, 6: 76/12; D_e = 2 * (113/4) / 11
    assert agreement.alpha == pytest.approx(1 - (76 / 12) / (113 / 22))
    assert agreement.failed == dict.fromkeys(NAMES, 0)
