"""The judge-model providers by name, and ``ClientConfig``, the config that names one.

Each entry of ``PROVIDERS`` is a small loader that imports its provider module only when
called, so ``import rag_judge`` never imports openai, torch or transformers. ``ClientConfig``
lives here, beside the registry it is validated against (and re-exported as
``rag_judge.llm.ClientConfig``).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from rag_judge.errors import ConfigError

if TYPE_CHECKING:
    from rag_judge.llm.base import LLMClient

__all__ = [
    "CHECKS",
    "PROVIDERS",
    "ClientConfig",
    "check_capabilities",
    "check_client",
    "make_client",
    "no_calls",
    "provider_names",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ClientConfig(BaseModel):
    """Which judge model to call and how hard. The API key itself is never part of it: only the
    name of the environment variable holding it (``api_key_env``).

    ``provider`` names a loader in ``PROVIDERS`` (``openai``, ``local``, ``stub``, or one
    registered there before the config is read). ``model``: for ``openai`` the model name
    (required); for ``local`` a folder, ``.gguf`` file or cached HF id (default: the packaged
    SmolLM2-135M, for demos only); for ``stub`` an optional name. ``timeout`` is seconds per
    call; ``rpm``/``tpm`` are per-minute limits (None: off); prices are per 1,000 tokens, and
    without them a price table prices the model (``price_table``, see docs/prices.md).
    ``stub``/``stub_score`` pick the stub's responder; ``cache_dir`` is where the local client
    keeps converted models. ``batch`` (openai only) sends uncached requests through the OpenAI
    Batch API at its batch price (docs/batch.md). ``processes`` (openai only; default 1, off)
    spreads the calls over that many worker processes, limits divided among them
    (docs/judge-engine.md); it changes no verdict, so no signature names it.
    """

    # Inputs stay out of error text: a key pasted into the wrong field must not be echoed.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    provider: str = "stub"
    model: str | None = Field(default=None, validate_default=True)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = Field(default=60.0, gt=0)
    concurrency: int = Field(default=8, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    prompt_price_per_1k: float | None = Field(default=None, ge=0)
    completion_price_per_1k: float | None = Field(default=None, ge=0)
    # a price table file (llm/prices.py); None: the default; left out of a dump when unset
    price_table: str | None = Field(default=None, exclude_if=lambda v: v is None)
    structured_output: bool = True
    stub: Literal["lexical_support", "fixed"] = "lexical_support"
    stub_score: int = Field(default=3, ge=1, le=5)
    cache_dir: str | None = None
    batch: bool = Field(default=False, exclude_if=lambda v: not v)  # left out when off
    # worker processes for the calls (llm/pool.py); left out when 1, so reports read as before
    processes: int = Field(default=1, exclude_if=lambda v: v == 1)

    @field_validator("provider")
    @classmethod
    def _registered(cls, value: str) -> str:
        # Read at validation time, so a provider registered after import can be named.
        if value not in PROVIDERS:
            raise ValueError(_unknown(value))
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "api_key_env is the NAME of the environment variable holding the key "
                "(like OPENAI_API_KEY), not the key itself"
            )
        return value

    @field_validator("model")
    @classmethod
    def _model_needed(cls, value: str | None, info: ValidationInfo) -> str | None:
        # A field check (not a model one), so the error names the key: ``client.model``.
        if info.data.get("provider") == "openai" and not value:
            raise ValueError("provider 'openai' needs a model name, e.g. gpt-4o-mini")
        return value

    @field_validator("batch")
    @classmethod
    def _batch_openai(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("provider") != "openai":
            raise ValueError("batch: true needs provider 'openai' (the OpenAI Batch API)")
        return value

    @field_validator("processes", mode="before")
    @classmethod
    def _processes(cls, value: object, info: ValidationInfo) -> object:
        # The value is named here: hide_input_in_errors would leave it out of pydantic's own.
        concurrency = info.data.get("concurrency", 8)
        legal = f"an integer from 1 (calls made in this process) to concurrency={concurrency}"
        if type(value) is not int or not 1 <= value <= concurrency:
            # Only a number is echoed: a key pasted here must not reach the message.
            given = repr(value) if type(value) is int else f"<{type(value).__name__}>"
            raise ValueError(f"processes={given} is not valid: expected {legal}")
        if value > 1 and info.data.get("provider") != "openai":
            raise ValueError(f"processes={value} needs provider 'openai' (it spreads HTTP calls)")
        if value > 1 and info.data.get("batch"):
            raise ValueError(f"processes={value} cannot go with batch: true (one upload)")
        return value


def _openai(config: ClientConfig) -> LLMClient:
    from rag_judge.llm.providers.openai import OpenAIClient

    return OpenAIClient(
        config.model or "",
        base_url=config.base_url,
        api_key_env=config.api_key_env,
        timeout=config.timeout,
        structured_output=config.structured_output,
        batch=config.batch,
    )


def _check_openai(config: ClientConfig) -> None:
    from rag_judge.llm.providers.openai import key_problem

    problem = key_problem(config.api_key_env, config.base_url)
    if problem:
        raise ConfigError(problem, loc=("api_key_env",))


def _local(config: ClientConfig) -> LLMClient:
    from rag_judge.llm.providers.local import LocalClient

    return LocalClient(config.model, cache_dir=config.cache_dir)


def _stub(config: ClientConfig) -> LLMClient:
    from rag_judge.llm.providers.stub import StubClient, fixed, lexical_support

    responder = fixed(config.stub_score) if config.stub == "fixed" else lexical_support()
    return StubClient(responder, model=config.model)


PROVIDERS: dict[str, Callable[[ClientConfig], LLMClient]] = {
    "openai": _openai,
    "local": _local,
    "stub": _stub,
}
"""Provider name -> loader building that provider's ``LLMClient`` from a ``ClientConfig``.

A loader is called by ``make_client`` each time a client is needed, and should import its
provider's module (and any heavy dependency) inside the function. The client it returns
satisfies ``rag_judge.llm.base.LLMClient``: ``provider``, ``model``, ``base_url``, the
capabilities ``scores_labels``, ``supports_logprobs`` and ``cancellable``, and
``async complete(request) -> Completion``; an ``async aclose()`` is called when an engine over
it closes. ``ClientConfig.provider`` is checked against these keys when a config is validated,
so register a provider before reading a config that names it. Adding one::

    # my_package/judges.py
    from rag_judge.llm import ClientConfig, Completion, CompletionRequest
    from rag_judge.llm.providers import PROVIDERS

    class EchoClient:
        provider = "echo"
        base_url: str | None = None
        scores_labels = False  # generates text (True: fills ``Completion.score_probs``)
        supports_logprobs = False
        cancellable = True  # a call may be abandoned, so the engine may time it out

        def __init__(self, model: str) -> None:
            self.model = model

        async def complete(self, request: CompletionRequest) -> Completion:
            # A failure: raise LLMError(reason, retryable=...); the engine retries.
            return Completion(choices=['{"reason": "echo", "score": 3}'])

    def load_echo(config: ClientConfig) -> EchoClient:
        # Import heavy dependencies here, not at the top of the module.
        return EchoClient(config.model or "echo-1")

    PROVIDERS["echo"] = load_echo

then ``client: {provider: echo, model: echo-2}`` in an experiment's YAML (after
``import my_package.judges``), or ``make_client(ClientConfig(provider="echo"))``.
"""


CHECKS: dict[str, Callable[[ClientConfig], None]] = {"openai": _check_openai}
"""Provider name -> a cheap check of a ``ClientConfig`` for what must hold before any call
(an API key in the environment): no network, no heavy import, no client built. It raises a
``ConfigError`` whose ``loc`` names the ``ClientConfig`` key at fault. Optional per provider."""


_UNCHECKED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "rag_judge_no_calls", default=None
)


@contextmanager
def no_calls() -> Iterator[list[str]]:
    """A block in which no model will be called (a dry run: it spends nothing). ``check_client``
    then lets a ``CHECKS`` problem (a missing API key) pass and adds its message to the list
    this yields, for the caller to mention; an unregistered provider is still an error."""
    outer = _UNCHECKED.get()
    if outer is not None:  # nested (a dry run inside the CLI's): the outer block hears of it
        yield outer
        return
    unchecked: list[str] = []
    token = _UNCHECKED.set(unchecked)
    try:
        yield unchecked
    finally:
        _UNCHECKED.reset(token)


def check_client(config: ClientConfig) -> None:
    """Raise a ``ConfigError`` (its ``loc`` the key at fault, e.g. ``("api_key_env",)``) for a
    problem with ``config`` known before any call, such as a missing API key; the value of a key
    is never part of the message. Builds no client and calls nothing. Inside ``no_calls()`` the
    problem is noted there instead of raised."""
    if config.provider not in PROVIDERS:
        raise ConfigError(_unknown(config.provider), loc=("provider",))
    check = CHECKS.get(config.provider)
    if check is None:
        return
    unchecked = _UNCHECKED.get()
    try:
        check(config)
    except ConfigError as exc:
        if unchecked is None:
            raise
        if str(exc) not in unchecked:
            unchecked.append(str(exc))


def provider_names() -> str:
    """The registered provider names, quoted, for error messages: ``'local', 'openai', 'stub'``."""
    return ", ".join(repr(name) for name in sorted(PROVIDERS))


def _unknown(name: str) -> str:
    return f"provider {name!r} is not registered: expected one of {provider_names()}"


_CAPABILITIES = ("scores_labels", "supports_logprobs", "cancellable")


def make_client(config: ClientConfig) -> LLMClient:
    """The client ``config`` describes, from its provider's loader in ``PROVIDERS`` (looked up
    now, so a provider registered after import counts). No network call or model load happens
    here for the built-in providers."""
    loader = PROVIDERS.get(config.provider)
    if loader is None:
        raise ConfigError(_unknown(config.provider))
    return check_capabilities(loader(config))


def check_capabilities(client: LLMClient) -> LLMClient:
    """``client``, if it declares the capabilities ``LLMClient`` requires (which the judge and
    the engine read instead of checking provider names); else a ``ConfigError`` naming them."""
    missing = [name for name in _CAPABILITIES if not hasattr(client, name)]
    if missing:
        raise ConfigError(
            f"{type(client).__name__} is not a complete LLMClient: it lacks the capability "
            f"attribute(s) {', '.join(missing)} (booleans; see rag_judge.llm.base.LLMClient)"
        )
    return client
