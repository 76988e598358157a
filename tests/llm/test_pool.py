"""The engine's worker processes (``processes > 1``, rag_judge.llm.pool) against the fake server:
the same results, usage and cache rows as in-process; faults recorded per request; a dead
worker's calls failed, not hung; the option validated and kept out of signatures."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rag_judge.errors import ConfigError
from rag_judge.judge.settings import Judge
from rag_judge.llm import ClientConfig, make_engine
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMError
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.pool import shares
from rag_judge.llm.providers.openai import OpenAIClient
from rag_judge.llm.providers.stub import StubClient, fixed
from tests.fake_openai_server import FakeOpenAIServer, Reply, chat, error, malformed


def ask(text: str) -> CompletionRequest:
    return CompletionRequest(messages=(ChatMessage("user", text),), max_tokens=32)


def by_content(body: dict[str, Any]) -> Reply | str:
    """A reply that depends on the request only, whichever worker sends it."""
    text = body["messages"][-1]["content"]
    return f'{{"reason": "echo {text}", "score": {len(text) % 5 + 1}}}'


def run(url: str, requests: list[CompletionRequest], processes: int, **kw: Any) -> Any:
    client = OpenAIClient("fake-model", base_url=url, timeout=kw.pop("timeout", 30.0))
    with JudgeEngine(client, concurrency=8, processes=processes, **kw) as engine:
        results = engine.run_sync(requests)
    return results, engine.usage


def test_the_pool_gives_the_in_process_results_usage_and_cache_rows(tmp_path: Path) -> None:
    requests = [ask(f"question {i}") for i in range(40)]
    requests += requests[:5]  # identical requests: one call each, served to both
    rows = {}
    outcomes = {}
    with FakeOpenAIServer(by_content) as server:
        for processes in (1, 2):
            cache = tmp_path / f"{processes}.sqlite"
            results, usage = run(server.base_url, requests, processes, cache=cache)
            outcomes[processes] = ([r.choices for r in results], usage)
            with SqliteCache(cache) as opened:
                client = OpenAIClient("fake-model", base_url=server.base_url)
                keys = [JudgeEngine(client).key(r) for r in requests]
                found = opened.get_many(keys)
                rows[processes] = [(found[k].choices, found[k].prompt_tokens) for k in keys]
        assert server.received == 80
    assert outcomes[2] == outcomes[1]
    assert outcomes[2][1].requests == 40 and outcomes[2][1].cache_hits == 5
    assert rows[2] == rows[1]


@pytest.mark.slow  # worker processes against a faulty server
def test_faults_are_recorded_per_request_with_the_pool() -> None:
    seen: dict[str, int] = {}

    def script(body: dict[str, Any]) -> Reply | str:
        text = body["messages"][-1]["content"]
        seen[text] = seen.get(text, 0) + 1
        if text == "limited" and seen[text] == 1:
            return error(429, "slow down", headers={"Retry-After": "0.01"})
        if text == "broken":
            return error(500, "boom", headers={"retry-after-ms": "10"})
        if text == "garbled":
            return malformed()
        if text == "slow":
            return Reply(content="too late", delay=5.0)
        return by_content(body)

    names = ["fine 1", "limited", "broken", "garbled", "slow", "fine 2"]
    with FakeOpenAIServer(script) as server:
        results, usage = run(server.base_url, [ask(n) for n in names], 2, max_attempts=2,
                             timeout=0.3)  # fmt: skip
    got = dict(zip(names, results))
    assert isinstance(got["fine 1"], Completion) and isinstance(got["fine 2"], Completion)
    assert isinstance(got["limited"], Completion) and got["limited"].attempts == 2
    assert isinstance(got["broken"], LLMError) and got["broken"].status == 500
    assert got["broken"].attempts == 2
    assert isinstance(got["garbled"], LLMError) and "JSON" in str(got["garbled"])
    assert isinstance(got["slow"], LLMError) and "no reply within" in str(got["slow"])
    assert usage.requests == 6 and usage.failures == 3
    assert usage.retries == 3  # limited, broken and slow each tried twice


def test_a_dead_worker_fails_its_calls_instead_of_hanging() -> None:
    arrived = threading.Event()

    def script(body: dict[str, Any]) -> Reply | str:
        arrived.set()
        return Reply(content="never sent", delay=30.0)

    client = OpenAIClient("fake-model", base_url="http://127.0.0.1:1/v1")
    with FakeOpenAIServer(script) as server:
        client.base_url = server.base_url
        with JudgeEngine(client, concurrency=4, processes=2, max_attempts=1) as engine:

            def kill_workers() -> None:
                arrived.wait(timeout=60)
                for pid in engine.worker_pids:
                    os.kill(pid, signal.SIGKILL)

            killer = threading.Thread(target=kill_workers)
            killer.start()
            results = engine.run_sync([ask(f"q{i}") for i in range(12)])
            killer.join()
    assert all(isinstance(r, LLMError) and "died" in str(r) for r in results)
    assert engine.usage.failures == 12 and engine.usage.requests == 12


def test_processes_is_validated_and_left_out_of_dumps_and_signatures() -> None:
    with pytest.raises(ValidationError, match=r"processes=0 is not valid: expected an integer"):
        ClientConfig(provider="openai", model="m", processes=0)
    with pytest.raises(ValidationError, match=r"processes=9 .*concurrency=8"):
        ClientConfig(provider="openai", model="m", processes=9)
    with pytest.raises(ValidationError, match=r"processes=<str> is not valid") as pasted:
        ClientConfig(provider="openai", model="m", processes="sk-SECRET123")  # type: ignore[arg-type]
    assert "SECRET" not in str(pasted.value)  # a key pasted here is not echoed
    with pytest.raises(ValidationError, match="needs provider 'openai'"):
        ClientConfig(provider="stub", processes=2)
    with pytest.raises(ValidationError, match="batch"):
        ClientConfig(provider="openai", model="m", batch=True, processes=2)
    plain = ClientConfig(provider="openai", model="m", base_url="http://127.0.0.1:1/v1")
    pooled = plain.model_copy(update={"processes": 2})
    assert "processes" not in plain.model_dump()  # existing configs dump as before
    assert pooled.model_dump()["processes"] == 2  # recorded where it is set
    assert Judge(client=pooled).open().name == Judge(client=plain).open().name
    with make_engine(pooled) as engine:
        assert engine.processes == 2


def test_the_engine_checks_processes_at_construction() -> None:
    client = OpenAIClient("m", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match=r"processes=0 is not valid: expected an integer from 1"):
        JudgeEngine(client, processes=0)
    with pytest.raises(ConfigError, match=r"processes=9 .*concurrency=8"):
        JudgeEngine(client, processes=9)
    with pytest.raises(ConfigError, match=r"processes=2 is not valid for StubClient"):
        JudgeEngine(StubClient(lambda r: "x"), processes=2)
    JudgeEngine(StubClient(fixed(3)), processes=1).close()  # off: any client


def test_limits_are_divided_into_whole_shares() -> None:
    assert shares(8, 3) == [3, 3, 2]
    assert shares(64, 2) == [32, 32]
    assert sum(shares(7, 4)) == 7


def test_the_docs_worked_example_runs() -> None:
    text = (Path(__file__).parents[2] / "docs" / "judge-engine.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/judge-engine.md", "exec"), namespace)
    with FakeOpenAIServer(by_content) as server:
        texts = namespace["judge_all"](server.base_url)
    assert texts[3] == by_content({"messages": [{"content": "Is claim 3 supported?"}]})


def test_workers_dead_between_runs_fail_the_next_runs_calls_instead_of_hanging() -> None:
    client = OpenAIClient("fake-model", base_url="http://127.0.0.1:1/v1")
    with FakeOpenAIServer(lambda body: chat('{"reason": "ok", "score": 4}')) as server:
        client.base_url = server.base_url
        with JudgeEngine(client, concurrency=4, processes=2, max_attempts=1) as engine:
            assert all(not isinstance(r, LLMError) for r in engine.run_sync([ask("warm")]))
            for pid in engine.worker_pids:  # both die between runs; the parent has not seen it
                os.kill(pid, signal.SIGKILL)
            assert engine._pool is not None
            for worker in engine._pool._workers:
                worker.process.wait()
            done: list[Any] = []
            runner = threading.Thread(
                target=lambda: done.extend(engine.run_sync([ask(f"q{i}") for i in range(40)]))
            )
            runner.start()
            runner.join(timeout=60)
            assert not runner.is_alive(), "the run hung with calls still waiting for a worker"
    assert len(done) == 40 and all(isinstance(r, LLMError) and "died" in str(r) for r in done)
