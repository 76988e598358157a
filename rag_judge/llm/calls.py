"""One judge call under the engine's limits: the half of ``JudgeEngine`` that makes a call.

``CallRunner`` holds what one call needs: the concurrency limit and rate limiter of the running
loop, the attempts with their backoff, the per-call timeout, and the accounting of each call in
a ``Usage``. ``JudgeEngine`` (rag_judge/llm/engine.py) builds on it with what a run needs: the
cache, identical requests served once, worker processes and closing. A worker process of the
pool (rag_judge/llm/pool_worker.py) calls ``call`` for each request it is sent.
"""

from __future__ import annotations

import asyncio
import logging
import random

from rag_judge import _progress as progress
from rag_judge.llm.base import Completion, CompletionRequest, LLMClient, LLMError, Usage
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.http import counted_requests
from rag_judge.llm.pool import COUNTERS, ProcessPool
from rag_judge.llm.prices import Price, cost
from rag_judge.llm.ratelimit import Clock, RateLimiter, Sleeper, request_tokens

__all__ = ["INITIAL_RETRY_DELAY", "MAX_RETRY_AFTER", "MAX_RETRY_DELAY", "CallRunner"]

# openai-python's schedule: 0.5 s doubling to at most 8 s, each delay cut by a random 0-25 %.
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
# A server's Retry-After up to this many seconds is waited exactly; a longer one (a spent daily
# quota, typically) is not worth blocking the run on, so the call fails with that reason.
MAX_RETRY_AFTER = 60.0

# asyncio.timeout (Python 3.11+); before it, asyncio.wait_for.
_TIMEOUT = getattr(asyncio, "timeout", None)
log = logging.getLogger("rag_judge.llm.engine")  # the engine's log, as before the split
Result = Completion | LLMError


class CallRunner:
    """Calls ``client`` one request at a time under the limits ``JudgeEngine`` sets up; see
    there for the meaning of each attribute. Not used on its own."""

    client: LLMClient
    cache: SqliteCache | None
    concurrency: int
    rpm: float | None
    tpm: float | None
    max_attempts: int
    timeout: float | None
    price: Price | None
    batch_priced: bool
    usage: Usage
    _clock: Clock
    _sleep: Sleeper
    _rng: random.Random
    _loop: asyncio.AbstractEventLoop | None
    _semaphore: asyncio.Semaphore | None
    _limiter: RateLimiter | None

    def _loop_state(self) -> tuple[asyncio.Semaphore, RateLimiter]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._semaphore is None or self._limiter is None:
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._limiter = RateLimiter(
                rpm=self.rpm, tpm=self.tpm, clock=self._clock, sleep=self._sleep
            )
        return self._semaphore, self._limiter

    async def _attempt(self, request: CompletionRequest) -> Result:
        """One call to the client, every failure turned into an LLMError."""
        try:
            if self.timeout is None:
                return await self.client.complete(request)
            if _TIMEOUT is not None:  # the call stays in this task: no task of its own per call
                async with _TIMEOUT(self.timeout):
                    return await self.client.complete(request)
            return await asyncio.wait_for(self.client.complete(request), self.timeout)
        except LLMError as exc:
            return exc
        except asyncio.TimeoutError:
            return LLMError(f"no reply within {self.timeout:g} s", retryable=True)
        except Exception as exc:  # a bug in a client: report it, do not retry it
            return LLMError(f"{type(exc).__name__}: {exc}", retryable=False)

    async def call(self, request: CompletionRequest, bar: progress.Task, usage: Usage) -> Result:
        """One call with this engine's limits, retries and timeout, counted in ``usage`` and
        never cached: what a worker process of the pool runs for each request it is sent."""
        return await self._call("", request, bar, usage)

    async def _pooled(
        self, pool: ProcessPool, key: str, request: CompletionRequest, bar: progress.Task
    ) -> Result:
        """One call made by a worker process: its usage added here, its completion cached."""
        result, counted = await pool.call(request)
        for name in COUNTERS:
            setattr(self.usage, name, getattr(self.usage, name) + counted.get(name, 0))
        if self.price is not None:
            self.usage.cost = cost(self.usage, self.price, batch=self.batch_priced)
        if counted.get("retries"):
            bar.update(retried=counted["retries"])
        if isinstance(result, Completion) and self.cache is not None:
            await self._store(key, result)
        return result

    async def _store(self, key: str, result: Completion) -> None:
        # With a cache, a run's key is the cache key (``JudgeEngine._run_key``).
        assert self.cache is not None
        try:
            await self.cache.store(key, result)
        except Exception as exc:  # a full disk costs a rerun, not this run
            log.warning("could not cache a completion: %s", exc)

    async def _call(
        self, key: str, request: CompletionRequest, bar: progress.Task, usage: Usage | None = None
    ) -> Result:
        semaphore, limiter = self._loop_state()
        estimate = request_tokens(request)
        usage = self.usage if usage is None else usage
        usage.requests += 1
        attempt = 0
        while True:
            attempt += 1
            async with semaphore:
                await limiter.acquire(estimate)
                with counted_requests() as sent:
                    result = await self._attempt(request)
            if sent[0] > 1:  # a client's resend in another form: one more request, as a retry
                self._resent(sent[0] - 1, limiter, bar, usage)
            if isinstance(result, Completion):
                result.attempts = attempt
                result.cached = False
                limiter.settle(estimate, result.prompt_tokens + result.completion_tokens)
                self._account(result, usage)
                if self.cache is not None:
                    await self._store(key, result)
                return result
            if not result.connected:  # no server saw it: not a request it received
                usage.connect_errors += 1
            delay = self._retry_delay(attempt, result)
            if delay is None:
                usage.failures += 1
                return _final(result, attempt, capped=attempt >= self.max_attempts)
            usage.retries += 1
            bar.update(retried=1)
            await self._sleep(delay)

    def _retry_delay(self, attempt: int, error: LLMError) -> float | None:
        """Seconds to wait before another attempt, or None to give up now."""
        if not error.retryable or attempt >= self.max_attempts:
            return None
        if error.retry_after is not None and error.retry_after > 0:
            return error.retry_after if error.retry_after <= MAX_RETRY_AFTER else None
        base = min(INITIAL_RETRY_DELAY * 2.0 ** (attempt - 1), MAX_RETRY_DELAY)
        return base * (1.0 - 0.25 * self._rng.random())

    def _resent(self, extra: int, limiter: RateLimiter, bar: progress.Task, usage: Usage) -> None:
        usage.retries += extra
        bar.update(retried=extra)
        if limiter.requests is not None:  # the server saw them: the next calls wait for them
            limiter.requests.adjust(extra)

    def _account(self, completion: Completion, usage: Usage | None = None) -> None:
        usage = self.usage if usage is None else usage
        usage.prompt_tokens += completion.prompt_tokens
        usage.completion_tokens += completion.completion_tokens
        usage.cached_prompt_tokens += completion.cached_prompt_tokens
        if self.price is not None and usage is self.usage:
            self.usage.cost = cost(self.usage, self.price, batch=self.batch_priced)


def _final(error: LLMError, attempts: int, *, capped: bool) -> LLMError:
    """The error a caller gets: the last one, with ``attempts`` set. Its message says how many
    attempts were made and why not more. It is built fresh, outside any ``except``, so it drags
    no SDK exception (or request with credentials) along as its context."""
    if attempts == 1 and not error.retryable:
        error.attempts = 1
        return error
    if not error.retryable:
        why = f"not retryable, attempt {attempts}"
    elif capped:
        why = f"gave up after {attempts} attempts"
    else:
        why = f"server asked to wait {error.retry_after:g} s (> {MAX_RETRY_AFTER:g} s)"
    return LLMError(
        f"{error} ({why})",
        retryable=error.retryable,
        retry_after=error.retry_after,
        status=error.status,
        attempts=attempts,
        connected=error.connected,
    )
