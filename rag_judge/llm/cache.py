"""A SQLite completion cache, so a rerun or a resumed run repeats no call.

Keys are ``CompletionRequest.fingerprint(provider=, model=, base_url=)`` — the full request and
the endpoint, never a credential. Values are the completion as JSON. Every ``put`` commits, so a
run killed midway keeps everything finished before the kill. ``store`` is ``put`` for the event
loop: a writer thread commits the rows (in one transaction when several wait) while the loop goes
on, and the caller resumes once its row is committed. WAL mode lets other processes read the file
while a run writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from rag_judge._async import BackgroundWriter
from rag_judge.llm.base import Completion
from rag_judge.resources import BUSY_TIMEOUT, cache_dir, use_wal, when_unlocked

__all__ = ["BUSY_TIMEOUT", "CacheOption", "SqliteCache", "cache_file"]

Row = tuple[str, str, float]  # (key, completion as JSON, time stored)
# A judge's ``cache`` option: "default" (the cache every config shares), a file, or None (off).
CacheOption = Literal["default"] | Path | None

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    completion TEXT NOT NULL,
    created REAL NOT NULL
)
"""
_INSERT = "INSERT OR REPLACE INTO completions (key, completion, created) VALUES (?, ?, ?)"
_STORED_FIELDS = (
    "choices",
    "prompt_tokens",
    "completion_tokens",
    "token_logprobs",
    "score_probs",
    "finish_reason",
    "structured_output",
)


def cache_file(cache: CacheOption) -> Path | None:
    """The completion cache: ``"default"`` is ``judge.sqlite`` in rag-judge's cache folder,
    resolved now (not at import); None: no cache."""
    return cache_dir() / "judge.sqlite" if cache == "default" else cache


def _connect(target: str, *, uri: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(
        target, timeout=BUSY_TIMEOUT, check_same_thread=False, isolation_level=None, uri=uri
    )


def _set_up(conn: sqlite3.Connection) -> None:
    # Each statement is idempotent, so a retry after a lock starts over safely.
    use_wal(conn)
    # NORMAL in WAL mode: a commit survives a killed process (not a power cut), and is cheap.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
    conn.execute(_SCHEMA)


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _settle(written: asyncio.Future[None], done: asyncio.Future[None]) -> None:
    """``done`` as the writer's future ended (neither is ever cancelled: only the cache holds
    them)."""
    error = written.exception()
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _encode(completion: Completion) -> str:
    # Read the fields directly: dataclasses.asdict deep-copies every nested value first.
    stored = {k: getattr(completion, k) for k in (*_STORED_FIELDS, "extra")}
    return json.dumps(stored, ensure_ascii=False, sort_keys=True)


def _decode(blob: str) -> Completion:
    # Rows written before finish_reason and structured_output were stored decode them as None
    # (unknown), except a finish_reason the openai client then kept in ``extra``.
    data: dict[str, Any] = json.loads(blob)
    extra = dict(data.get("extra") or {})
    finish = data["finish_reason"] if "finish_reason" in data else extra.get("finish_reason")
    return Completion(
        choices=list(data["choices"]),
        prompt_tokens=int(data.get("prompt_tokens", 0)),
        completion_tokens=int(data.get("completion_tokens", 0)),
        token_logprobs=data.get("token_logprobs"),
        score_probs=data.get("score_probs"),
        cached=True,
        attempts=0,
        extra=extra,
        finish_reason=None if finish is None else str(finish),
        structured_output=data.get("structured_output"),
    )


class SqliteCache:
    """Completions by request fingerprint in one SQLite file (created with its folders).

    Thread-safe within a process (one connection behind a lock, usable from the worker thread
    ``JudgeEngine.run_sync`` may use); several processes may share the file, and several may
    create it at once (setting it up waits for the others' locks, up to ``BUSY_TIMEOUT``).
    ``read_only`` (see ``existing``) opens a file that exists and creates or sets up nothing.
    """

    @classmethod
    def existing(cls, path: str | Path) -> SqliteCache | None:
        """The cache at ``path`` opened only to read it, or None when there is no cache there
        yet: for a dry run, which must leave no file behind. No folder, file or table is
        created; SQLite's ``-wal``/``-shm`` side files go again when the reader closes (unless
        another process still has the file open), so nothing stays written."""
        path = Path(path).expanduser()
        if not path.is_file():
            return None
        cache = cls(path, read_only=True)
        try:
            found = when_unlocked(
                path,
                lambda: cache._conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'completions'"
                ).fetchone(),
            )
        except BaseException:
            cache.close()
            raise
        if found is None:  # a file no run has set up (created by hand, or empty)
            cache.close()
            return None
        return cache

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._lock = threading.Lock()
        if read_only:
            self._conn = _connect(self.path.resolve().as_uri() + "?mode=rw", uri=True)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = _connect(str(self.path))
            try:
                when_unlocked(self.path, lambda: _set_up(self._conn))
            except BaseException:
                self._conn.close()
                raise
        self._writer: BackgroundWriter[Row] = BackgroundWriter(self._commit, name="rag-judge-cache")
        # Per event loop, the rows stored during its current turn and the future they share.
        self._turns: dict[asyncio.AbstractEventLoop, tuple[list[Row], asyncio.Future[None]]] = {}

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT completion FROM completions WHERE key = ?", (key,)
            ).fetchone()
        return _decode(row[0]) if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        """The cached completions among ``keys`` (missing keys are simply absent)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Completion] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):  # stay under SQLite's parameter limit
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, completion FROM completions WHERE key IN ({marks})", chunk
                ).fetchall()
                found.update((k, _decode(v)) for k, v in rows)
        return found

    def put(self, key: str, completion: Completion) -> None:
        """Store one completion and commit at once (this is what makes a run resumable)."""
        self._check_writable()
        blob = _encode(completion)
        with self._lock:
            self._conn.execute(_INSERT, (key, blob, time.time()))

    async def store(self, key: str, completion: Completion) -> None:
        """``put`` without blocking the event loop: returns once the row is committed.

        The commit (about a twentieth of a millisecond, much more when SQLite checkpoints its
        WAL) happens on a writer thread, with the GIL released, instead of on the loop's
        thread between two calls; rows that queue up meanwhile share one transaction."""
        self._check_writable()
        row = (key, _encode(completion), time.time())
        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            # The rows of one loop turn go to the writer together, under one future: a handoff
            # between threads per row cost the loop more than the row itself.
            turn = self._turns[loop] = ([], loop.create_future())
            turn[1].add_done_callback(_retrieved)  # a cancelled caller leaves no unread error
            loop.call_soon(self._hand_over, loop)
        turn[0].append(row)
        await asyncio.shield(turn[1])  # one cancelled caller must not cancel the write

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        turn = self._turns.pop(loop, None)
        if turn is None:  # close() handed it over already
            return
        rows, done = turn
        try:
            written = self._writer.submit(rows)
        except Exception as exc:  # a closed cache: each waiting store raises it
            if not loop.is_closed():
                done.set_exception(exc)
            return
        if loop.is_closed():  # a loop stopped by hand: the rows are written, none waits
            return
        asyncio.wrap_future(written, loop=loop).add_done_callback(lambda w: _settle(w, done))

    def _check_writable(self) -> None:
        if self.read_only:
            raise RuntimeError(f"{self!r} was opened read-only (SqliteCache.existing)")

    def _commit(self, rows: list[Row]) -> None:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(_INSERT, rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM completions WHERE key = ?", (key,)).fetchone()
        return row is not None

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()
        return int(count)

    def close(self) -> None:
        """Commit what ``store`` has queued, stop the writer thread, close the file."""
        for loop in list(self._turns):  # rows of a loop turn not yet handed over go first
            self._hand_over(loop)
        try:
            # A failed write already reached the ``store`` calls that made it.
            with contextlib.suppress(Exception):
                self._writer.close()
        finally:
            with self._lock:
                self._conn.close()

    def __enter__(self) -> SqliteCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteCache({str(self.path)!r})"
