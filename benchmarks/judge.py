"""Judge-engine benchmark: throughput, cache reruns, rate limiting, and the local model.

    .venv/bin/python benchmarks/judge.py                 # the full run (about a minute)
    .venv/bin/python benchmarks/judge.py --rpm-seconds 10 --skip-local   # quicker

1. ``--n`` judgments through the openai client (the SDK over its HTTP layer: aiohttp when
   installed, else httpx) against the fake OpenAI-compatible server (tests/fake_openai_server.py,
   in its own process) with ``--latency`` seconds per reply, at ``--concurrency``: wall time
   against the ideal n / concurrency × latency (goal: efficiency ≥ 0.9), and the client's CPU
   per call (this process: the event loop and the cache's writer thread). The run is repeated
   ``--repeat`` times, each with a fresh engine and an empty cache; the median run is the
   figure. ``floor_s`` is the wall time with zero overhead (whole rounds of ``--concurrency``
   calls). The same load with a stub client that just awaits the latency measures the
   scheduler alone. ``server_requests`` (what the server saw over all runs, warm-ups included)
   must equal ``usage_requests`` (the engines' ``requests + retries - connect_errors``).
2. The same requests again from the SQLite cache: zero requests sent (goal: under 2 s).
3. A requests-per-minute limit (``--rpm``) against a server enforcing the same limit: the rate
   achieved over ``--rpm-seconds`` (goal: within 5 % of the limit) and the 429s provoked
   (goal: none); then the same load without the client's limit, to show the server's limit bites.
4. The packaged SmolLM2-135M scored locally on CPU: judgments per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest  # noqa: E402
from rag_judge.llm.engine import JudgeEngine  # noqa: E402
from rag_judge.llm.providers.local import LocalClient  # noqa: E402
from rag_judge.llm.providers.openai import OpenAIClient  # noqa: E402
from rag_judge.llm.providers.stub import StubClient, fixed  # noqa: E402

SYSTEM = (
    "You are a strict grader. Judge whether the ANSWER is supported by the CONTEXT sections. "
    'Reply with JSON {"reason": "...", "score": 1-5}.'
)


def judgment(i: int, labels: bool = False) -> CompletionRequest:
    user = (
        f"<<<BEGIN QUESTION>>>\nQuestion {i}: which ocean is the largest?\n<<<END QUESTION>>>\n"
        "<<<BEGIN CONTEXT 1>>>\nThe Pacific Ocean is the largest and deepest of Earth's five "
        "oceanic divisions.\n<<<END CONTEXT 1>>>\n"
        "<<<BEGIN CONTEXT 2>>>\nThe Atlantic Ocean is the second-largest ocean.\n"
        "<<<END CONTEXT 2>>>\n"
        f"<<<BEGIN ANSWER>>>\nThe Pacific Ocean (variant {i}).\n<<<END ANSWER>>>"
    )
    return CompletionRequest(
        messages=(ChatMessage("system", SYSTEM), ChatMessage("user", user)),
        max_tokens=64,
        score_labels=("1", "2", "3", "4", "5") if labels else None,
    )


@contextmanager
def fake_server(latency: float, rpm_limit: float | None = None) -> Iterator[str]:
    """The fake server in a child process (so it shares no GIL with the client)."""
    argv = [
        sys.executable,
        str(ROOT / "tests" / "fake_openai_server.py"),
        "--latency",
        str(latency),
    ]
    if rpm_limit is not None:
        argv += ["--rpm-limit", str(rpm_limit)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def stats(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base_url}/stats", timeout=10) as response:
        data: dict[str, Any] = json.load(response)
    return data


def client_for(base_url: str) -> OpenAIClient:
    return OpenAIClient("fake-judge", base_url=base_url, timeout=30.0)


def _timed_run(url: str, requests: list[CompletionRequest], args: argparse.Namespace,
               cache_path: Path) -> tuple[float, float, int, int]:  # fmt: skip
    """One cold run (fresh engine and client, empty cache): wall s, client CPU s, completions,
    and the HTTP requests the engine's usage counted (warm-up included). A warm-up call first
    (the SDK's lazy imports, the connection pools), in the same loop."""

    async def run() -> tuple[float, float, int, int]:
        engine = JudgeEngine(client_for(url), cache=cache_path, concurrency=args.concurrency)
        async with engine:
            await engine.run([judgment(-1)])
            start, cpu = time.perf_counter(), time.process_time()
            results = await engine.run(requests)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        ok = sum(isinstance(r, Completion) for r in results)
        usage = engine.usage
        return wall, cpu, ok, usage.requests + usage.retries - usage.connect_errors

    return asyncio.run(run())


def _sdk_alone(url: str, requests: list[CompletionRequest], concurrency: int) -> float:
    """The reference: the same calls made straight through the SDK as its docs show it
    (``chat.completions.create`` under a semaphore, the aiohttp client), no engine, no cache:
    wall seconds, after one warm-up call."""
    import openai

    async def run() -> float:
        async with openai.AsyncOpenAI(
            base_url=url, api_key="EMPTY", max_retries=0, http_client=openai.DefaultAioHttpClient()
        ) as sdk:
            gate = asyncio.Semaphore(concurrency)

            async def one(request: CompletionRequest) -> object:
                async with gate:
                    return await sdk.chat.completions.create(
                        model="fake-judge",
                        messages=[
                            {"role": m.role, "content": m.content}  # type: ignore[misc]
                            for m in request.messages
                        ],
                        max_tokens=request.max_tokens,
                        temperature=request.temperature,
                    )

            await one(judgment(-1))
            start = time.perf_counter()
            await asyncio.gather(*map(one, requests))
            return time.perf_counter() - start

    return asyncio.run(run())


def throughput(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """``--repeat`` cold runs, each followed by the reference (the SDK alone); the medians and
    the best. Then a rerun of the last cache: zero requests."""
    requests = [judgment(i) for i in range(args.n)]
    ideal = args.n / args.concurrency * args.latency
    runs: list[tuple[float, float, int, int]] = []
    reference: list[float] = []
    with fake_server(args.latency) as url:
        for rep in range(args.repeat):
            cache_path = tmp / f"cache-{rep}.sqlite"
            runs.append(_timed_run(url, requests, args, cache_path))
            reference.append(_sdk_alone(url, requests, args.concurrency))
        seen = stats(url)["requests"]
        sent = seen - len(reference) * (args.n + 1)  # the engines' own, warm-ups included
        with JudgeEngine(client_for(url), cache=cache_path, concurrency=args.concurrency) as rerun:
            start = time.perf_counter()
            again = rerun.run_sync(requests)
            rerun_wall = time.perf_counter() - start
        sent_rerun = stats(url)["requests"] - seen
    walls = sorted(w for w, _, _, _ in runs)
    median = walls[len(walls) // 2]
    sdk_median = sorted(reference)[len(reference) // 2]
    out: dict[str, Any] = {
        "judgments": args.n,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_s": round(ideal, 3),
        "floor_s": round(-(-args.n // args.concurrency) * args.latency, 3),
        "repeats": args.repeat,
        "http": client_for("http://127.0.0.1:1/v1").http,
        "ok": min(ok for _, _, ok, _ in runs),
        "wall_s_median": round(median, 3),
        "efficiency_median": round(ideal / median, 3),
        "efficiency_best": round(ideal / walls[0], 3),
        "sdk_alone_wall_s_median": round(sdk_median, 3),
        "sdk_alone_efficiency": round(ideal / sdk_median, 3),
        "ratio_vs_sdk_alone": round(sdk_median / median, 3),
        "client_cpu_ms_per_call": round(
            sorted(c for _, c, _, _ in runs)[len(runs) // 2] / args.n * 1000, 3
        ),
        "server_requests": sent,
        "usage_requests": sum(counted for _, _, _, counted in runs),
    }
    out.update(
        cached_rerun_wall_s=round(rerun_wall, 3),
        cached_rerun_requests=sent_rerun,
        cached_rerun_hits=rerun.usage.cache_hits,
        cached_rerun_ok=sum(isinstance(r, Completion) and r.cached for r in again),
    )
    return out


def engine_only(args: argparse.Namespace) -> dict[str, Any]:
    """The scheduler alone: a stub whose every call awaits ``latency`` (no HTTP, no SDK)."""
    requests = [judgment(i) for i in range(args.n)]
    engine = JudgeEngine(StubClient(fixed(4), delay=args.latency), concurrency=args.concurrency)
    start = time.perf_counter()
    asyncio.run(engine.run(requests))
    wall = time.perf_counter() - start
    ideal = args.n / args.concurrency * args.latency
    return {
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "efficiency": round(ideal / wall, 3),
    }


def rate_limited(args: argparse.Namespace) -> dict[str, Any]:
    count = int(args.rpm / 60 * args.rpm_seconds)
    requests = [judgment(i) for i in range(count)]
    with fake_server(args.latency, rpm_limit=args.rpm) as url:
        engine = JudgeEngine(client_for(url), concurrency=args.concurrency, rpm=args.rpm)
        start = time.perf_counter()
        results = asyncio.run(engine.run(requests))
        wall = time.perf_counter() - start
        seen = stats(url)
    # The rate the server saw, from the first arrival to the last.
    achieved = (seen["requests"] - 1) / (seen["last_arrival"] - seen["first_arrival"]) * 60
    with fake_server(args.latency, rpm_limit=args.rpm) as url:
        unlimited = JudgeEngine(client_for(url), concurrency=args.concurrency, max_attempts=1)
        control = asyncio.run(unlimited.run(requests[: min(count, 200)]))
        control_stats = stats(url)
    return {
        "rpm_limit": args.rpm,
        "seconds": args.rpm_seconds,
        "requests": count,
        "ok": sum(isinstance(r, Completion) for r in results),
        "wall_s": round(wall, 3),
        "achieved_rpm": round(achieved, 1),
        "deviation": round(abs(achieved - args.rpm) / args.rpm, 4),
        "server_429s": seen["rate_limited"],
        "retries": engine.usage.retries,
        "without_client_limit_429s": control_stats["rate_limited"],
        "without_client_limit_failed": sum(isinstance(r, Exception) for r in control),
    }


def local_model(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    client = LocalClient()
    start = time.perf_counter()
    client.load()
    load = time.perf_counter() - start
    engine = JudgeEngine(client, concurrency=2)
    requests = [judgment(i, labels=True) for i in range(args.local_n)]
    asyncio.run(engine.run(requests[:1]))  # warm-up
    start = time.perf_counter()
    results = asyncio.run(engine.run(requests[1:]))
    wall = time.perf_counter() - start
    import torch

    return {
        "model": client.model,
        "load_s": round(load, 2),
        "judgments": len(requests) - 1,
        "ok": sum(isinstance(r, Completion) for r in results),
        "prompt_tokens_each": results[0].prompt_tokens
        if isinstance(results[0], Completion)
        else None,
        "judgments_per_s": round((len(requests) - 1) / wall, 2),
        "torch_threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="rag-judge judge-engine benchmark")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rpm", type=float, default=600.0)
    parser.add_argument("--rpm-seconds", type=float, default=30.0)
    parser.add_argument("--local-n", type=int, default=17)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="timed cold runs (median kept)")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()

    out: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        out["throughput"] = throughput(args, Path(tmp))
    print(json.dumps(out["throughput"], indent=2), flush=True)
    t = out["throughput"]
    print(
        f"{t['judgments']} judgments at {t['latency_s']} s, concurrency {t['concurrency']}: "
        f"ideal {t['ideal_s']} s; reference (openai SDK alone) {t['sdk_alone_wall_s_median']} s "
        f"(efficiency {t['sdk_alone_efficiency']}); rag-judge engine {t['wall_s_median']} s "
        f"(efficiency {t['efficiency_median']}, goal >= 0.9 on 16 cores); ratio "
        f"{t['ratio_vs_sdk_alone']}x; {os.cpu_count()} cores",
        flush=True,
    )
    out["engine_only"] = engine_only(args)
    print(json.dumps(out["engine_only"], indent=2), flush=True)
    out["rate_limit"] = rate_limited(args)
    print(json.dumps(out["rate_limit"], indent=2), flush=True)
    if not args.skip_local:
        out["local"] = local_model(args)
        print(json.dumps(out["local"], indent=2), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
