"""What every evaluator that calls a judge does the same way: check its client config before
any call, resolve its cache file, and read a cache path in a config relative to the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from rag_judge.errors import ConfigError, format_loc
from rag_judge.llm import ClientConfig
from rag_judge.llm.providers import check_client
from rag_judge.resources import cache_dir

__all__ = ["CacheOption", "cache_file", "check_judge_client", "local_cache"]

CacheOption = Literal["default"] | Path | None


def check_judge_client(config: ClientConfig) -> None:
    """What must hold before any call (an API key in the environment; nothing is called); a
    problem is a ConfigError whose ``loc`` names the option (``client.api_key_env``)."""
    try:
        check_client(config)
    except ConfigError as exc:
        loc = ("client", *exc.loc)
        raise ConfigError(f"{format_loc(loc)}: {exc}", loc=loc) from None


def cache_file(cache: CacheOption) -> Path | None:
    """The completion cache: ``"default"`` is ``judge.sqlite`` in rag-judge's cache folder,
    resolved now (not at import); None: no cache."""
    return cache_dir() / "judge.sqlite" if cache == "default" else cache


def local_cache(raw: dict[str, Any], base: Path) -> None:
    """Make a relative ``cache`` path in a raw config mapping relative to the config's folder
    ``base``, in place (``default``, ``~/...`` and absolute paths are left as they are)."""
    cache = raw.get("cache")
    if isinstance(cache, str) and cache != "default" and not cache.startswith("~"):
        raw["cache"] = cache if Path(cache).is_absolute() else str(base / cache)
