"""The OpenAI Batch API path (``batch: true``) against the fake server's /v1/files and
/v1/batches: polling, per-line errors on the right requests, expired and failed batches, a run
killed between submit and download, the cache, and the batch price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_judge.errors import ConfigError
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.llm import ChatMessage, ClientConfig, CompletionRequest, JudgeEngine, LLMError
from rag_judge.llm.batch import POLL_INITIAL, batch_note, state_folder
from rag_judge.llm.providers.openai import OpenAIClient
from rag_judge.report.model import FailureKind
from tests.evaluators import judge_sample
from tests.fake_openai_server import BatchPlan, FakeOpenAIServer, Reply, error


class Killed(BaseException):
    """The process dying (not an Exception: nothing may turn it into a result)."""


def _requests(*words: str) -> list[CompletionRequest]:
    return [CompletionRequest(messages=(ChatMessage("user", f"judge {w}"),)) for w in words]


def _engine(srv: FakeOpenAIServer, cache: Path, sleeps: list[float], **kw: Any) -> JudgeEngine:
    async def sleep(seconds: float) -> None:  # a fake clock: note the wait, do not wait
        sleeps.append(seconds)

    client = OpenAIClient("fake-judge", base_url=srv.base_url, batch=True)
    return JudgeEngine(client, cache=cache, sleep=sleep, **kw)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("RAG_JUDGE_CACHE_DIR", str(tmp_path / "cache_dir"))


def _by_word(body: dict[str, Any]) -> Reply | str:
    said = body["messages"][-1]["content"]
    if "bad" in said:
        return error(400, "this line is refused")
    return f"reply to {said}"


def test_a_batch_is_polled_with_capped_backoff_read_back_and_cached(tmp_path: Path) -> None:
    sleeps: list[float] = []
    requests = _requests("one", "two", "one", "three")  # "one" twice: sent once
    with FakeOpenAIServer(_by_word, batches=[BatchPlan(polls=3)]) as srv:
        with _engine(srv, tmp_path / "judge.sqlite", sleeps) as engine:
            results = engine.run_sync(requests)
            usage = engine.usage
        assert srv.batches_created == 1 and srv.received == 0  # no direct chat call
        assert len(srv.batch_lines) == 3
        calls = len(srv.calls)
        with _engine(srv, tmp_path / "judge.sqlite", []) as again:
            rerun = again.run_sync(requests)
        assert len(srv.calls) == calls  # the cache served the rerun: zero server calls
    assert [r.text for r in results if not isinstance(r, LLMError)] == [
        "reply to judge one", "reply to judge two", "reply to judge one", "reply to judge three"
    ]  # fmt: skip
    assert sleeps == [POLL_INITIAL, POLL_INITIAL * 1.5, POLL_INITIAL * 2.25]
    assert usage.requests == 3 and usage.cache_hits == 1 and usage.failures == 0
    assert usage.prompt_tokens > 0
    assert all(not isinstance(r, LLMError) and r.cached for r in rerun)
    assert not list(state_folder(engine).glob("*.json"))  # read back: nothing left to resume


def test_per_line_errors_fail_their_own_requests_only(tmp_path: Path) -> None:
    with FakeOpenAIServer(_by_word) as srv, _engine(srv, tmp_path / "c.sqlite", []) as engine:
        results = engine.run_sync(_requests("good", "bad", "fine"))
        assert engine.usage.failures == 1
    good, bad, fine = results
    assert isinstance(bad, LLMError) and bad.status == 400
    assert "HTTP 400" in str(bad) and "this line is refused" in str(bad)
    assert not isinstance(good, LLMError) and good.text == "reply to judge good"
    assert not isinstance(fine, LLMError) and fine.text == "reply to judge fine"


def test_an_expired_batch_keeps_what_ran_and_fails_the_rest(tmp_path: Path) -> None:
    plan = BatchPlan(outcome="expired", ran=1)
    with (
        FakeOpenAIServer(_by_word, batches=[plan]) as srv,
        _engine(srv, tmp_path / "c.sqlite", []) as engine,
    ):
        first, second = engine.run_sync(_requests("a", "b"))
    assert not isinstance(first, LLMError) and first.text == "reply to judge a"
    assert isinstance(second, LLMError) and "batch_expired" in str(second)


def test_a_failed_batch_and_a_missing_line_are_failures_not_a_crash(tmp_path: Path) -> None:
    plans = [BatchPlan(outcome="failed"), BatchPlan(drop=[0])]
    with FakeOpenAIServer(_by_word, batches=plans) as srv:
        with _engine(srv, tmp_path / "c.sqlite", []) as engine:
            failed = engine.run_sync(_requests("x", "y"))
            dropped = engine.run_sync(_requests("x", "y"))  # failures are not cached: resent
        assert srv.batches_created == 2
    assert all(isinstance(r, LLMError) and "failed" in str(r) for r in failed)
    assert "invalid_request: scripted" in str(failed[0])
    assert isinstance(dropped[0], LLMError) and "no result for this request" in str(dropped[0])
    assert not isinstance(dropped[1], LLMError) and dropped[1].text == "reply to judge y"


def test_a_run_killed_between_submit_and_download_resumes_the_same_batch(tmp_path: Path) -> None:
    async def die(seconds: float) -> None:
        raise Killed

    cache = tmp_path / "judge.sqlite"
    requests = _requests("p", "q")
    with FakeOpenAIServer(_by_word, batches=[BatchPlan(polls=2)]) as srv:
        client = OpenAIClient("fake-judge", base_url=srv.base_url, batch=True)
        with JudgeEngine(client, cache=cache, sleep=die) as engine, pytest.raises(Killed):
            engine.run_sync(requests)
        noted = list(state_folder(engine).glob("*.json"))
        assert len(noted) == 1 and "batch_1" in noted[0].read_text()
        with _engine(srv, cache, []) as again:
            results = again.run_sync(requests)
        assert srv.batches_created == 1  # polled the noted batch, never submitted another
        assert srv.calls.count("POST /v1/files") == 1 and srv.calls.count("POST /v1/batches") == 1
    assert [r.text for r in results if not isinstance(r, LLMError)] == [
        "reply to judge p", "reply to judge q"
    ]  # fmt: skip
    assert not noted[0].exists()


def test_a_judge_run_goes_through_the_batch_api_and_reruns_from_the_cache(
    tmp_path: Path,
) -> None:
    samples = [judge_sample(i) for i in range(1, 5)]

    def script(body: dict[str, Any]) -> Reply | str:
        if "Question 3?" in str(body["messages"]):  # one sample's line fails
            return error(500, "the model is overloaded")
        return '{"reason": "relevant", "score": 4}'

    def judge(srv: FakeOpenAIServer) -> JudgeEvaluator:
        client = {"provider": "openai", "model": "fake-judge", "batch": True,
                  "base_url": srv.base_url}  # fmt: skip
        return JudgeEvaluator(rubrics=["answer_relevance"], cache=str(tmp_path / "j.sqlite"),
                              client=client)  # fmt: skip

    with FakeOpenAIServer(script) as srv:
        result = judge(srv).evaluate(samples)
        assert len(srv.batch_lines) == len(samples) and srv.received == 0
        calls = len(srv.calls)
        rerun = judge(srv).evaluate([s for s in samples if s.id != "s3"])
        assert len(srv.calls) == calls  # every judged sample came from the cache
    scores = [j.get("answer_relevance") for j in result.judgments]
    failed = [i for i, e in enumerate(result.errors) if "answer_relevance" in e]
    assert failed == [2] and result.errors[2]["answer_relevance"].kind is FailureKind.ERROR
    assert "the model is overloaded" in result.errors[2]["answer_relevance"].message
    assert [s.score for i, s in enumerate(scores) if i != 2 and s is not None] == [4, 4, 4]
    assert result.usage.requests == len(samples)
    assert [j["answer_relevance"].score for j in rerun.judgments] == [4, 4, 4]


def test_batch_prices_are_half_the_normal_ones_and_the_dry_run_says_so(tmp_path: Path) -> None:
    prices = {"prompt_price_per_1k": 1.0, "completion_price_per_1k": 2.0}
    requests = _requests("cost")
    normal = JudgeEngine(OpenAIClient("m", base_url="http://127.0.0.1:9/v1"), **prices)
    batch = JudgeEngine(OpenAIClient("m", base_url="http://127.0.0.1:9/v1", batch=True), **prices)
    full, half = normal.dry_run(requests)["cost_estimate"], batch.dry_run(requests)["cost_estimate"]
    assert full is not None and half == pytest.approx(full * 0.5)
    config = ClientConfig(provider="openai", model="m", batch=True)
    note = batch_note({"judge": {"client": config}})
    assert note is not None and "50%" in note and "Batch API" in note
    assert batch_note(ClientConfig(provider="openai", model="m")) is None


def test_batch_needs_the_openai_provider() -> None:
    with pytest.raises((ConfigError, ValueError), match="needs provider 'openai'"):
        ClientConfig(provider="stub", batch=True)


def test_the_cli_dry_run_prices_batch_requests_and_says_so(tmp_path: Path, capsys: Any) -> None:
    from rag_judge.cli import main
    from tests import REPO

    def config(batch: bool) -> Path:
        path = tmp_path / f"exp_{batch}.yaml"
        path.write_text(
            f"dataset: {REPO / 'configs/data/demo.jsonl'}\n"
            "evaluators:\n  - type: judge\n    rubrics: [answer_relevance]\n    cache: null\n"
            "    client: {provider: openai, model: m, base_url: 'http://127.0.0.1:9/v1',\n"
            "             prompt_price_per_1k: 1.0, completion_price_per_1k: 2.0,\n"
            f"             batch: {batch}}}\n"
        )
        return path

    costs = {}
    for batch in (False, True):
        assert main(["run", str(config(batch)), "--dry-run"]) == 0
        out = capsys.readouterr().out
        costs[batch] = float(out.split("$")[1].split()[0])
        assert ("Batch API" in out) is batch
    assert costs[True] == pytest.approx(costs[False] * 0.5, rel=1e-3)


def test_the_worked_example_in_docs_batch_md_prints_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib
    import io

    from tests import REPO

    page = (REPO / "docs" / "batch.md").read_text(encoding="utf-8")
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    expected = [line.split("  # ", 1)[1] for line in block.splitlines() if "print(" in line]
    monkeypatch.chdir(tmp_path)  # example.sqlite and its batch notes land here
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "docs/batch.md", "exec"), {"__name__": "docs_batch"})
    assert out.getvalue().splitlines() == expected
