"""What every evaluator that calls a judge does the same way: check its client config before
any call, resolve its cache file, and read a cache path in a config relative to the config."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rag_judge.errors import ConfigError, format_loc
from rag_judge.llm import ClientConfig
from rag_judge.llm.cache import CacheOption, SqliteCache, cache_file
from rag_judge.llm.providers import check_client

__all__ = ["CacheOption", "cache_file", "check_judge_client", "local_cache", "open_cache"]


def check_judge_client(config: ClientConfig) -> None:
    """What must hold before any call (an API key in the environment; nothing is called); a
    problem is a ConfigError whose ``loc`` names the option (``client.api_key_env``)."""
    try:
        check_client(config)
    except ConfigError as exc:
        loc = ("client", *exc.loc)
        raise ConfigError(f"{format_loc(loc)}: {exc}", loc=loc) from None


def local_cache(raw: dict[str, Any], base: Path) -> None:
    """Make a relative ``cache`` path in a raw config mapping relative to the config's folder
    ``base``, in place (``default``, ``~/...`` and absolute paths are left as they are)."""
    cache = raw.get("cache")
    if isinstance(cache, str) and cache != "default" and not cache.startswith("~"):
        raw["cache"] = cache if Path(cache).is_absolute() else str(base / cache)


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
