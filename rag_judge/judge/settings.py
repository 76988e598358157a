"""A judge: the settings every LLM-judged family shares (client, cache, sampling, re-asks, the
reply budget) and the session a run opens on it.

Rubric scoring, grounding and pairwise judging each hold one ``Judge`` (a jury holds several);
their configs keep the flat keys (``client:``, ``temperature:`` ...) through
:func:`judge_keys`, so YAML files read as before. ``Judge.open()`` gives the run's
:class:`JudgeSession`: the client actually used, its name for signatures, the engine factory
and the dry-run estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_judge.errors import ConfigError, format_loc
from rag_judge.llm import ClientConfig, JudgeEngine, make_client, make_engine
from rag_judge.llm.base import ChatMessage, CompletionRequest, LLMClient
from rag_judge.llm.cache import CacheOption, SqliteCache, cache_file
from rag_judge.llm.providers import check_capabilities, check_client
from rag_judge.messages import moved_error
from rag_judge.report.model import JudgeName

__all__ = [
    "JUDGE_KEYS",
    "Judge",
    "JudgeSession",
    "check_config",
    "divided",
    "flat_judge",
    "judge_keys",
    "local_cache",
    "open_cache",
]

# The keys of a judge that a family's config takes at its own top level.
JUDGE_KEYS = ("client", "cache", "temperature", "seed", "reask", "max_tokens")


class Judge(BaseModel):
    """One judge's settings. ``cache``: SQLite file of completions; ``"default"`` is
    ``judge.sqlite`` in rag-judge's cache folder (resolved when the judge runs); None: off.
    ``seed`` seeds the requests (None: unseeded); ``reask``: re-asks of an unreadable reply."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    client: ClientConfig = Field(default_factory=ClientConfig)
    cache: CacheOption = "default"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    reask: int = Field(default=1, ge=0, le=3)
    max_tokens: int = Field(default=512, ge=1)

    def check(self, loc: tuple[int | str, ...] = ("client",)) -> None:
        """What must hold before any call (an API key in the environment; nothing is called);
        a problem is a ConfigError whose ``loc`` names the option under ``loc``."""
        check_config(self.client, loc)

    def cache_path(self) -> Path | None:
        """The cache file, the default one resolved now (not at import)."""
        return cache_file(self.cache)

    def request(
        self, messages: tuple[ChatMessage, ...], schema: Mapping[str, Any] | None, **extra: Any
    ) -> CompletionRequest:
        """A request with the judge's sampling and reply budget (``extra`` overrides)."""
        settings: dict[str, Any] = {
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "json_schema": schema,
        }
        return CompletionRequest(messages=messages, **{**settings, **extra})

    def sampling(self) -> dict[str, str]:
        """The signature options of the judge's sampling: its temperature and its seed (not
        ``seed``: the rendered signature ends with the bootstrap's ``seed:S``)."""
        return {"temp": f"{self.temperature:g}", "judge_seed": str(self.seed)}

    def divided(self, shards: int, k: int) -> Judge:
        """Shard ``k``'s judge (``executor: ray``): the client's limits shared among shards."""
        return self.model_copy(update={"client": divided(self.client, shards, k)})

    def open(self, client: LLMClient | None = None) -> JudgeSession:
        """The session of one run: ``client`` (checked for its capabilities) or the
        configured one."""
        return JudgeSession(self, client if client is not None else make_client(self.client))


class JudgeSession:
    """One run's judge: the settings, the client used (checked for the capabilities the judge
    reads) and its name, one engine per ask loop."""

    def __init__(self, judge: Judge, client: LLMClient) -> None:
        self.judge = judge
        self.name = JudgeName(
            provider=client.provider,
            model=client.model,
            stub=bool(getattr(client, "is_stub", False)),  # a stub client says it is one
        )
        self.client = check_capabilities(client)

    def engine(self, cache: SqliteCache | Path | None = None) -> JudgeEngine:
        """An engine with the client's limits over the session's client; ``cache`` (an open
        cache shared by a jury) else the judge's cache file."""
        opened = cache if cache is not None else self.judge.cache_path()
        return make_engine(self.judge.client, cache=opened, client=self.client)

    def estimate(self, requests: list[CompletionRequest]) -> dict[str, Any]:
        """What ``requests`` would cost, spending nothing: requests not cached, cache hits,
        token estimates, cost. Reads the cache only where it exists (creates no file)."""
        with (
            open_cache(self.judge.cache_path(), dry=True) as cache,
            make_engine(self.judge.client, cache=cache, client=self.client) as engine,
        ):
            return engine.dry_run(requests)


def check_config(config: ClientConfig, loc: tuple[int | str, ...]) -> None:
    """``config`` as :meth:`Judge.check` checks it, the error's ``loc`` under ``loc``."""
    try:
        check_client(config)
    except ConfigError as exc:
        where = (*loc, *exc.loc)
        raise ConfigError(f"{format_loc(where)}: {exc}", loc=where) from None


def divided(client: ClientConfig, shards: int, k: int) -> ClientConfig:
    """Shard ``k``'s share of ``client``'s limits: ``rpm`` and ``tpm`` divided evenly, and the
    ``concurrency`` split into whole calls that add up to it (8 over 3 shards: 3, 3, 2); each
    shard keeps at least one call in flight, so with more shards than ``concurrency`` the
    shards together have one call each in flight."""
    limits: dict[str, Any] = {
        key: getattr(client, key) / shards for key in ("rpm", "tpm") if getattr(client, key)
    }
    whole, extra = divmod(client.concurrency, shards)
    limits["concurrency"] = max(1, whole + (k < extra))
    return client.model_copy(update=limits)


@contextmanager
def open_cache(path: Path | None, *, dry: bool = False) -> Iterator[SqliteCache | None]:
    """The cache file at ``path`` opened once (for every engine of a jury, say) and closed
    after; None: no cache. ``dry`` (a dry run, which writes nothing): only a cache that exists
    already is opened, to read, and no file or folder is created."""
    opened = SqliteCache.existing if dry else SqliteCache
    cache = opened(path) if path is not None else None
    try:
        yield cache
    finally:
        if cache is not None:
            cache.close()


def local_cache(raw: dict[str, Any], base: Path) -> None:
    """Make a relative ``cache`` path in a raw config mapping relative to the config's folder
    ``base``, in place (``default``, ``~/...`` and absolute paths are left as they are)."""
    cache = raw.get("cache")
    if isinstance(cache, str) and cache != "default" and not cache.startswith("~"):
        raw["cache"] = cache if Path(cache).is_absolute() else str(base / cache)


def judge_keys(
    data: Any,
    default: Judge,
    handler: Callable[[Any], Any],
    keys: tuple[str, ...] = JUDGE_KEYS,
) -> Any:
    """A family config's ``mode="wrap"`` validator: its flat judge keys (``client``,
    ``temperature`` ...) gathered into ``judge`` over the family's ``default`` judge, and the
    locations of errors in them given back flat (``temperature``, not ``judge.temperature``),
    as the user wrote them. ``keys``: the judge keys the family takes flat."""
    if not isinstance(data, Mapping) or "judge" in data:
        return handler(data)
    flat = {k: data[k] for k in keys if k in data}
    rest = {k: v for k, v in data.items() if k not in keys}
    if flat:
        rest["judge"] = {**_fields(default), **flat}
    try:
        return handler(rest)
    except ValidationError as exc:
        raise _flat_errors(exc) from None


def flat_judge(dumped: Any) -> Any:
    """A family config's dump with its ``judge`` spread back into flat keys (what a config
    file says; a report's config reads as before)."""
    if isinstance(dumped, dict) and isinstance(dumped.get("judge"), dict):
        judge = dumped.pop("judge")
        dumped.update(judge)
    return dumped


def _fields(judge: Judge) -> dict[str, Any]:
    return {k: getattr(judge, k) for k in JUDGE_KEYS}


def _flat_errors(exc: ValidationError) -> ValidationError:
    """``exc`` with the ``judge`` part of each location dropped (the config file has none)."""
    details = [
        moved_error(e, tuple(e["loc"][1:]) if e["loc"][:1] == ("judge",) else tuple(e["loc"]))
        for e in exc.errors(include_url=False)
    ]
    return ValidationError.from_exception_data(exc.title, details)
