"""Files that ship with rag-judge (configs/, prompts/), found in a wheel or a source checkout,
and the one folder rag-judge caches things in."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "resolve_config", "resource_dir"]

CACHE_ENV = "RAG_JUDGE_CACHE_DIR"


def resource_dir(name: str) -> Path:
    """The packaged ``configs`` or ``prompts`` folder: inside the wheel, else the checkout's."""
    packaged = Path(__file__).parent / "_resources" / name
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / name


def resolve_config(path: str | Path) -> Path:
    """A config path as given, or else the shipped one of that name (``configs/demo.yaml``).

    So ``rag-judge run configs/demo.yaml`` works from any folder after a plain pip install.
    """
    given = Path(path)
    if given.exists():
        return given
    shipped = resource_dir("configs") / (given.name if given.parent.name == "configs" else given)
    return shipped if shipped.exists() else given


def cache_dir() -> Path:
    """Where every cache lives (judge replies, embeddings, converted models):
    ``$RAG_JUDGE_CACHE_DIR``, else ``.rag_judge_cache`` in the working folder, so a rerun in
    the same place reuses it."""
    return Path(os.environ.get(CACHE_ENV) or Path.cwd() / ".rag_judge_cache").expanduser()
