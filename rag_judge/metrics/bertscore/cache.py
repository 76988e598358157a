"""The disk cache of token embeddings: SQLite (WAL) rows of token ids and float32 vectors,
keyed by model fingerprint, layer, dtype and text, written from a background thread, in
rag-judge's one cache folder (:func:`rag_judge.resources.cache_dir`) unless told another."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge._async import BackgroundWriter
from rag_judge.resources import cache_dir

__all__ = ["EmbeddingCache", "TokenEmbeddings"]

_NO_VECTORS = np.zeros((0, 0), dtype=np.float32)


@dataclass(frozen=True)
class TokenEmbeddings:
    """One text: its token ids (specials included) and their L2-normalised float32 vectors."""

    ids: NDArray[np.int64]
    vectors: NDArray[np.float32]


class EmbeddingCache:
    """SQLite store of token embeddings, shared safely between processes (WAL, busy timeout).

    Writes go through a background thread (its own connection; sqlite3 releases the GIL), so
    storing one batch overlaps with encoding the next. ``close`` waits for it.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        folder = cache_dir() if directory is None else Path(directory).expanduser()
        self.path = folder / "embeddings.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = self._connect()
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, n INTEGER NOT NULL,"
            " dim INTEGER NOT NULL, ids BLOB NOT NULL, vectors BLOB NOT NULL);"
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        )
        # The writer thread's own connection, opened on its first write.
        self._writer_db: sqlite3.Connection | None = None
        self._writer: BackgroundWriter[tuple[str, TokenEmbeddings]] = BackgroundWriter(
            self._write, name="rag-judge-embeddings", finish=self._close_writer_db
        )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        db.execute("PRAGMA page_size=16384")  # ~35 KB rows: fewer overflow pages (new files)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA mmap_size=1073741824")  # reads straight from the page cache
        return db

    def get_many(self, keys: Sequence[str], vectors: bool = True) -> dict[str, TokenEmbeddings]:
        """Stored entries among ``keys``; with ``vectors=False`` only the token ids are read."""
        found: dict[str, TokenEmbeddings] = {}
        cols = "key, n, dim, ids, " + ("vectors" if vectors else "NULL")
        for start in range(0, len(keys), 500):  # stay under SQLite's bound-variable limit
            chunk = keys[start : start + 500]
            sql = f"SELECT {cols} FROM embeddings WHERE key IN ({','.join('?' * len(chunk))})"
            for key, n, dim, ids, vecs in self._db.execute(sql, chunk):
                arr = np.frombuffer(vecs, np.float32).reshape(n, dim) if vecs else _NO_VECTORS
                found[key] = TokenEmbeddings(np.frombuffer(ids, np.int32).astype(np.int64), arr)
        return found

    def put_later(self, items: list[tuple[str, TokenEmbeddings]]) -> None:
        """Queue entries for the writer thread; ``flush`` or ``close`` waits for them."""
        self._writer.submit(items)

    def _write(self, items: list[tuple[str, TokenEmbeddings]]) -> None:
        if self._writer_db is None:
            self._writer_db = self._connect()
        rows = [
            (k, len(e.ids), e.vectors.shape[1], e.ids.astype(np.int32).tobytes(),
             np.ascontiguousarray(e.vectors, dtype=np.float32).tobytes())
            for k, e in items
        ]  # fmt: skip
        with self._writer_db:
            self._writer_db.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?,?)", rows
            )

    def _close_writer_db(self) -> None:
        if self._writer_db is not None:
            self._writer_db.close()
            self._writer_db = None

    def flush(self) -> None:
        """Wait until every queued embedding is stored; re-raise a failed write."""
        self._writer.flush()

    def get_meta(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put_meta(self, key: str, value: Any) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self._db.close()
