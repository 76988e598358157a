"""The judge end to end against fake OpenAI-compatible servers that ignore or refuse options:
what reaches the judgments, the signature and the usage is what the server actually did."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.report.model import FailureKind
from tests.evaluators import judge_sample
from tests.fake_openai_server import FakeOpenAIServer, Reply, fastapi_error, truncated

SAMPLES = [judge_sample(i) for i in range(1, 4)]


def _judge(srv: FakeOpenAIServer, **options: Any) -> JudgeEvaluator:
    client = {"provider": "openai", "model": "fake-judge", "max_attempts": 1}
    client["base_url"] = srv.base_url
    return JudgeEvaluator(rubrics=["answer_relevance"], cache=None, client=client, **options)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def test_a_server_that_ignores_logprobs_gives_integer_scores_said_so() -> None:
    with FakeOpenAIServer(ignores={"logprobs"}) as srv:
        result = _judge(srv, logprobs=True).evaluate(SAMPLES)
    judged = [j["answer_relevance"] for j in result.judgments]
    assert [j.score for j in judged] == [3, 3, 3]  # the stated integer, not a weighted mean
    assert all(j.logprobs_missing for j in judged)
    assert "scoring:integer" in result.signatures["answer_relevance"].render()


def test_a_server_that_ignores_n_records_the_choices_received() -> None:
    with FakeOpenAIServer(ignores={"n"}) as srv:
        result = _judge(srv, n=3, temperature=0.7).evaluate(SAMPLES)
    judged = [j["answer_relevance"] for j in result.judgments]
    assert [j.choices_received for j in judged] == [1, 1, 1]
    assert [j.score for j in judged] == [3, 3, 3]


def test_a_server_that_ignores_response_format_is_read_and_not_schema_valid() -> None:
    def prose(body: dict[str, Any]) -> str:
        return "The answer addresses the question.\nScore: 4"

    with FakeOpenAIServer(prose, ignores={"response_format"}) as srv:
        result = _judge(srv).evaluate(SAMPLES)
    judged = [j["answer_relevance"] for j in result.judgments]
    assert [j.score for j in judged] == [4, 4, 4]
    assert all(j.structured_output is True and j.schema_valid is False for j in judged)


def test_a_truncated_reply_is_read_and_says_where_it_stopped() -> None:
    with FakeOpenAIServer(lambda body: truncated()) as srv:
        result = _judge(srv).evaluate(SAMPLES)
    judged = [j["answer_relevance"] for j in result.judgments]
    assert [j.score for j in judged] == [4, 4, 4]
    assert all(j.finish_reason == "length" for j in judged)


def test_a_fastapi_refusal_is_recorded_with_the_servers_words_and_counted() -> None:
    def pinned(body: dict[str, Any]) -> Reply:
        return fastapi_error(400, "Server is pinned to 'smollm2'")

    with FakeOpenAIServer(pinned) as srv:
        result = _judge(srv).evaluate(SAMPLES)
        received = srv.received
    for errors in result.errors:
        failure = errors["answer_relevance"]
        assert failure.kind is FailureKind.ERROR
        assert "Server is pinned to 'smollm2'" in failure.message
    # A 400 about the model, not the format: no resend, and every request is in the usage.
    assert received == 3 and result.usage.requests + result.usage.retries == received


# ---- the signature and the run-level notes say what the server did (issue 27, item 20) ----


def test_a_server_that_ignores_n_is_not_signed_n_3(caplog: pytest.LogCaptureFixture) -> None:
    with FakeOpenAIServer(ignores={"n"}) as srv:
        result = _judge(srv, n=3, temperature=0.7).evaluate(SAMPLES)
    for metric in ("answer_relevance", "answer_relevance_norm"):
        assert result.signatures[metric].options["n"] == "3→1"
        assert "|n:3→1|" in result.signatures[metric].render()
    assert "n=3 choices were asked for" in caplog.text and "answer_relevance 3 of 3" in caplog.text


def test_a_server_that_sends_fewer_choices_for_some_replies_is_signed_with_both() -> None:
    def some_short(body: dict[str, Any]) -> Reply:
        short = "Question 2?" in json.dumps(body)
        return Reply(content='{"reason": "r", "score": 4}', choices=1 if short else None)

    with FakeOpenAIServer(some_short) as srv:
        result = _judge(srv, n=3, temperature=0.7).evaluate(SAMPLES)
    judged = [j["answer_relevance"] for j in result.judgments]
    assert [j.choices_received for j in judged] == [None, 1, None]
    assert result.signatures["answer_relevance"].options["n"] == "3→1,3"
    with FakeOpenAIServer() as srv:  # a server that honours n: the signature says n:3
        honoured = _judge(srv, n=3, temperature=0.7).evaluate(SAMPLES)
    assert honoured.signatures["answer_relevance"].options["n"] == "3"


def test_an_ignored_response_format_gets_a_run_level_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def prose(body: dict[str, Any]) -> str:
        return "The answer addresses the question.\nScore: 4"

    with FakeOpenAIServer(prose, ignores={"response_format"}) as srv:
        _judge(srv).evaluate(SAMPLES)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "seems to ignore response_format" in warned[0]
    assert warned[0].endswith(": answer_relevance 3 of 3")
    caplog.clear()
    with FakeOpenAIServer() as srv:  # JSON as the schema asks: nothing to say
        _judge(srv).evaluate(SAMPLES)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
