"""The ask / re-ask loop: a judgment's ``attempts`` agrees with what its reason says."""

from __future__ import annotations

import asyncio

from rag_judge.judge.asking import Outcome, ask_all
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from tests.llm import FakeClock


class FailingAfter:
    """Replies ``replies`` in turn (one per call), then fails every later call with a
    retryable error (or the given one)."""

    provider = "test"
    model = "failing"
    base_url: str | None = None
    scores_labels = False
    supports_logprobs = False
    cancellable = True

    def __init__(self, replies: list[str], error: LLMError | None = None) -> None:
        self.replies = list(replies)
        self.error = error
        self.calls = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        self.calls += 1
        if self.replies:
            return Completion(choices=[self.replies.pop(0)], prompt_tokens=1, completion_tokens=1)
        raise self.error or LLMError("HTTP 503: overloaded", retryable=True, status=503)


def _ask(client: FailingAfter, max_attempts: int = 4, reask: int = 1) -> Outcome[int]:
    def parse(reply: Completion) -> int | Unscored:
        text = reply.text.strip()
        return int(text) if text.isdigit() else Unscored(reason="not a number", raw=text)

    clock = FakeClock()
    engine = JudgeEngine(client, max_attempts=max_attempts, clock=clock, sleep=clock.sleep)
    request = CompletionRequest(messages=(ChatMessage("user", "score it"),))
    (outcome,) = asyncio.run(ask_all(engine, [request], parse, shape="<n>", reask=reask))
    return outcome


def test_a_call_given_up_after_four_attempts_counts_four() -> None:
    client = FailingAfter([])
    outcome = _ask(client, max_attempts=4)
    assert isinstance(outcome.result, LLMError)
    assert "gave up after 4 attempts" in str(outcome.result)
    assert client.calls == 4
    assert outcome.attempts == 4


def test_re_asks_before_the_failure_are_added() -> None:
    client = FailingAfter(["no idea"])  # unreadable, re-asked; the re-ask fails 3 times
    outcome = _ask(client, max_attempts=3)
    assert isinstance(outcome.result, LLMError)
    assert str(outcome.result).endswith("(gave up after 3 attempts)")
    assert outcome.attempts == 1 + 3 == client.calls


def test_successes_and_single_failures_are_unchanged() -> None:
    assert _ask(FailingAfter(["4"])).attempts == 1
    assert _ask(FailingAfter(["x", "4"])).attempts == 2  # one re-ask
    client = FailingAfter([], LLMError("HTTP 400: bad request", status=400))
    outcome = _ask(client)
    assert str(outcome.result) == "HTTP 400: bad request" and outcome.attempts == 1


class FailingWith(FailingAfter):
    """Fails each call with the next of ``errors``."""

    def __init__(self, errors: list[LLMError]) -> None:
        super().__init__([])
        self.errors = list(errors)

    async def complete(self, request: CompletionRequest) -> Completion:
        self.calls += 1
        raise self.errors.pop(0)


def test_a_long_retry_after_on_the_second_attempt_counts_two() -> None:
    # The engine gives up at once on a Retry-After too long to wait for. Its message names no
    # attempt count; the count it carries is the two attempts made.
    overloaded = LLMError("HTTP 503: overloaded", retryable=True, status=503)
    quota = LLMError("quota", retryable=True, retry_after=3600.0, status=429)
    client = FailingWith([overloaded, quota])
    outcome = _ask(client, max_attempts=4)
    assert isinstance(outcome.result, LLMError)
    assert str(outcome.result) == "quota (server asked to wait 3600 s (> 60 s))"
    assert outcome.attempts == 2 == client.calls
