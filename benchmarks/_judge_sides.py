"""The sides of benchmarks/judge.py's throughput table: one cold run each, same requests.

Each side returns (wall s, client CPU s, texts). Client CPU is this process's CPU over the timed
run plus that of any worker processes (read with psutil, before and after; their start-up is
outside the timed run). ``texts`` are the first choice of each reply (None for a failure), to
assert that every side got the same answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_judge.llm.base import Completion, CompletionRequest
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers.openai import OpenAIClient

Side = tuple[float, float, list[str | None]]


def _cpu_of(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def engine_side(
    url: str,
    requests: list[CompletionRequest],
    warm: list[CompletionRequest],
    concurrency: int,
    processes: int,
    cache: Path,
    post: bool = False,
) -> tuple[Side, int]:
    """A fresh engine (``processes`` workers; 1: in-process) over the openai client and an empty
    cache, after the ``warm`` calls (the SDK's lazy imports, the connections, the workers'
    start). Also the HTTP requests its usage counted (warm-up included). ``post``: the client
    as it was before its per-call trim, every call through ``sdk.post`` (the reference for that
    trim)."""
    client = OpenAIClient("fake-judge", base_url=url, timeout=30.0)
    if post:
        client._open_clients = _without_templates(client)  # type: ignore[method-assign]

    async def run() -> tuple[Side, int]:
        engine = JudgeEngine(client, cache=cache, concurrency=concurrency, processes=processes)
        async with engine:
            await engine.run(warm)
            pids = engine.worker_pids
            start, cpu, workers = time.perf_counter(), time.process_time(), _cpu_of(pids)
            results = await engine.run(requests)
            wall = time.perf_counter() - start
            cpu = time.process_time() - cpu + _cpu_of(pids) - workers
        usage = engine.usage
        counted = usage.requests + usage.retries - usage.connect_errors
        return (wall, cpu, [_text(r) for r in results]), counted

    return asyncio.run(run())


def sdk_side(
    url: str, requests: list[CompletionRequest], warm: list[CompletionRequest], concurrency: int
) -> Side:
    """The openai SDK alone, as its docs show it: ``chat.completions.create`` under a
    semaphore over its aiohttp client; no engine, no cache."""
    import openai

    async def run() -> Side:
        async with openai.AsyncOpenAI(
            base_url=url, api_key="EMPTY", max_retries=0, http_client=openai.DefaultAioHttpClient()
        ) as sdk:
            gate = asyncio.Semaphore(concurrency)

            async def one(request: CompletionRequest) -> str | None:
                async with gate:
                    reply = await sdk.chat.completions.create(
                        model="fake-judge",
                        messages=[
                            {"role": m.role, "content": m.content}  # type: ignore[misc]
                            for m in request.messages
                        ],
                        max_tokens=request.max_tokens,
                        temperature=request.temperature,
                    )
                return reply.choices[0].message.content

            await asyncio.gather(*map(one, warm))
            start, cpu = time.perf_counter(), time.process_time()
            texts = await asyncio.gather(*map(one, requests))
            return time.perf_counter() - start, time.process_time() - cpu, list(texts)

    return asyncio.run(run())


def aiohttp_side(
    url: str, requests: list[CompletionRequest], warm: list[CompletionRequest], concurrency: int
) -> Side:
    """A raw aiohttp client: one session, JSON posted and parsed; the floor of the client."""
    import aiohttp

    async def run() -> Side:
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:
            gate = asyncio.Semaphore(concurrency)

            async def one(request: CompletionRequest) -> str | None:
                body = {
                    "model": "fake-judge",
                    "messages": [{"role": m.role, "content": m.content} for m in request.messages],
                    "max_tokens": request.max_tokens,
                    "temperature": request.temperature,
                }
                async with gate, session.post(f"{url}/chat/completions", json=body) as reply:
                    data = json.loads(await reply.read())
                text: str | None = data["choices"][0]["message"]["content"]
                return text

            await asyncio.gather(*map(one, warm))
            start, cpu = time.perf_counter(), time.process_time()
            texts = await asyncio.gather(*map(one, requests))
            return time.perf_counter() - start, time.process_time() - cpu, list(texts)

    return asyncio.run(run())


def _without_templates(client: OpenAIClient) -> Callable[[], list[Any]]:
    opened = client._open_clients

    def open_clients() -> list[Any]:
        sdks = opened()
        client._templates.clear()  # no template: each call built by sdk.post
        return sdks

    return open_clients


def _text(result: object) -> str | None:
    return result.choices[0] if isinstance(result, Completion) else None
