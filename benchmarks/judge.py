"""Judge-engine benchmark: throughput, cache reruns, rate limiting, and the local model.

    .venv/bin/python benchmarks/judge.py                 # the full run (about a minute)
    .venv/bin/python benchmarks/judge.py --rpm-seconds 10 --skip-local   # quicker

1. ``--n`` judgments against the fake OpenAI-compatible server (tests/fake_openai_server.py, in
   its own process; ``--server-processes K`` copies on one port) with ``--latency`` seconds per
   reply, at ``--concurrency``, per side in interleaved rounds (``--repeat``, medians): the
   engine in-process over the openai client (and with ``--post-side``, the same engine with
   every call built by ``sdk.post``, as before the client's per-call trim); the engine with
   each ``--processes N`` worker processes; the openai SDK alone; a raw aiohttp client. Per
   side: wall, efficiency against the ideal n / concurrency × latency (goal ≥ 0.9), calls/s,
   and client CPU per call (this process's plus the workers', via psutil). Every side's answers
   must equal the in-process engine's. ``server_requests`` (what the server saw from the
   engines, warm-ups included) must equal ``usage_requests`` (their ``requests + retries -
   connect_errors``).
   ``--throughput-only`` stops after this table.
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from _judge_sides import aiohttp_side, engine_side, sdk_side  # noqa: E402

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
def fake_server(
    latency: float, rpm_limit: float | None = None, processes: int = 1
) -> Iterator[str]:
    """The fake server in child processes (so it shares no GIL with the client): ``processes``
    of them on one port (SO_REUSEPORT), for loads one process cannot serve."""
    argv = [
        sys.executable,
        str(ROOT / "tests" / "fake_openai_server.py"),
        "--latency",
        str(latency),
    ]
    if rpm_limit is not None:
        argv += ["--rpm-limit", str(rpm_limit)]
    if processes > 1:
        argv.append("--reuse-port")
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)]
    try:
        assert procs[0].stdout is not None
        url = procs[0].stdout.readline().strip()
        port = url.rsplit(":", 1)[1].split("/")[0]
        for _ in range(processes - 1):
            more = [*argv, "--port", port]
            procs.append(
                subprocess.Popen(more, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            )
            assert procs[-1].stdout is not None
            procs[-1].stdout.readline()
        yield url
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)


def stats(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base_url}/stats", timeout=10) as response:
        data: dict[str, Any] = json.load(response)
    return data


def client_for(base_url: str) -> OpenAIClient:
    return OpenAIClient("fake-judge", base_url=base_url, timeout=30.0)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def throughput(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """``--repeat`` rounds; in each, one cold run per side, interleaved: the engine in-process,
    the engine with each ``--processes`` N worker processes, the openai SDK alone and a raw
    aiohttp client. Medians per side; every side's answers must equal the in-process engine's.
    Then a rerun of the last cache: zero requests."""
    requests = [judgment(i) for i in range(args.n)]
    warm = warm_ups(args)
    ideal = args.n / args.concurrency * args.latency
    sides = ["engine"] + (["engine_post"] if args.post_side else [])
    sides += [f"pool_{n}" for n in args.processes if n > 1] + ["sdk", "aiohttp"]
    runs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    counted = 0
    with fake_server(args.latency, processes=args.server_processes) as url:
        for rep in range(args.repeat):
            expected: list[str | None] | None = None
            for side in sides:
                if side.startswith(("engine", "pool_")):
                    processes = int(side[5:]) if side.startswith("pool_") else 1
                    cache_path = tmp / f"cache-{rep}-{side}.sqlite"
                    (wall, cpu, texts), sent = engine_side(
                        url, requests, warm, args.concurrency, processes, cache_path,
                        post=side == "engine_post",
                    )  # fmt: skip
                    counted += sent
                elif side == "sdk":
                    wall, cpu, texts = sdk_side(url, requests, warm, args.concurrency)
                else:
                    wall, cpu, texts = aiohttp_side(url, requests, warm, args.concurrency)
                expected = texts if expected is None else expected
                assert texts == expected and None not in texts, f"{side}: other answers"
                runs[side].append((wall, cpu))
                # Progress on stderr: a run cut short by a time limit still shows its sides.
                print(f"round {rep + 1} {side}: {wall:.3f} s", file=sys.stderr, flush=True)
        # Each reference side sent n requests and its warm-ups; the engines' own from usage.
        seen = stats(url)["requests"] if args.server_processes == 1 else None
        references = 2 * args.repeat * (args.n + len(warm))
        with JudgeEngine(client_for(url), cache=cache_path, concurrency=args.concurrency) as rerun:
            start = time.perf_counter()
            again = rerun.run_sync(requests)
            rerun_wall = time.perf_counter() - start
        sent_rerun = stats(url)["requests"] - seen if seen is not None else None
    out: dict[str, Any] = {
        "judgments": args.n,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_s": round(ideal, 3),
        "ideal_calls_per_s": round(args.n / ideal, 1),
        "repeats": args.repeat,
        "warm_up_calls": len(warm),
        "http": client_for("http://127.0.0.1:1/v1").http,
        "server_processes": args.server_processes,
        "sides": {},
    }
    for side, measured in runs.items():
        wall = _median([w for w, _ in measured])
        out["sides"][side] = {
            "wall_s": round(wall, 3),
            "efficiency": round(ideal / wall, 3),
            "calls_per_s": round(args.n / wall, 1),
            "client_cpu_ms_per_call": round(_median([c for _, c in measured]) / args.n * 1000, 3),
        }
    out.update(
        server_requests=None if seen is None else seen - references,
        usage_requests=counted,
        cached_rerun_wall_s=round(rerun_wall, 3),
        cached_rerun_requests=sent_rerun,
        cached_rerun_hits=rerun.usage.cache_hits,
        cached_rerun_ok=sum(isinstance(r, Completion) and r.cached for r in again),
    )
    return out


def warm_ups(args: argparse.Namespace) -> list[CompletionRequest]:
    """The calls each side makes before its timed run, none of them a timed request: ``--warm-up``
    of them, by default two per call slot. That fills every worker's window of a pool (two
    requests per slot), so each worker has made its first SDK call (lazy imports, its client)
    and every side has its connections open before the clock starts."""
    count = 2 * args.concurrency if args.warm_up is None else args.warm_up
    return [
        CompletionRequest(messages=judgment(args.n + k).messages, max_tokens=1)
        for k in range(count)
    ]


def print_sides(t: dict[str, Any]) -> None:
    """One line per side: what the table in the README reads."""
    print(
        f"{t['judgments']} judgments at {t['latency_s']} s, concurrency {t['concurrency']}: "
        f"ideal {t['ideal_s']} s ({t['ideal_calls_per_s']} calls/s); {os.cpu_count()} cores; "
        f"medians of {t['repeats']}; {t.get('warm_up_calls', 1)} warm-up calls per side"
    )
    for side, row in t["sides"].items():
        print(
            f"  {side:<9} wall {row['wall_s']:>7.3f} s  efficiency {row['efficiency']:.3f}  "
            f"{row['calls_per_s']:>8.1f} calls/s  client CPU {row['client_cpu_ms_per_call']:.3f} "
            "ms/call",
            flush=True,
        )


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
    parser.add_argument(
        "--warm-up",
        type=int,
        default=None,
        help="untimed calls before each side's run, at least 1 (default 2 per call slot; 1 as "
        "before)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[2],
        help="worker processes of each pool side (the engine's client: {processes: N})",
    )
    parser.add_argument(
        "--post-side",
        action="store_true",
        help="also the engine_post side: the client before its per-call trim (sdk.post per call)",
    )
    parser.add_argument(
        "--server-processes", type=int, default=1, help="fake server processes on one port"
    )
    parser.add_argument(
        "--throughput-only", action="store_true", help="only the throughput table (section 1)"
    )
    args = parser.parse_args()
    if args.warm_up is not None and args.warm_up < 1:
        parser.error(f"--warm-up {args.warm_up}: each side needs at least one warm-up call")

    out: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        out["throughput"] = throughput(args, Path(tmp))
    print(json.dumps(out["throughput"], indent=2), flush=True)
    print_sides(out["throughput"])
    if args.throughput_only:
        _write(args, out)
        return
    out["engine_only"] = engine_only(args)
    print(json.dumps(out["engine_only"], indent=2), flush=True)
    out["rate_limit"] = rate_limited(args)
    print(json.dumps(out["rate_limit"], indent=2), flush=True)
    if not args.skip_local:
        out["local"] = local_model(args)
        print(json.dumps(out["local"], indent=2), flush=True)
    _write(args, out)


def _write(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
