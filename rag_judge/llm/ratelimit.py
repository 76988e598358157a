"""Token buckets for requests- and tokens-per-minute limits, on an injectable clock.

Nothing here blocks: waiting is ``await sleep(seconds)`` with a sleeper the caller supplies, so
tests drive the limiter with a fake clock and never really sleep.
"""

from __future__ import annotations

import asyncio
import importlib
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rag_judge.llm.base import ChatMessage, CompletionRequest

__all__ = [
    "Clock",
    "RateLimiter",
    "Sleeper",
    "TokenBucket",
    "count_prompt_tokens",
    "estimate_tokens",
]

Clock = Callable[[], float]
Sleeper = Callable[[float], Awaitable[None]]


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """Prompt tokens before the call: characters / 4 plus a few per message for the chat framing."""
    return sum(math.ceil(len(m.content) / 4) + 4 for m in messages) + 3


def request_tokens(request: CompletionRequest) -> int:
    """What a call may cost against a tokens-per-minute limit: the prompt estimate."""
    return estimate_tokens(request.messages)


class TokenBucket:
    """``rate`` units per second refilling up to ``capacity``; ``acquire`` waits for enough.

    A request larger than the whole capacity is let through once the bucket is full, leaving it
    in debt, so an oversized prompt is slowed down rather than stuck forever. Waiters are served
    first come, first served (one lock), which keeps the achieved rate smooth.
    """

    def __init__(
        self,
        rate: float,
        capacity: float,
        *,
        clock: Clock,
        sleep: Sleeper,
        initial: float | None = None,
    ) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError(f"rate and capacity must be > 0, got {rate} and {capacity}")
        self.rate = rate
        self.capacity = capacity
        self._clock = clock
        self._sleep = sleep
        self._tokens = capacity if initial is None else min(initial, capacity)
        self._stamp = clock()
        self._lock: asyncio.Lock | None = None

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float = 1.0) -> None:
        if self._lock is None:  # created lazily so the bucket binds to the running loop
            self._lock = asyncio.Lock()
        need = min(amount, self.capacity)
        async with self._lock:
            self._refill()
            while self._tokens < need:
                await self._sleep((need - self._tokens) / self.rate)
                self._refill()
            self._tokens -= amount

    def adjust(self, delta: float) -> None:
        """Charge ``delta`` more (or refund, when negative) once the true cost is known."""
        self._refill()
        self._tokens = min(self.capacity, self._tokens - delta)


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits together; either may be None (off).

    The request bucket holds 1.25 requests, so calls are paced evenly at ``rpm / 60`` per
    second instead of bursting: a burst, even one inside the per-minute budget, is what trips
    providers that enforce the limit over shorter windows. The quarter request of slack lets a
    sleeper woken late by a busy loop be made up for by the next call instead of lost (lost, it
    drags the achieved rate under the limit), and never lets two calls start together. The
    token bucket holds one second's worth of tokens (an oversized request: see ``TokenBucket``).
    """

    def __init__(
        self, *, rpm: float | None, tpm: float | None, clock: Clock, sleep: Sleeper
    ) -> None:
        self.requests = None
        if rpm is not None:
            self.requests = TokenBucket(rpm / 60.0, 1.25, clock=clock, sleep=sleep, initial=1.0)
        self.tokens = (
            TokenBucket(tpm / 60.0, tpm / 60.0, clock=clock, sleep=sleep)
            if tpm is not None
            else None
        )

    async def acquire(self, estimated_tokens: int) -> None:
        if self.tokens is not None:
            await self.tokens.acquire(estimated_tokens)
        if self.requests is not None:
            await self.requests.acquire(1.0)

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token bucket with the usage the server reported."""
        if self.tokens is not None and actual_tokens > 0:
            self.tokens.adjust(actual_tokens - estimated_tokens)


def count_prompt_tokens(messages: Sequence[ChatMessage]) -> int:
    """Prompt tokens for a dry run: tiktoken's o200k_base when installed (and its tables are
    available offline), else the characters / 4 estimate the rate limiter uses."""
    enc = _tiktoken_encoding()
    if enc is None:
        return estimate_tokens(messages)
    return sum(len(enc.encode(m.content)) + 4 for m in messages) + 3


_ENCODING: list[Any] = []


def _tiktoken_encoding() -> Any:
    if not _ENCODING:
        try:
            _ENCODING.append(importlib.import_module("tiktoken").get_encoding("o200k_base"))
        except Exception:  # not installed, or its tables cannot be fetched offline
            _ENCODING.append(None)
    return _ENCODING[0]
