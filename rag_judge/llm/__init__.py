"""Judge models behind one async protocol, and the engine that schedules their calls.

``make_client(ClientConfig(...))`` builds an ``openai``, ``local`` or ``stub`` client;
``make_engine(config, cache=path)`` wraps it in a ``JudgeEngine`` with the configured limits.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rag_judge._async import run_sync
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMClient, LLMError
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.engine import EngineUsage, JudgeEngine, count_prompt_tokens
from rag_judge.llm.providers.local import LocalClient
from rag_judge.llm.providers.openai import OpenAIClient
from rag_judge.llm.providers.stub import (
    StubClient,
    fixed,
    lexical_support,
    parse_sections,
    scripted,
)

__all__ = [
    "ChatMessage",
    "ClientConfig",
    "Completion",
    "CompletionRequest",
    "EngineUsage",
    "JudgeEngine",
    "LLMClient",
    "LLMError",
    "LocalClient",
    "OpenAIClient",
    "SqliteCache",
    "StubClient",
    "count_prompt_tokens",
    "fixed",
    "lexical_support",
    "make_client",
    "make_engine",
    "parse_sections",
    "run_sync",
    "scripted",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ClientConfig(BaseModel):
    """Which judge model to call and how hard. The API key itself is never part of it: only the
    name of the environment variable holding it (``api_key_env``).

    ``model``: for ``openai`` the model name (required); for ``local`` a folder, ``.gguf`` file or
    cached HF id (default: the packaged SmolLM2-135M, for demos only); for ``stub`` an optional
    name. ``timeout`` is seconds per call; ``rpm``/``tpm`` are per-minute limits (None: off);
    prices are per 1,000 tokens. ``transport`` is the openai client's HTTP layer (see
    ``OpenAIClient``: the SDK over aiohttp or httpx, or ``direct`` without the SDK).
    ``stub``/``stub_score`` pick the stub's responder;
    ``cache_dir`` is where the local client keeps converted models.
    """

    # Inputs stay out of error text: a key pasted into the wrong field must not be echoed.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    provider: Literal["openai", "local", "stub"] = "stub"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = Field(default=60.0, gt=0)
    concurrency: int = Field(default=8, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    prompt_price_per_1k: float | None = Field(default=None, ge=0)
    completion_price_per_1k: float | None = Field(default=None, ge=0)
    structured_output: bool = True
    transport: Literal["auto", "aiohttp", "httpx", "direct"] = "auto"
    stub: Literal["lexical_support", "fixed"] = "lexical_support"
    stub_score: int = Field(default=3, ge=1, le=5)
    cache_dir: str | None = None

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "api_key_env is the NAME of the environment variable holding the key "
                "(like OPENAI_API_KEY), not the key itself"
            )
        return value

    @model_validator(mode="after")
    def _model_needed(self) -> ClientConfig:
        if self.provider == "openai" and not self.model:
            raise ValueError("provider 'openai' needs a model name, e.g. model: gpt-4o-mini")
        return self


def make_client(config: ClientConfig) -> LLMClient:
    """The client ``config`` describes (no network call and no model load happen here)."""
    if config.provider == "openai":
        return OpenAIClient(
            config.model or "",
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            timeout=config.timeout,
            structured_output=config.structured_output,
            transport=config.transport,
        )
    if config.provider == "local":
        return LocalClient(config.model, cache_dir=config.cache_dir)
    responder = fixed(config.stub_score) if config.stub == "fixed" else lexical_support()
    return StubClient(responder, model=config.model)


def make_engine(
    config: ClientConfig,
    *,
    cache: SqliteCache | str | Path | None = None,
    client: LLMClient | None = None,
) -> JudgeEngine:
    """A ``JudgeEngine`` with ``config``'s limits over ``client`` (default ``make_client``);
    ``cache`` is a ``SqliteCache`` or the path of its file."""
    if isinstance(cache, str | Path):
        cache = SqliteCache(cache)
    return JudgeEngine(
        client if client is not None else make_client(config),
        cache=cache,
        concurrency=config.concurrency,
        rpm=config.rpm,
        tpm=config.tpm,
        max_attempts=config.max_attempts,
        # The client bounds each HTTP call; the engine's cap is a backstop just above it. A local
        # model call runs in a thread that cannot be cancelled, so it gets no cap.
        timeout=None if config.provider == "local" else config.timeout + 1.0,
        prompt_price_per_1k=config.prompt_price_per_1k,
        completion_price_per_1k=config.completion_price_per_1k,
    )
