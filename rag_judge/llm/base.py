"""The one protocol every judge model sits behind: ``async complete(request) -> Completion``.

A request is plain data, so it can be hashed into a cache key (never including credentials),
rendered for a dry run, and replayed against any provider.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Protocol, runtime_checkable

from rag_judge.report.model import Usage

__all__ = ["ChatMessage", "Completion", "CompletionRequest", "LLMClient", "LLMError", "Usage"]


class LLMError(Exception):
    """A call that failed for good (after retries), with a reason safe to put in a report.

    ``retryable`` tells the engine whether another attempt may succeed (429, 5xx, timeouts).
    ``retry_after`` is the server's Retry-After in seconds, when it sent one. ``connected`` is
    False when the attempt never reached a server (the connection was refused, the host not
    found, the connection not made in time). No server saw that request, and the engine counts
    it in ``Usage.connect_errors``.
    """

    retryable: bool
    retry_after: float | None
    status: int | None
    # How many attempts the engine made before it gave up. The engine sets it on every error
    # it returns; an error raised by a client is one attempt until then.
    attempts: int
    connected: bool

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
        attempts: int = 1,
        connected: bool = True,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.attempts = attempts
        self.connected = connected


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class CompletionRequest:
    """Everything that determines a completion. Two equal requests give one cache entry."""

    messages: tuple[ChatMessage, ...]
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = 512
    json_schema: dict[str, Any] | None = None  # structured output where the server supports it
    top_logprobs: int | None = None  # ask for the top-k logprobs of each output token
    n: int = 1
    # The label set a scoring client (the local model) reads a distribution over, e.g. "1".."5".
    score_labels: tuple[str, ...] | None = None

    def followed_by(self, reply: str, message: str) -> CompletionRequest:
        """This request continued: the model's ``reply``, then a new user ``message`` (a
        re-ask quoting what was wrong with the reply)."""
        turns = (ChatMessage("assistant", reply), ChatMessage("user", message))
        return replace(self, messages=(*self.messages, *turns))

    def fingerprint(self, *, provider: str, model: str, base_url: str | None) -> str:
        """SHA-256 over provider, model, endpoint and every request field; never a secret."""
        # Field by field rather than dataclasses.asdict, whose recursive deep copy was a tenth of
        # the client's CPU per call; the key covers exactly the same data.
        payload: dict[str, Any] = {"provider": provider, "model": model, "base_url": base_url}
        payload.update({f.name: getattr(self, f.name) for f in fields(self)})
        payload["messages"] = [{"role": m.role, "content": m.content} for m in self.messages]
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class Completion:
    """One model reply. ``choices`` has ``request.n`` texts; ``text`` is the first.

    ``token_logprobs`` holds, per output token of the first choice, a dict of the top
    alternatives' log-probabilities (when the provider returned them). ``score_probs`` is a
    distribution over ``request.score_labels`` for clients that score instead of generating.
    """

    choices: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_logprobs: list[dict[str, float]] | None = None
    score_probs: dict[str, float] | None = None
    cached: bool = False
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    # What the server actually did, which may differ from what was asked: why the first choice
    # stopped ("stop", "length", ...; None when the provider does not say), and whether the
    # request that produced this reply carried a response_format (False after a server refused
    # it and the request was resent without; None when none was asked for).
    finish_reason: str | None = None
    structured_output: bool | None = None
    # Of ``prompt_tokens``, those the provider served from its prompt cache (it prices them lower).
    cached_prompt_tokens: int = 0

    @property
    def text(self) -> str:
        return self.choices[0] if self.choices else ""


@runtime_checkable
class LLMClient(Protocol):
    """A judge model; ``provider``, ``model`` and ``base_url`` name it in keys and signatures."""

    provider: str
    model: str
    base_url: str | None
    # Capabilities, read by the judge and the engine instead of checking provider names.
    scores_labels: bool  # reads a distribution over ``request.score_labels`` instead of generating
    supports_logprobs: bool  # can return the top logprobs of each output token
    cancellable: bool  # a call can be abandoned mid-flight, so the engine may time it out

    async def complete(self, request: CompletionRequest) -> Completion:
        """One attempt. Raise LLMError (retryable or not) on failure; the engine retries."""
        ...
