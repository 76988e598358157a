"""One asyncio scheduler for every judge call: limits, retries, cache, usage.

``JudgeEngine.run`` takes the requests, answers what it can from the cache, and sends the rest
through one concurrency limit and one rate limiter, retrying what may succeed on another attempt.
It returns one result per request, in order: the ``Completion`` or, for a call that failed for
good, the ``LLMError`` (returned, never raised). Every finished call is cached at once, so a run
that is killed and restarted repeats only the calls that had not finished. An engine is a
context manager (``with`` / ``async with``): leaving it closes the client's connections and the
cache the engine opened.

Time is injectable (``clock``, ``sleep``): nothing here blocks, and tests never really wait.
One call (its limits, attempts, timeout and usage) is made by ``CallRunner`` in
rag_judge/llm/calls.py, which ``JudgeEngine`` extends with what a run needs.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from rag_judge import _progress as progress
from rag_judge._async import run_sync
from rag_judge.errors import ConfigError
from rag_judge.llm.base import Completion, CompletionRequest, LLMClient, LLMError, Usage
from rag_judge.llm.batch import BATCH_DISCOUNT, run_batch
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.calls import INITIAL_RETRY_DELAY, MAX_RETRY_AFTER, MAX_RETRY_DELAY, CallRunner
from rag_judge.llm.pool import ProcessPool
from rag_judge.llm.prices import Price, cost
from rag_judge.llm.ratelimit import Clock, RateLimiter, Sleeper, count_prompt_tokens

__all__ = [
    "INITIAL_RETRY_DELAY",
    "MAX_RETRY_AFTER",
    "MAX_RETRY_DELAY",
    "JudgeEngine",
]

_CHUNK = 256  # requests keyed and looked up in the cache at a time (see ``run``)
# The fields of a request besides its messages (written out apart in a run's key).
_SCALARS = tuple(f.name for f in fields(CompletionRequest) if f.name != "messages")

Result = Completion | LLMError


class JudgeEngine(CallRunner):
    """Schedules ``client`` calls under one concurrency limit, optional requests- and
    tokens-per-minute limits, capped retries with backoff, an optional per-call ``timeout``
    (seconds) and an optional cache. Prices: per 1,000 tokens, or a ``Price`` from a table.

    ``cache`` is a ``SqliteCache`` or the path of its file. Ownership: a cache the engine opened
    from a path is the engine's, and ``close`` closes it; a ``SqliteCache`` passed in is the
    caller's, who closes it (it may serve several engines).

    An engine is a context manager. One-shot, from synchronous code::

        with make_engine(config, cache=path) as engine:
            results = engine.run_sync(requests)

    Several rounds in one event loop (the client's connections stay open between them)::

        async with make_engine(config, cache=path) as engine:
            first = await engine.run(requests)
            again = await engine.run(followups)

    Leaving either block (or ``close()`` / ``await aclose()``) closes the client's connections
    (its ``aclose``, when it has one; the client stays usable and reopens them on its next
    call) and the cache the engine owns; a closed engine runs nothing more.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        cache: SqliteCache | str | Path | None = None,
        concurrency: int = 8,
        rpm: float | None = None,
        tpm: float | None = None,
        max_attempts: int = 4,
        timeout: float | None = None,
        prompt_price_per_1k: float | None = None,
        completion_price_per_1k: float | None = None,
        price: Price | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleeper = asyncio.sleep,
        rng: random.Random | None = None,
        processes: int = 1,
    ) -> None:
        _check(concurrency >= 1, "concurrency", concurrency, "an integer >= 1")
        legal = f"an integer from 1 (calls made in this process) to concurrency={concurrency}"
        _check(type(processes) is int and 1 <= processes <= concurrency, "processes", processes,
               legal)  # fmt: skip
        _check(max_attempts >= 1, "max_attempts", max_attempts, "an integer >= 1")
        for name, value in (("rpm", rpm), ("tpm", tpm), ("timeout", timeout)):
            _check(value is None or value > 0, name, value, "a number > 0, or None for no limit")
        for name, value in (
            ("prompt_price_per_1k", prompt_price_per_1k),
            ("completion_price_per_1k", completion_price_per_1k),
        ):
            _check(value is None or value >= 0, name, value, "a number >= 0, or None")
        self.client = client
        self._owns_cache = isinstance(cache, str | Path)
        self.cache = SqliteCache(cache) if isinstance(cache, str | Path) else cache
        self._closed = False
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self.max_attempts = max_attempts
        self.timeout = timeout
        # Explicit per-1k prices win over ``price`` (from a price table; see llm/prices.py).
        explicit = prompt_price_per_1k is not None or completion_price_per_1k is not None
        self.price = (
            Price.per_1k(prompt_price_per_1k, completion_price_per_1k) if explicit else price
        )
        # A batch client (rag_judge.llm.batch) is billed at the Batch API's price: the price
        # table's factor, and for the client's own per-1k prices OpenAI's, BATCH_DISCOUNT.
        self.batch = bool(getattr(client, "batch", False))
        self.batch_priced = self.batch
        if self.batch and explicit and self.price is not None:
            self.price = self.price.model_copy(update={"batch": BATCH_DISCOUNT})
        self.usage = Usage(cost=0.0 if self.price is not None else None)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        # Semaphore and buckets belong to one event loop; run_sync may bring a fresh one.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._limiter: RateLimiter | None = None
        # Worker processes (rag_judge.llm.pool), started on the first run; a batch client sends
        # its requests in one upload, so it has none.
        self.processes = processes
        self._pool: ProcessPool | None = None
        if processes > 1 and not self.batch:
            limits = {"concurrency": concurrency, "rpm": rpm, "tpm": tpm,
                      "max_attempts": max_attempts, "timeout": timeout}  # fmt: skip
            self._pool = ProcessPool(_picklable(client, processes), processes, limits)

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the pool's live workers ([] without a pool, or before a run)."""
        return self._pool.pids if self._pool is not None else []

    def key(self, request: CompletionRequest) -> str:
        """The cache key of ``request`` on this engine's client."""
        c = self.client
        return request.fingerprint(provider=c.provider, model=c.model, base_url=c.base_url)

    def _run_key(self, request: CompletionRequest) -> str:
        """What identical requests share in a run: the cache key (also a batch line's id), or
        without a cache and a batch the request's fields written out, without escaping the
        messages into JSON or hashing the whole through SHA-256 (a tenth of the cost)."""
        if self.cache is not None or self.batch:
            return self.key(request)
        # The other fields as the fingerprint writes them (JSON tells 0 from 0.0, -0.0 from
        # 0.0 and True from 1, and writes a list as a tuple), then each message with its
        # length, so no two lists of messages run together into one text. One str: its hash is
        # computed once, where a tuple of messages hashes them again on every lookup.
        rest = {f: getattr(request, f) for f in _SCALARS}
        parts = [json.dumps(rest, sort_keys=True, ensure_ascii=False)]
        parts += [f"\n{m.role} {len(m.content)} {m.content}" for m in request.messages]
        return "".join(parts)

    # ---- running -------------------------------------------------------------------------

    async def run(
        self, requests: Sequence[CompletionRequest], label: str = "judge"
    ) -> list[Completion | LLMError]:
        """One result per request, in order; a failure comes back as its ``LLMError``. The
        calls are counted as a progress task named ``label`` (shown when a display is on).

        Requests are keyed and looked up in the cache a chunk at a time, and each chunk's calls
        start before the next chunk is keyed, so the first calls go out within a millisecond
        instead of after the whole list has been hashed."""
        self._check_open()
        results: list[Result | None] = [None] * len(requests)
        bar = progress.task(label, len(requests), "calls")
        started: set[str] = set()  # keys whose one call is under way or done
        followers: dict[str, list[int]] = defaultdict(list)
        settled: dict[str, Result] = {}
        tasks: list[asyncio.Task[None]] = []
        batched: list[tuple[int, str]] = []  # with a batch client: sent together at the end

        def follow(j: int, result: Result) -> None:
            # An identical request: the one call made for its leader serves it too.
            self.usage.cache_hits += 1
            if isinstance(result, LLMError):
                self.usage.failures += 1
                results[j] = result
            else:
                results[j] = replace(result, cached=True, extra=dict(result.extra))
            bar.update(done=1, cached=1, failed=isinstance(result, LLMError))

        async def settle(i: int, key: str) -> None:
            if pool is None:
                result = await self._call(key, requests[i], bar)
            else:
                result = await self._pooled(pool, key, requests[i], bar)
            results[i] = settled[key] = result
            bar.update(done=1, failed=isinstance(result, LLMError))
            for j in followers.pop(key, ()):
                follow(j, result)

        async def settle_batch() -> None:
            found = await run_batch(self, [(key, requests[i]) for i, key in batched])
            for i, key in batched:
                results[i] = settled[key] = found[key]
                bar.update(done=1, failed=isinstance(found[key], LLMError))
                for j in followers.pop(key, ()):
                    follow(j, found[key])

        pool = self._pool
        try:
            if pool is not None:
                pool.attach()
            for start in range(0, len(requests), _CHUNK):
                chunk = range(start, min(start + _CHUNK, len(requests)))
                keys = [self._run_key(requests[i]) for i in chunk]
                # With a cache, every key is the cache key (``_run_key``).
                cached = self.cache.get_many(keys) if self.cache is not None else {}
                for i, key in zip(chunk, keys):
                    if key in cached:
                        results[i] = replace(cached[key], extra=dict(cached[key].extra))
                        self.usage.cache_hits += 1
                        bar.update(done=1, cached=1)
                    elif key in settled:
                        follow(i, settled[key])
                    elif key in started:
                        followers[key].append(i)
                    elif self.batch:
                        started.add(key)
                        batched.append((i, key))
                    else:
                        started.add(key)
                        tasks.append(asyncio.ensure_future(settle(i, key)))
                await asyncio.sleep(0)  # let this chunk's calls go out
            if batched:
                tasks.append(asyncio.ensure_future(settle_batch()))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()  # a no-op for finished ones; stops the rest if the run is cancelled
            if pool is not None:
                pool.detach()
            bar.close()
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:  # cannot happen unless the scheduling above is broken
            raise RuntimeError(f"judge engine lost the results of requests {missing[:5]}")
        return [r for r in results if r is not None]

    def run_sync(
        self, requests: Sequence[CompletionRequest], label: str = "judge"
    ) -> list[Completion | LLMError]:
        """``run`` from synchronous code: a script, Jupyter, or a thread with a running loop.

        The run gets a loop of its own, so the client's connections are closed at its end (the
        engine stays open for more runs). For several rounds over the same connections, use
        ``async with`` and ``await run(...)`` in one loop instead."""
        self._check_open()

        async def run_and_close() -> list[Completion | LLMError]:
            try:
                return await self.run(requests, label=label)
            finally:
                await self._close_client()

        return run_sync(run_and_close())

    def dry_run(self, requests: Sequence[CompletionRequest]) -> dict[str, Any]:
        """What ``run`` would send, spending nothing: the calls not already cached (identical
        requests counted once), their prompt tokens, and the cost with every reply at its
        ``max_tokens`` (an upper bound; None without prices)."""
        self._check_open()
        keys = [self.key(r) for r in requests]
        cached = self.cache.get_many(keys) if self.cache is not None else {}
        todo = {k: r for k, r in zip(keys, requests) if k not in cached}
        prompt = sum(count_prompt_tokens(r.messages) for r in todo.values())
        completion_max = sum(r.max_tokens * r.n for r in todo.values())
        bound = None
        if self.price is not None:
            tokens = {"prompt_tokens": prompt, "completion_tokens": completion_max}
            bound = cost(tokens, self.price, batch=self.batch_priced)
        return {
            "requests": len(todo),
            "cache_hits": len(requests) - len(todo),
            "prompt_tokens_estimate": prompt,
            "completion_tokens_max": completion_max,
            "cost_estimate": bound,
        }

    # ---- closing -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the client's connections and the cache this engine opened (see the class
        docstring); a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._close_client()
        finally:
            self._close_pool()
            self._close_cache()

    def close(self) -> None:
        """``aclose`` from synchronous code (in a loop of its own, as ``run_sync`` runs)."""
        if self._closed:
            return
        self._closed = True
        try:
            if getattr(self.client, "aclose", None) is not None:
                run_sync(self._close_client())
        finally:
            self._close_pool()
            self._close_cache()

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.close()

    async def _close_client(self) -> None:
        close = getattr(self.client, "aclose", None)
        if close is not None:
            await close()

    def _close_cache(self) -> None:
        if self._owns_cache and self.cache is not None:
            self.cache.close()  # commits what is queued, stops the writer thread

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this JudgeEngine is closed")

    def __enter__(self) -> JudgeEngine:
        self._check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> JudgeEngine:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _picklable(client: LLMClient, processes: int) -> LLMClient:
    """``client``, if a copy of it can be sent to a worker process (pickled); else a ConfigError."""
    try:
        pickle.dumps(client)
    except Exception as exc:
        raise ConfigError(
            f"JudgeEngine processes={processes!r} is not valid for {type(client).__name__}: its "
            f"client cannot be sent to a worker process ({type(exc).__name__}: {exc}); "
            "expected processes=1 for this client"
        ) from None
    return client


def _check(ok: bool, name: str, value: object, legal: str) -> None:
    if not ok:
        raise ConfigError(f"JudgeEngine {name}={value!r} is not valid: expected {legal}")
