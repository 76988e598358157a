"""The judge is honest about what the server did: logprobs, ``n`` and the response format a
server ignored, a reply cut off at max_tokens, the local client's label mass, and per-context
grades that are missing."""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

import pytest

from rag_judge.data.sample import Sample
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.llm import ClientConfig
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.providers.stub import StubClient, parse_sections
from rag_judge.report.model import FailureKind, PerContextJudgment
from tests.evaluators import judge_sample

_ASPECT = re.compile(r"You grade one aspect, ([a-z ]+),")
PIECES = ['{"', "reason", '":', ' "', "ok", '",', ' "', "score", '":', " ", "4", "}"]
TEXT = "".join(PIECES)


def _aspect(request: CompletionRequest) -> str:
    match = _ASPECT.search(request.messages[0].content)
    assert match, request.messages[0].content
    return match.group(1).replace(" ", "_")


def _answer(request: CompletionRequest) -> str:
    return parse_sections(request.messages[1].content)["ANSWER"]


def _logprobs() -> list[dict[str, float]]:
    lp = [{p: -0.01} for p in PIECES]
    lp[10] = {"4": math.log(0.6), "5": math.log(0.4)}
    return lp


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# ---- logprobs the server did not send -----------------------------------------------------------


def test_a_logprobs_judge_without_logprobs_says_so_once_and_signs_integer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judge = JudgeEvaluator(rubrics=["fluency", "coherence"], cache=None, logprobs=True)
    samples = [judge_sample(i) for i in range(1, 5)]
    with caplog.at_level(logging.WARNING, logger="rag_judge"):
        result = judge.evaluate(samples, client=StubClient(lambda r: Completion([TEXT])))

    assert result.scores["fluency"] == [4, 4, 4, 4]
    for judged in result.judgments:
        for rubric in ("fluency", "coherence"):
            entry = judged[rubric]
            assert entry.logprobs_missing is True and entry.probs is None
            assert entry.verdict is None and entry.score == 4
            assert entry.model_dump()["logprobs_missing"] is True
    for metric, sig in result.signatures.items():
        assert sig.options["scoring"] == "integer", metric
    assert "|scoring:integer|scale:(s-1)/4|" in result.signatures["fluency_norm"].render()
    warnings = _warnings(caplog)
    assert len(warnings) == 1  # one per run, not one per sample
    assert "logprobs" in warnings[0] and "fluency 4 of 4 (scoring:integer)" in warnings[0]
    assert "coherence 4 of 4 (scoring:integer)" in warnings[0]
    # The signature before a run still says what is asked for.
    assert judge.signature("fluency").options["scoring"] == "logprobs"


def test_some_judgments_without_logprobs_sign_the_rubric_mixed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def respond(request: CompletionRequest) -> Completion:
        if _aspect(request) == "fluency" or _answer(request) == "A1":
            return Completion([TEXT], token_logprobs=_logprobs())
        return Completion([TEXT])  # coherence of A2 and A3: the server dropped them

    judge = JudgeEvaluator(rubrics=["fluency", "coherence"], cache=None, logprobs=True)
    samples = [judge_sample(i) for i in range(1, 4)]
    with caplog.at_level(logging.WARNING, logger="rag_judge"):
        result = judge.evaluate(samples, client=StubClient(respond))

    assert result.scores["fluency"] == pytest.approx([4.4, 4.4, 4.4])
    assert result.scores["coherence"] == pytest.approx([4.4, 4, 4])
    assert [j["coherence"].logprobs_missing for j in result.judgments] == [None, True, True]
    assert all(j["fluency"].logprobs_missing is None for j in result.judgments)
    assert result.signatures["fluency"].options["scoring"] == "logprobs"
    assert result.signatures["coherence"].options["scoring"] == "mixed"
    assert result.signatures["coherence_norm"].options["scoring"] == "mixed"
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "coherence 2 of 3 (scoring:mixed)" in warnings[0]
    assert "fluency" not in warnings[0]


def test_a_json_judge_marks_nothing_missing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rag_judge"):
        result = JudgeEvaluator(rubrics=["fluency"], cache=None).evaluate(
            [judge_sample(1)], client=StubClient(lambda r: Completion([TEXT]))
        )
    assert result.judgments[0]["fluency"].logprobs_missing is None
    assert result.signatures["fluency"].options["scoring"] == "json"
    assert _warnings(caplog) == []


# ---- fewer choices than n -----------------------------------------------------------------------


def test_fewer_choices_than_asked_are_recorded(caplog: pytest.LogCaptureFixture) -> None:
    def respond(request: CompletionRequest) -> Completion:
        assert request.n == 3
        scores = (2, 4, 4) if _answer(request) == "A1" else (5,)  # a server that ignores n
        return Completion([json.dumps({"reason": "r", "score": s}) for s in scores])

    judge = JudgeEvaluator(rubrics=["fluency"], cache=None, n=3, temperature=0.7)
    with caplog.at_level(logging.WARNING, logger="rag_judge"):
        result = judge.evaluate(
            [judge_sample(1), judge_sample(2), judge_sample(3)], client=StubClient(respond)
        )
    full, *short = [j["fluency"] for j in result.judgments]
    assert full.choices_received is None and full.scores == [2, 4, 4]
    for entry in short:
        assert entry.choices_received == 1 and entry.score == 5
        assert entry.scores is None and entry.spread is None  # one verdict has no spread
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert "n=3" in warnings[0] and "fluency 2 of 3" in warnings[0]


# ---- the response format, as requested and as answered ------------------------------------------


def test_structured_output_records_the_request_and_schema_valid_the_reply() -> None:
    valid = '{"reason": "grounded", "score": 4}'
    replies: dict[str, str | Completion] = {
        "A1": Completion([valid], structured_output=True),  # asked, honoured
        "A2": Completion(["The answer is fine.\nScore: 4"], structured_output=True),  # ignored
        "A3": Completion([valid], structured_output=False),  # refused, resent without
        "A4": Completion([f"```json\n{valid}\n```"], structured_output=False),
        "A5": valid,  # a client that does not say (the stub)
    }

    def respond(request: CompletionRequest) -> str | Completion:
        return replies[_answer(request)]

    judge = JudgeEvaluator(rubrics=["fluency"], cache=None)
    result = judge.evaluate([judge_sample(i) for i in range(1, 6)], client=StubClient(respond))
    assert result.scores["fluency"] == [4, 4, 4, 4, 4]
    seen = [(j["fluency"].structured_output, j["fluency"].schema_valid) for j in result.judgments]
    assert seen == [(True, True), (True, False), (False, True), (False, False), (None, True)]
    dumped = result.judgments[4]["fluency"].model_dump()
    assert "structured_output" not in dumped and dumped["schema_valid"] is True
    assert "finish_reason" not in dumped and "choices_received" not in dumped


def test_an_unscored_reply_is_not_schema_valid() -> None:
    judge = JudgeEvaluator(rubrics=["fluency"], cache=None, reask=0)
    result = judge.evaluate(
        [judge_sample(1)],
        client=StubClient(lambda r: Completion(["I cannot judge this."], structured_output=True)),
    )
    entry = result.judgments[0]["fluency"]
    assert entry.score is None and entry.schema_valid is False and entry.structured_output is True


# ---- label mass from the local client -----------------------------------------------------------


class FakeLocal:
    """A label-scoring client like the local one, with its label mass."""

    provider = "local"
    model = "fake-local"
    base_url: str | None = None
    scores_labels = True
    supports_logprobs = False
    cancellable = False

    async def complete(self, request: CompletionRequest) -> Completion:
        probs = {"1": 0.0, "2": 0.5, "3": 0.5, "4": 0.0, "5": 0.0}
        return Completion(["2"], score_probs=probs, extra={"label_mass": 0.875})


def test_the_local_clients_label_mass_reaches_the_judgment() -> None:
    judge = JudgeEvaluator(rubrics=["fluency"], cache=None, client=ClientConfig(provider="local"))
    result = judge.evaluate([judge_sample(1)], client=FakeLocal())
    entry = result.judgments[0]["fluency"]
    assert entry.score == pytest.approx(2.5) and entry.label_mass == 0.875
    assert entry.schema_valid is None  # a label, not JSON: nothing to check
    assert entry.model_dump()["label_mass"] == 0.875


# ---- replies cut off at max_tokens --------------------------------------------------------------


def test_a_reply_cut_off_at_max_tokens_is_unscored_with_advice() -> None:
    replies: dict[str, str | Completion] = {
        "A1": Completion(['{"reason": "The answer restates every'], finish_reason="length"),
        "A2": Completion(['{"reason": "fine", "score": 4'], finish_reason="length"),
        "A3": Completion(['{"reason": "fine", "score": 5}'], finish_reason="stop"),
    }
    judge = JudgeEvaluator(rubrics=["fluency"], cache=None, max_tokens=64)
    result = judge.evaluate(
        [judge_sample(i) for i in range(1, 4)],
        client=StubClient(lambda r: replies[_answer(r)]),
    )
    assert result.scores["fluency"] == [None, 4, 5]
    failure = result.errors[0]["fluency"]
    assert failure.kind is FailureKind.UNSCORED
    assert failure.message.startswith(
        "the reply was cut off at max_tokens=64 (finish_reason 'length')"
    )
    assert failure.message.endswith("raise max_tokens")
    cut, read, done = (j["fluency"] for j in result.judgments)
    assert cut.finish_reason == "length" and cut.attempts == 2  # re-asked once, cut again
    assert cut.reason == failure.message
    assert read.finish_reason == "length" and read.score == 4  # cut, but after the score
    assert done.finish_reason is None and "finish_reason" not in done.model_dump()


# ---- a per-context rubric with contexts left ungraded -------------------------------------------


def test_an_unscored_per_context_judgment_names_the_ungraded_contexts() -> None:
    def respond(request: CompletionRequest) -> str:
        text = parse_sections(request.messages[1].content)["CONTEXT 1"]
        if text == "broken":
            raise LLMError("HTTP 500 from fake: boom")
        return "garbage" if text == "garbage" else json.dumps({"reason": text, "score": 4})

    contexts: list[Any] = [{"id": "a", "text": "alpha"}, {"id": "b", "text": "garbage"}]
    samples = [
        Sample(id="q1", question="q?", contexts=[*contexts, {"id": "c", "text": "broken"}]),
        Sample(id="q2", question="q?", contexts=["alpha", "beta"]),
    ]
    judge = JudgeEvaluator(rubrics=["context_relevance"], cache=None, reask=0)
    result = judge.evaluate(samples, client=StubClient(respond))

    entry = result.judgments[0]["context_relevance"]
    assert isinstance(entry, PerContextJudgment)
    assert entry.score is None
    assert "mean of" not in entry.reason
    assert entry.reason == (
        "2 of 3 contexts not graded: context 2 (b): no JSON object with a 'score' and no "
        "'Score: N' in the reply; context 3 (c): judge call failed: HTTP 500 from fake: boom"
    )
    assert result.errors[0]["context_relevance"].kind is FailureKind.UNSCORED
    scored = result.judgments[1]["context_relevance"]
    assert scored.score == 4 and scored.reason == "mean of 2 per-context grades"
