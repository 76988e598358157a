"""JudgeEngine on in-process clients: limits, retries, order, cache, usage, on a fake clock."""

from __future__ import annotations

import asyncio
import io
import json
import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_judge import _progress as progress
from rag_judge.errors import ConfigError
from rag_judge.llm import PROVIDERS, ClientConfig, make_client, make_engine
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMError
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers.local import LocalClient
from rag_judge.llm.providers.openai import OpenAIClient
from rag_judge.llm.providers.stub import (
    StubClient,
    fixed,
    lexical_support,
    parse_sections,
    scripted,
)
from rag_judge.llm.ratelimit import TokenBucket
from tests.llm import FakeClock


def req(text: str, **kw: object) -> CompletionRequest:
    return CompletionRequest(messages=(ChatMessage("user", text),), **kw)  # type: ignore[arg-type]


def echo(request: CompletionRequest) -> str:
    return request.messages[-1].content


class ScriptedClient:
    """Per-prompt outcomes: a list of errors to raise before the reply; records call times."""

    provider = "test"
    model = "scripted"
    base_url: str | None = None
    scores_labels = False
    supports_logprobs = False
    cancellable = True

    def __init__(
        self, plan: dict[str, list[LLMError]] | None = None, clock: FakeClock | None = None
    ):
        self.plan = {k: list(v) for k, v in (plan or {}).items()}
        self.clock = clock
        self.calls: list[str] = []
        self.times: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        prompt = request.messages[-1].content
        self.calls.append(prompt)
        if self.clock is not None:
            self.times.append(self.clock())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for _ in range(len(prompt) % 5 + 1):  # uneven finishing order
                await asyncio.sleep(0)
            pending = self.plan.get(prompt)
            if pending:
                raise pending.pop(0)
            return Completion(choices=[prompt.upper()], prompt_tokens=10, completion_tokens=2)
        finally:
            self.in_flight -= 1


def test_concurrency_never_exceeds_limit() -> None:
    client = ScriptedClient()
    engine = JudgeEngine(client, concurrency=4)
    results = asyncio.run(engine.run([req(f"q{i}") for i in range(50)]))
    assert client.max_in_flight == 4
    assert [r.text for r in results] == [f"Q{i}" for i in range(50)]  # type: ignore[union-attr]


def test_rpm_paces_calls_evenly_on_a_fake_clock() -> None:
    clock = FakeClock()
    client = ScriptedClient(clock=clock)
    engine = JudgeEngine(client, concurrency=8, rpm=120, clock=clock, sleep=clock.sleep)
    asyncio.run(engine.run([req(f"q{i}") for i in range(10)]))
    assert client.times == pytest.approx([0.5 * i for i in range(10)])
    assert sum(clock.sleeps) == pytest.approx(4.5)


def test_rpm_makes_up_for_sleeps_that_overshoot() -> None:
    class LateClock(FakeClock):
        async def sleep(self, seconds: float) -> None:
            await super().sleep(seconds + 0.004)  # a busy loop wakes sleepers late

    clock = LateClock()
    client = ScriptedClient(clock=clock)
    engine = JudgeEngine(client, concurrency=64, rpm=1200, clock=clock, sleep=clock.sleep)
    asyncio.run(engine.run([req(f"q{i}") for i in range(200)]))
    # 20 per second: 199 intervals of 0.05 s, not 0.054 s each (that would be 7 % slow).
    assert client.times[-1] == pytest.approx(199 / 20, rel=0.01)
    # Catching up never starts two calls together, nor more than 21 in any second.
    gaps = [b - a for a, b in zip(client.times, client.times[1:])]
    assert min(gaps) >= 0.75 * 0.05 - 1e-9
    for start in client.times:
        assert sum(start <= t < start + 1.0 for t in client.times) <= 21


def test_tpm_limits_tokens_per_second() -> None:
    clock = FakeClock()
    client = ScriptedClient(clock=clock)
    # Each request is estimated at 4 + 4 + 3 = 11 tokens; 660 tpm = 11 tokens per second.
    engine = JudgeEngine(client, concurrency=8, tpm=660, clock=clock, sleep=clock.sleep)
    asyncio.run(engine.run([req(f"q{i}".ljust(16)) for i in range(6)]))
    assert client.times[0] == 0.0
    gaps = [b - a for a, b in zip(client.times, client.times[1:])]
    assert min(gaps) >= 0.0
    # 6 requests of 11 tokens with a one-second bucket: about 5 more seconds, corrected after
    # each call to the 12 tokens reported, so a little more.
    assert client.times[-1] == pytest.approx(5 * 12 / 11, rel=0.05)


def test_token_bucket_lets_an_oversized_request_through_once_full() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 10.0, clock=clock, sleep=clock.sleep)

    async def go() -> None:
        await bucket.acquire(25)  # bigger than the bucket: goes now, leaves a debt of 15
        await bucket.acquire(10)  # waits 2.5 s to refill from -15 to 10

    asyncio.run(go())
    assert clock.sleeps == [pytest.approx(2.5)]


def test_retry_after_is_honoured_exactly() -> None:
    clock = FakeClock()
    plan = {"a": [LLMError("slow down", retryable=True, retry_after=7.0, status=429)]}
    client = ScriptedClient(plan)
    engine = JudgeEngine(client, clock=clock, sleep=clock.sleep)
    (result,) = asyncio.run(engine.run([req("a")]))
    assert isinstance(result, Completion)
    assert result.attempts == 2 and result.text == "A"
    assert clock.sleeps == [7.0]
    assert engine.usage.retries == 1 and engine.usage.requests == 1


def test_attempts_that_never_reached_a_server_are_connect_errors() -> None:
    clock = FakeClock()
    refused = LLMError("connection failed (refused)", retryable=True, connected=False)
    plan = {"a": [refused, LLMError("overloaded", retryable=True, status=503)]}
    engine = JudgeEngine(ScriptedClient(plan), clock=clock, sleep=clock.sleep)
    (result,) = asyncio.run(engine.run([req("a")]))
    assert isinstance(result, Completion) and result.attempts == 3
    usage = engine.usage
    assert (usage.requests, usage.retries, usage.connect_errors) == (1, 2, 1)
    assert usage.requests + usage.retries - usage.connect_errors == 2  # the 503 and the reply
    assert (usage + usage).connect_errors == 2  # summed like every other count


def test_backoff_doubles_is_capped_and_jittered() -> None:
    clock = FakeClock()
    plan = {"a": [LLMError("boom", retryable=True, status=500) for _ in range(9)]}
    engine = JudgeEngine(
        ScriptedClient(plan), max_attempts=10, clock=clock, sleep=clock.sleep, rng=random.Random(1)
    )
    (result,) = asyncio.run(engine.run([req("a")]))
    assert isinstance(result, Completion) and result.attempts == 10
    bases = [min(0.5 * 2**k, 8.0) for k in range(9)]
    assert len(clock.sleeps) == 9
    for slept, base in zip(clock.sleeps, bases):
        assert 0.75 * base <= slept <= base
    assert max(clock.sleeps) <= 8.0
    assert len(set(clock.sleeps)) == 9  # jitter: no two equal


def test_attempts_are_capped_and_the_error_is_returned_not_raised() -> None:
    clock = FakeClock()
    plan = {"a": [LLMError("overloaded", retryable=True, status=503) for _ in range(10)]}
    client = ScriptedClient(plan)
    engine = JudgeEngine(client, max_attempts=3, clock=clock, sleep=clock.sleep)
    results = asyncio.run(engine.run([req("a"), req("b")]))
    assert isinstance(results[0], LLMError)
    assert str(results[0]) == "overloaded (gave up after 3 attempts)"
    assert results[0].status == 503 and results[0].attempts == 3
    assert isinstance(results[1], Completion)
    assert client.calls.count("a") == 3 and len(clock.sleeps) == 2
    assert engine.usage.failures == 1 and engine.usage.retries == 2


def test_non_retryable_and_long_retry_after_fail_at_once() -> None:
    clock = FakeClock()
    plan = {
        "bad": [LLMError("HTTP 400: bad request", status=400)],
        "quota": [LLMError("quota", retryable=True, retry_after=3600.0, status=429)],
    }
    client = ScriptedClient(plan)
    engine = JudgeEngine(client, clock=clock, sleep=clock.sleep)
    bad, quota = asyncio.run(engine.run([req("bad"), req("quota")]))
    assert isinstance(bad, LLMError) and str(bad) == "HTTP 400: bad request"
    assert isinstance(quota, LLMError)
    assert "server asked to wait 3600 s" in str(quota)
    assert (bad.attempts, quota.attempts) == (1, 1)
    assert clock.sleeps == [] and len(client.calls) == 2


def test_every_error_returned_carries_the_attempts_made() -> None:
    # The count is an attribute, set on every error the engine returns; callers never read
    # it out of the message.
    clock = FakeClock()
    overloaded = LLMError("overloaded", retryable=True, status=503)
    plan = {
        "late_400": [overloaded, LLMError("HTTP 400: bad request", status=400)],
        "late_quota": [overloaded, LLMError("quota", retryable=True, retry_after=3600.0)],
        "capped": [overloaded] * 5,
    }
    engine = JudgeEngine(ScriptedClient(plan), max_attempts=4, clock=clock, sleep=clock.sleep)
    results = asyncio.run(engine.run([req("late_400"), req("late_quota"), req("capped")]))
    assert all(isinstance(r, LLMError) for r in results)
    assert [r.attempts for r in results if isinstance(r, LLMError)] == [2, 2, 4]
    assert str(results[0]) == "HTTP 400: bad request (not retryable, attempt 2)"
    assert str(results[2]) == "overloaded (gave up after 4 attempts)"


def test_a_client_bug_becomes_an_error_result() -> None:
    def broken(request: CompletionRequest) -> str:
        raise KeyError("oops")

    (result,) = asyncio.run(JudgeEngine(StubClient(broken)).run([req("x")]))
    assert isinstance(result, LLMError) and not result.retryable
    assert "KeyError" in str(result)


def test_per_call_timeout_is_retryable() -> None:
    class Slow(ScriptedClient):
        async def complete(self, request: CompletionRequest) -> Completion:
            self.calls.append("x")
            await asyncio.sleep(5)
            raise AssertionError("not reached")

    clock = FakeClock()
    client = Slow()
    engine = JudgeEngine(client, timeout=0.02, max_attempts=2, clock=clock, sleep=clock.sleep)
    (result,) = asyncio.run(engine.run([req("x")]))
    assert isinstance(result, LLMError) and result.retryable and result.attempts == 2
    assert str(result) == "no reply within 0.02 s (gave up after 2 attempts)"
    assert len(client.calls) == 2


outcomes = st.lists(st.sampled_from(["ok", "retry", "retry2", "fatal", "dup"]), max_size=25)


@settings(max_examples=40, deadline=None)
@given(outcomes)
def test_every_request_is_accounted_for_in_order(kinds: list[str]) -> None:
    plan: dict[str, list[LLMError]] = {}
    prompts = []
    for i, kind in enumerate(kinds):
        prompt = "p0" if kind == "dup" else f"p{i}"
        prompts.append(prompt)
        if kind.startswith("retry"):
            plan[prompt] = [LLMError("x", retryable=True)] * (2 if kind == "retry2" else 1)
        elif kind == "fatal":
            plan[prompt] = [LLMError("fatal")]
    clock = FakeClock()
    engine = JudgeEngine(ScriptedClient(plan), concurrency=3, clock=clock, sleep=clock.sleep)
    results = asyncio.run(engine.run([req(p) for p in prompts]))
    assert len(results) == len(prompts)
    for prompt, result in zip(prompts, results):
        if isinstance(result, Completion):
            assert result.text == prompt.upper()
        else:
            assert prompt in plan and str(result) == "fatal"
    usage = engine.usage
    assert usage.requests + usage.cache_hits == len(prompts)
    assert usage.requests == len(set(prompts))
    assert usage.failures == sum(isinstance(r, LLMError) for r in results)


def test_cache_serves_a_rerun_and_identical_requests(tmp_path: Path) -> None:
    client = StubClient(fixed(4))
    requests = [req(f"q{i}") for i in range(5)] + [req("q0")]
    with JudgeEngine(client, cache=tmp_path / "cache.sqlite") as first:
        results = asyncio.run(first.run(requests))
    assert client.calls == 5
    assert first.usage.requests == 5 and first.usage.cache_hits == 1
    assert results[5].cached and not results[0].cached  # type: ignore[union-attr]
    with JudgeEngine(client, cache=tmp_path / "cache.sqlite") as second:
        again = asyncio.run(second.run(requests))
    assert client.calls == 5  # nothing sent
    assert second.usage.requests == 0 and second.usage.cache_hits == 6
    assert all(isinstance(r, Completion) and r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in results]  # type: ignore[union-attr]
    assert json.loads(again[0].text) == {"reason": "fixed stub verdict", "score": 4}  # type: ignore[union-attr]


@pytest.mark.parametrize("delay", [0.0, 0.01])
def test_identical_requests_share_one_call_across_chunks(delay: float) -> None:
    # 700 requests = three chunks of keying; request i + 350 repeats request i, so some repeats
    # find their call still running (a follower) and some find it finished (settled).
    client = StubClient(fixed(4), delay=delay)
    requests = [req(f"q{i % 350}") for i in range(700)]
    engine = JudgeEngine(client, concurrency=64)
    results = asyncio.run(engine.run(requests))
    assert client.calls == 350 and engine.usage.requests == 350
    assert engine.usage.cache_hits == 350
    assert [r.cached for r in results] == [False] * 350 + [True] * 350  # type: ignore[union-attr]
    assert all(isinstance(r, Completion) and r.text == results[0].text for r in results)  # type: ignore[union-attr]


def test_failures_are_not_cached(tmp_path: Path) -> None:
    client = ScriptedClient({"a": [LLMError("nope")]})
    with SqliteCache(tmp_path / "c.sqlite") as cache:
        asyncio.run(JudgeEngine(client, cache=cache).run([req("a")]))
        assert len(cache) == 0
        (result,) = asyncio.run(JudgeEngine(client, cache=cache).run([req("a")]))
        assert isinstance(result, Completion) and len(cache) == 1


def test_store_commits_off_the_loop_before_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = SqliteCache(path)
    reader = SqliteCache(path)  # another connection: sees only what is committed
    done = [Completion(choices=[f"verdict {i}"], prompt_tokens=i) for i in range(200)]

    async def main() -> list[int]:
        async def one(i: int) -> int:
            await cache.store(f"k{i}", done[i])
            return len(reader.get_many([f"k{i}"]))  # committed by the time store returns

        return await asyncio.gather(*(one(i) for i in range(200)))

    assert asyncio.run(main()) == [1] * 200
    assert len(reader) == 200 and reader.get("k7").text == "verdict 7"  # type: ignore[union-attr]
    cache.close()
    with pytest.raises(RuntimeError, match="is closed"):
        asyncio.run(cache.store("late", done[0]))
    reader.close()


def test_stores_of_one_loop_turn_share_one_hand_over_to_the_writer(tmp_path: Path) -> None:
    cache = SqliteCache(tmp_path / "c.sqlite")
    handed: list[int] = []
    submit = cache._writer.submit
    cache._writer.submit = lambda rows: (handed.append(len(rows)), submit(rows))[1]  # type: ignore[method-assign]
    done = [Completion(choices=[f"verdict {i}"]) for i in range(50)]

    async def main() -> None:
        await asyncio.gather(*(cache.store(f"k{i}", done[i]) for i in range(50)))  # one turn
        await cache.store("alone", done[0])  # a later turn: its own hand-over

    asyncio.run(main())
    assert handed == [50, 1] and len(cache) == 51

    def failing(rows: list[object]) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    cache._writer._write = failing  # type: ignore[assignment]

    async def both() -> list[object]:
        stores = (cache.store(f"x{i}", done[i]) for i in range(2))
        return await asyncio.gather(*stores, return_exceptions=True)

    errors = asyncio.run(both())
    assert handed[-1] == 2 and all(isinstance(e, sqlite3.OperationalError) for e in errors)
    assert len(cache) == 51
    cache.close()


def test_close_commits_the_rows_of_a_turn_not_yet_handed_over(tmp_path: Path) -> None:
    cache = SqliteCache(tmp_path / "c.sqlite")
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(cache.store("k", Completion(choices=["kept"])))
        loop.call_soon(cache.close)  # the same turn as the store, before its hand-over
        loop.run_until_complete(task)  # and the store returns: its row was committed
    finally:
        loop.close()
    with SqliteCache(tmp_path / "c.sqlite") as again:
        assert again.get("k").text == "kept"  # type: ignore[union-attr]


def test_a_cache_that_cannot_write_costs_a_rerun_not_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class FullDisk(SqliteCache):
        async def store(self, key: str, completion: Completion) -> None:
            raise sqlite3.OperationalError("database or disk is full")

    with FullDisk(tmp_path / "c.sqlite") as cache, caplog.at_level("WARNING"):
        results = asyncio.run(
            JudgeEngine(StubClient(fixed(4)), cache=cache).run([req("b"), req("c")])
        )
    assert all(isinstance(r, Completion) for r in results)
    assert caplog.text.count("could not cache a completion: database or disk is full") == 2


def test_usage_cost_and_dry_run(tmp_path: Path) -> None:
    client = ScriptedClient()
    engine = JudgeEngine(
        client, cache=tmp_path / "c.sqlite", prompt_price_per_1k=0.5, completion_price_per_1k=2.0
    )
    requests = [
        req("x" * 400, max_tokens=100),
        req("y" * 40, max_tokens=100),
        req("x" * 400, max_tokens=100),
    ]
    plan = engine.dry_run(requests)
    # 400 chars -> 100 + 4 + 3 tokens; 40 chars -> 10 + 4 + 3; the duplicate is counted once.
    assert plan == {
        "requests": 2,
        "cache_hits": 1,
        "prompt_tokens_estimate": 107 + 17,
        "completion_tokens_max": 200,
        "cost_estimate": pytest.approx((124 * 0.5 + 200 * 2.0) / 1000),
    }
    assert client.calls == []  # a dry run spends nothing
    asyncio.run(engine.run(requests))
    assert engine.usage.prompt_tokens == 20 and engine.usage.completion_tokens == 4
    assert engine.usage.cost == pytest.approx((20 * 0.5 + 4 * 2.0) / 1000)
    assert engine.dry_run(requests)["requests"] == 0
    engine.close()
    assert JudgeEngine(client).usage.cost is None


def test_run_sync_from_plain_code_and_inside_a_running_loop() -> None:
    engine = JudgeEngine(StubClient(scripted(echo)))
    assert [r.text for r in engine.run_sync([req("a"), req("b")])] == ["a", "b"]  # type: ignore[union-attr]

    async def inside() -> list[str]:
        return [r.text for r in engine.run_sync([req("c")])]  # type: ignore[union-attr]

    assert asyncio.run(inside()) == ["c"]


def test_calls_are_counted_on_the_progress_display() -> None:
    """Identical requests: one call, the other served as cached; a failure is counted."""
    shown = io.StringIO()
    engine = JudgeEngine(ScriptedClient({"bad": [LLMError("refused")]}))
    with (
        progress.showing(progress.Display(progress.Mode.LINES, shown)),
        progress.step("judging") as step,
    ):
        asyncio.run(engine.run([req("a"), req("a"), req("bad")], label="faithfulness"))
    (task,) = step.tasks
    assert (task.done, task.total, task.cached, task.failed) == (3, 3, 1, 1)
    assert task.describe() == "faithfulness: 3/3 calls (1 cached, 1 failed)"
    assert shown.getvalue().startswith("judging: 3/3 calls (1 cached, 1 failed)")


def test_engine_rejects_bad_limits() -> None:
    with pytest.raises(ConfigError, match="concurrency=0"):
        JudgeEngine(StubClient(), concurrency=0)
    with pytest.raises(ConfigError, match="rpm=-5"):
        JudgeEngine(StubClient(), rpm=-5)


# ---- stub responders ---------------------------------------------------------------------


def judge_prompt(answer: str, *contexts: str, reference: str | None = None) -> CompletionRequest:
    parts = ["<<<BEGIN QUESTION>>>\nWhich ocean is the largest?\n<<<END QUESTION>>>"]
    parts += [
        f"<<<BEGIN CONTEXT {i}>>>\n{c}\n<<<END CONTEXT {i}>>>" for i, c in enumerate(contexts, 1)
    ]
    if reference is not None:
        parts.append(f"<<<BEGIN REFERENCE>>>\n{reference}\n<<<END REFERENCE>>>")
    parts.append(f"<<<BEGIN ANSWER>>>\n{answer}\n<<<END ANSWER>>>")
    return CompletionRequest(
        messages=(
            ChatMessage("system", "Grade faithfulness."),
            ChatMessage("user", "\n".join(parts)),
        )
    )


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("The Pacific Ocean is the largest.", 5),  # pacific, ocean, largest: all supported
        ("The Atlantic.", 1),
        ("Pacific Atlantic", 3),  # half supported: 1 + round(4 * 0.5)
        ("Pacific Atlantic Indian Arctic", 2),  # 1/4 supported: 1 + round(1.0)
        ("", 1),
    ],
)
def test_lexical_support_scores(answer: str, score: int) -> None:
    context = "The Pacific Ocean is the largest ocean on Earth."
    reply = json.loads(lexical_support()(judge_prompt(answer, context)))  # type: ignore[arg-type]
    assert reply["score"] == score


def test_lexical_support_reads_references_and_numbered_contexts() -> None:
    request = judge_prompt(
        "Pacific largest", "Deserts are dry.", "The Pacific.", reference="largest"
    )
    assert parse_sections(request.messages[1].content).keys() == {
        "QUESTION",
        "CONTEXT 1",
        "CONTEXT 2",
        "REFERENCE",
        "ANSWER",
    }
    reply = json.loads(lexical_support()(request))  # type: ignore[arg-type]
    assert reply == {
        "reason": "100% of the answer's content words appear in the evidence",
        "score": 5,
    }


def test_lexical_support_without_sections_and_with_score_labels() -> None:
    assert json.loads(lexical_support()(req("free text")))["score"] == 1  # type: ignore[arg-type]
    labelled = CompletionRequest(
        messages=judge_prompt("The Pacific.", "Pacific").messages, score_labels=tuple("12345")
    )
    out = lexical_support()(labelled)
    assert isinstance(out, Completion) and out.text == "5"
    assert out.score_probs == {"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0, "5": 1.0}


def test_scripted_replies_in_order_then_exhausted() -> None:
    responder = scripted(["one", LLMError("scripted failure", retryable=False), "two"])
    client = StubClient(responder)
    results = asyncio.run(
        JudgeEngine(client, concurrency=1).run([req("a"), req("b"), req("c"), req("d")])
    )
    assert [r.text if isinstance(r, Completion) else str(r) for r in results] == [
        "one",
        "scripted failure",
        "two",
        "scripted responder ran out after 3 replies",
    ]


def test_stub_model_names_differ_per_responder() -> None:
    assert StubClient(fixed(2)).model == "stub-fixed-2"
    assert StubClient().model == "stub-lexical-support"
    a, b = StubClient(fixed(2)), StubClient(fixed(3))
    engine_a, engine_b = JudgeEngine(a), JudgeEngine(b)
    assert engine_a.key(req("x")) != engine_b.key(req("x"))


# ---- config ------------------------------------------------------------------------------


def test_client_config_builds_each_provider(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-config-test-000000")
    assert isinstance(make_client(ClientConfig()), StubClient)
    assert make_client(ClientConfig(stub="fixed", stub_score=5)).model == "stub-fixed-5"
    client = make_client(ClientConfig(provider="openai", model="gpt-x", api_key_env="MY_KEY"))
    assert isinstance(client, OpenAIClient) and client.base_url is None
    assert isinstance(make_client(ClientConfig(provider="local")), LocalClient)
    config = ClientConfig(concurrency=3, rpm=100, max_attempts=2, timeout=5)
    with make_engine(config, cache=tmp_path / "c.sqlite") as engine:
        assert (engine.concurrency, engine.rpm, engine.max_attempts) == (3, 100, 2)
        assert engine.timeout == 6.0 and isinstance(engine.cache, SqliteCache)
    # A local model call cannot be abandoned (LocalClient.cancellable): no engine timeout.
    assert make_engine(ClientConfig(provider="local")).timeout is None


def test_client_config_errors_name_the_problem_and_hide_inputs() -> None:
    with pytest.raises(ValidationError) as info:
        ClientConfig(api_key_env="sk-live-should-not-echo-123456")
    assert "NAME of the environment variable" in str(info.value)
    assert "should-not-echo" not in str(info.value)
    with pytest.raises(ValidationError, match="needs a model name"):
        ClientConfig(provider="openai")
    with pytest.raises(ValidationError) as refused:
        ClientConfig(provider="anthropic")
    assert "provider 'anthropic' is not registered: expected one of 'local', 'openai', 'stub'" in (
        str(refused.value)
    )
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        ClientConfig(concurrency=0)


# ---- provider registry -------------------------------------------------------------------


class EchoClient:
    """A provider from outside the package: replies with its model name and the prompt."""

    provider = "echo"
    base_url = None
    scores_labels = False
    supports_logprobs = False
    cancellable = True

    def __init__(self, model: str) -> None:
        self.model = model
        self.closed = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion(choices=[f"{self.model}: {request.messages[-1].content}"])

    async def aclose(self) -> None:
        self.closed += 1


@pytest.fixture
def echo_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EchoClient]]:
    made: list[EchoClient] = []

    def load_echo(config: ClientConfig) -> EchoClient:
        made.append(EchoClient(config.model or "echo-1"))
        return made[-1]

    monkeypatch.setitem(PROVIDERS, "echo", load_echo)
    yield made


def test_a_registered_provider_is_named_in_a_config(
    echo_provider: list[EchoClient], tmp_path: Path
) -> None:
    config = ClientConfig.model_validate({"provider": "echo", "model": "echo-2", "timeout": 3})
    client = make_client(config)
    assert isinstance(client, EchoClient) and client.model == "echo-2"
    with make_engine(config, cache=tmp_path / "c.sqlite") as engine:
        results = engine.run_sync([req("a"), req("b")])
        assert engine.timeout == 4.0  # cancellable: the engine's backstop over the timeout
    assert [r.text for r in results] == ["echo-2: a", "echo-2: b"]
    assert engine.usage.requests == 2
    # run_sync closed the connections of its loop, and closing the engine did once more.
    assert echo_provider[-1].closed == 2


def test_an_unknown_provider_is_refused_naming_the_legal_set(
    echo_provider: list[EchoClient],
) -> None:
    with pytest.raises(ValidationError) as refused:
        ClientConfig(provider="anthropic")
    assert "provider 'anthropic' is not registered" in str(refused.value)
    assert "expected one of 'echo', 'local', 'openai', 'stub'" in str(refused.value)
    # Validated while registered, looked up again when the client is made.
    config = ClientConfig(provider="echo")
    del PROVIDERS["echo"]
    with pytest.raises(ConfigError, match=r"provider 'echo' is not registered: expected one of "
                       r"'local', 'openai', 'stub'"):  # fmt: skip
        make_client(config)


def test_importing_the_package_imports_no_provider_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, rag_judge, rag_judge.llm\n"
        "heavy = {'openai', 'torch', 'transformers', 'rag_judge.llm.providers.openai',"
        " 'rag_judge.llm.providers.local'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "assert rag_judge.llm.OpenAIClient.provider == 'openai'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ---- engine lifecycle --------------------------------------------------------------------


def cache_writers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("rag-judge-cache")}


def test_closing_the_engine_stops_the_cache_it_opened(tmp_path: Path) -> None:
    before = cache_writers()  # other tests' caller-owned caches may still run theirs
    for round_ in range(3):
        with make_engine(ClientConfig(), cache=tmp_path / "c.sqlite") as engine:
            results = engine.run_sync([req(f"q{round_}-{i}") for i in range(5)])
            assert all(isinstance(r, Completion) for r in results)
            assert cache_writers() - before  # a writer thread committed the rows
        assert engine.cache is not None and not engine.cache._writer.running
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            len(engine.cache)  # the connection is closed too
    assert not cache_writers() - before
    with SqliteCache(tmp_path / "c.sqlite") as cache:
        assert len(cache) == 15  # everything committed before the close


def test_a_cache_passed_in_stays_open_for_its_owner(tmp_path: Path) -> None:
    with SqliteCache(tmp_path / "c.sqlite") as cache:
        with JudgeEngine(StubClient(fixed(3)), cache=cache) as engine:
            engine.run_sync([req("a")])
        with JudgeEngine(StubClient(fixed(3)), cache=cache) as engine:
            (again,) = engine.run_sync([req("a")])  # the same cache, still open
        assert isinstance(again, Completion) and again.cached and len(cache) == 1
    assert not cache._writer.running


def test_async_rounds_in_one_loop_close_the_client_once_at_the_end(
    echo_provider: list[EchoClient], tmp_path: Path
) -> None:
    config = ClientConfig(provider="echo")
    before = cache_writers()

    async def rounds() -> list[str]:
        texts = []
        async with make_engine(config, cache=tmp_path / "c.sqlite") as engine:
            for round_ in range(3):
                results = await engine.run([req(f"r{round_}"), req("same")])
                texts += [r.text for r in results]  # type: ignore[union-attr]
                assert echo_provider[-1].closed == 0  # open between rounds
        assert echo_provider[-1].closed == 1
        assert engine.usage.requests == 4 and engine.usage.cache_hits == 2
        return texts

    assert asyncio.run(rounds())[:2] == ["echo-1: r0", "echo-1: same"]
    assert not cache_writers() - before


def test_a_closed_engine_runs_nothing_and_closes_once(echo_provider: list[EchoClient]) -> None:
    engine = make_engine(ClientConfig(provider="echo"))
    engine.close()
    engine.close()
    asyncio.run(engine.aclose())
    assert echo_provider[-1].closed == 1
    with pytest.raises(RuntimeError, match="closed"):
        engine.run_sync([req("a")])
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(engine.run([req("a")]))
    with pytest.raises(RuntimeError, match="closed"), engine:
        pass


def test_a_client_without_its_capabilities_is_refused_by_name() -> None:
    class Bare:
        provider, model, base_url = "bare", "bare-1", None

        async def complete(self, request: CompletionRequest) -> Completion:
            return Completion(choices=["x"])

    with pytest.raises(ConfigError, match=r"Bare is not a complete LLMClient: .* scores_labels, "
                       "supports_logprobs, cancellable"):  # fmt: skip
        make_engine(ClientConfig(), client=Bare())  # type: ignore[arg-type]
