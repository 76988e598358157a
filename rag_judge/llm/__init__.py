"""Judge models behind one async protocol, and the engine that schedules their calls.

``make_client(ClientConfig(...))`` builds the client of a provider registered in
``rag_judge.llm.providers.PROVIDERS`` (``openai``, ``local``, ``stub``, or your own);
``make_engine(config, cache=path)`` wraps it in a ``JudgeEngine`` with the configured limits.
Use the engine as a context manager (``with`` / ``async with``): leaving it closes the client's
connections and the cache it opened. Provider modules are imported only when a client of theirs
is made (or ``OpenAIClient`` / ``LocalClient`` is read from this package).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_judge._async import run_sync
from rag_judge.errors import ConfigError
from rag_judge.llm.base import (
    ChatMessage,
    Completion,
    CompletionRequest,
    LLMClient,
    LLMError,
    Usage,
)
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.prices import PRICES_ENV, Price, price_for
from rag_judge.llm.providers import PROVIDERS, ClientConfig, check_capabilities, make_client
from rag_judge.llm.providers.stub import (
    StubClient,
    fixed,
    lexical_support,
    parse_sections,
    scripted,
)
from rag_judge.llm.ratelimit import count_prompt_tokens

if TYPE_CHECKING:
    from rag_judge.llm.providers.local import LocalClient
    from rag_judge.llm.providers.openai import OpenAIClient

__all__ = [
    "PROVIDERS",
    "ChatMessage",
    "ClientConfig",
    "Completion",
    "CompletionRequest",
    "JudgeEngine",
    "LLMClient",
    "LLMError",
    "LocalClient",
    "OpenAIClient",
    "SqliteCache",
    "StubClient",
    "Usage",
    "count_prompt_tokens",
    "fixed",
    "lexical_support",
    "make_client",
    "make_engine",
    "parse_sections",
    "run_sync",
    "scripted",
]

_LAZY = {
    "LocalClient": "rag_judge.llm.providers.local",
    "OpenAIClient": "rag_judge.llm.providers.openai",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_engine(
    config: ClientConfig,
    *,
    cache: SqliteCache | str | Path | None = None,
    client: LLMClient | None = None,
) -> JudgeEngine:
    """A ``JudgeEngine`` with ``config``'s limits over ``client`` (default ``make_client``).

    ``cache`` is a ``SqliteCache`` (the caller's, to close) or the path of its file (opened by
    the engine, closed with it). Close the engine when done: ``with make_engine(...) as engine``.
    """
    client = check_capabilities(client) if client is not None else make_client(config)
    return JudgeEngine(
        client,
        cache=cache,
        concurrency=config.concurrency,
        rpm=config.rpm,
        tpm=config.tpm,
        max_attempts=config.max_attempts,
        # The client bounds each HTTP call; the engine's cap is a backstop just above it. A call
        # that cannot be abandoned (a local model in a worker thread) gets no cap.
        timeout=config.timeout + 1.0 if client.cancellable else None,
        prompt_price_per_1k=config.prompt_price_per_1k,
        completion_price_per_1k=config.completion_price_per_1k,
        price=table_price(config, client),
        processes=config.processes,
    )


def table_price(config: ClientConfig, client: LLMClient) -> Price | None:
    """``client``'s price from the price table in force, or None. The shipped table prices only
    the provider's own API (no ``base_url``, or OpenAI's): a proxy or a local server with the
    same model name may bill otherwise. A user's table (``price_table`` or
    ``$RAG_JUDGE_PRICES``) prices any client."""
    user = config.price_table or os.environ.get(PRICES_ENV)
    official = client.base_url is None or "api.openai.com" in client.base_url
    if not official and not user:
        return None
    try:
        return price_for(client.provider, client.model, table=config.price_table)
    except ConfigError as exc:
        raise ConfigError(str(exc), loc=("price_table",)) from None
