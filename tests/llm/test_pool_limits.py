"""The engine's rpm, tpm and concurrency are divided among the pool's workers, as
docs/judge-engine.md says: each worker's own engine paces its calls with token buckets at
``rpm / N`` and ``tpm / N``, and the concurrency shares add up to the engine's. No timing: a
probe client reports, from inside each worker, the limits the engine calling it was built with
and the rates of the buckets it paces with."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest
from rag_judge.llm.calls import CallRunner
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.pool import worker_limits


class LimitsProbe:
    """A client (picklable, so a worker gets a copy) whose every reply is the limits of the
    ``CallRunner`` calling it, found on the call stack, and its process id."""

    provider = "probe"
    model = "probe"
    base_url: str | None = None
    scores_labels = False
    supports_logprobs = False
    cancellable = True

    async def complete(self, request: CompletionRequest) -> Completion:
        frame = sys._getframe(1)
        while not isinstance(frame.f_locals.get("self"), CallRunner):
            assert frame.f_back is not None, "not called by a CallRunner"
            frame = frame.f_back
        runner: CallRunner = frame.f_locals["self"]
        limiter = runner._limiter
        assert limiter is not None and limiter.requests is not None and limiter.tokens is not None
        seen = {
            "pid": os.getpid(),
            "concurrency": runner.concurrency,
            "rpm": runner.rpm,
            "tpm": runner.tpm,
            "requests_per_minute": limiter.requests.rate * 60,
            "tokens_per_minute": limiter.tokens.rate * 60,
        }
        return Completion(choices=[json.dumps(seen)])


def test_each_worker_paces_its_share_of_rpm_and_tpm() -> None:
    requests = [
        CompletionRequest(messages=(ChatMessage("user", f"claim {i}"),), max_tokens=8)
        for i in range(60)
    ]
    with JudgeEngine(
        LimitsProbe(), concurrency=10, rpm=60_000, tpm=6_000_000, processes=3
    ) as engine:
        results = engine.run_sync(requests)
        pids = set(engine.worker_pids)
    seen: dict[int, dict[str, Any]] = {}
    for result in results:
        assert isinstance(result, Completion), result
        report = json.loads(result.text)
        seen[report.pop("pid")] = report
    assert set(seen) == pids and len(pids) == 3 and os.getpid() not in pids
    for report in seen.values():
        assert report["rpm"] == 20_000 and report["tpm"] == 2_000_000
        # The buckets' rates per second, back in per minute (a float's rounding apart).
        assert report["requests_per_minute"] == pytest.approx(20_000)
        assert report["tokens_per_minute"] == pytest.approx(2_000_000)
    assert sorted(r["concurrency"] for r in seen.values()) == [3, 3, 4]
    assert engine.usage.requests == 60


def test_worker_limits_add_up_to_the_engines() -> None:
    limits = {"concurrency": 10, "rpm": 600.0, "tpm": None, "max_attempts": 4, "timeout": 5.0}
    shares = worker_limits(limits, 4)
    assert [s["concurrency"] for s in shares] == [3, 3, 2, 2]
    assert [s["rpm"] for s in shares] == [150.0] * 4
    assert all(s["tpm"] is None for s in shares)  # no limit stays no limit
    assert all(s["max_attempts"] == 4 and s["timeout"] == 5.0 for s in shares)
    assert limits["rpm"] == 600.0  # the engine's own limits are left as they were
