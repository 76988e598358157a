"""Files that ship with rag-judge (configs/, prompts/), found in a wheel or a source checkout,
and the one folder rag-judge caches things in, with the one way its SQLite files are set up
(the judge's replies, the embeddings) while other processes may be creating them too."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "BUSY_TIMEOUT",
    "CACHE_ENV",
    "cache_dir",
    "resolve_config",
    "resource_dir",
    "use_wal",
    "when_unlocked",
]

T = TypeVar("T")

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


# Seconds a cache file's statement waits for another process's lock on it, creation included.
BUSY_TIMEOUT = 30.0
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (named in the sqlite3 module from 3.11)
_pause = time.sleep  # between tries on a locked file (a test waits on it instead)


def when_unlocked(path: Path, step: Callable[[], T]) -> T:
    """``step()``, tried again while another connection holds the file at ``path`` locked, for
    up to ``BUSY_TIMEOUT`` seconds. SQLite's busy timeout does not cover every statement:
    switching a new file to WAL fails at once with "database is locked" while another process
    holds a lock on it (two runs creating the default cache together), so that wait is done
    here. ``step`` must be safe to start over (idempotent statements)."""
    import sqlite3

    deadline = time.monotonic() + BUSY_TIMEOUT
    delay = 0.005
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError(
                    f"cache file {path}: {exc} (still locked by another process after "
                    f"{BUSY_TIMEOUT:g} s)"
                ) from None
        _pause(delay)  # outside the except block: no chained error on the next failure
        delay = min(delay * 2, 0.25)


def _locked(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int):
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(exc) or "busy" in str(exc)


def use_wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode (readers and one writer at once, across processes), asking
    first: switching takes a lock even when the mode is already WAL. Call it inside
    :func:`when_unlocked`."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL")
