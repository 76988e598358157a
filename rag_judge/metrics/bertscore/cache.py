"""The disk cache of token embeddings, keyed by model fingerprint, layer, dtype and text, written
from a background thread, in rag-judge's one cache folder (:func:`rag_judge.resources.cache_dir`)
unless told another.

An SQLite index (``embeddings.sqlite``, WAL) holds each text's token ids and where its float32
vectors lie; the vectors themselves go to append-only segment files beside it
(``embedding-vectors/<random>.f32``), one per writing :class:`EmbeddingCache`, so processes
sharing the folder never append to the same file. Why not BLOBs in SQLite: WAL writes each byte
twice (log, then checkpoint), which for ~37 KB rows cost ~4x the CPU time of one append, taken
from the encoder's cores during a cold run. Vectors are appended and synced before their rows
commit, and a row whose segment is missing or shorter than it says reads as absent (its text is
encoded again).
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from rag_judge._async import BackgroundWriter
from rag_judge.resources import cache_dir, use_wal, when_unlocked

__all__ = ["EmbeddingCache", "TokenEmbeddings"]

_NO_VECTORS = np.zeros((0, 0), dtype=np.float32)
_SEGMENTS = "embedding-vectors"  # the segment files' folder, beside the index
_FLOAT = np.dtype(np.float32).itemsize


@dataclass(frozen=True)
class TokenEmbeddings:
    """One text: its token ids (specials included) and their L2-normalised float32 vectors."""

    ids: NDArray[np.int64]
    vectors: NDArray[np.float32]


class EmbeddingCache:
    """Token embeddings on disk, shared safely between processes (WAL, busy timeout, a segment
    file per writer).

    Writes go through a background thread (its own connection and segment file; file writes
    and sqlite3 release the GIL), so storing one batch overlaps with encoding the next.
    ``close`` waits for it. Vectors read back are read-only views of the mapped segment files.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        folder = cache_dir() if directory is None else Path(directory).expanduser()
        self.path = folder / "embeddings.sqlite"
        self.segments = folder / _SEGMENTS
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = self._connect()
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS token_vectors (key TEXT PRIMARY KEY, n INTEGER NOT NULL,"
            " dim INTEGER NOT NULL, ids BLOB NOT NULL, segment TEXT NOT NULL,"
            " offset INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        )
        # The writer thread's own connection and segment file, opened on its first write.
        self._writer_db: sqlite3.Connection | None = None
        self._segment: tuple[str, IO[bytes]] | None = None
        self._writer: BackgroundWriter[tuple[str, TokenEmbeddings]] = BackgroundWriter(
            self._write, name="rag-judge-embeddings", finish=self._close_writer
        )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        # Switching a new file to WAL fails at once while another process holds a lock on it
        # (two runs creating the cache together): that statement waits here, like the others.
        when_unlocked(self.path, lambda: use_wal(db))
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def get_many(self, keys: Sequence[str], vectors: bool = True) -> dict[str, TokenEmbeddings]:
        """Stored entries among ``keys``; with ``vectors=False`` only the token ids are read."""
        found: dict[str, TokenEmbeddings] = {}
        mapped: dict[str, NDArray[np.float32] | None] = {}
        for start in range(0, len(keys), 500):  # stay under SQLite's bound-variable limit
            chunk = keys[start : start + 500]
            sql = (
                "SELECT key, n, dim, ids, segment, offset FROM token_vectors "
                f"WHERE key IN ({','.join('?' * len(chunk))})"
            )
            for key, n, dim, ids, segment, offset in self._db.execute(sql, chunk):
                arr = _NO_VECTORS
                if vectors:
                    if segment not in mapped:
                        mapped[segment] = self._map(segment)
                    data, first = mapped[segment], offset // _FLOAT
                    if data is None or first + n * dim > len(data):
                        continue  # its vectors never reached the disk: absent
                    arr = data[first : first + n * dim].reshape(n, dim)
                found[key] = TokenEmbeddings(np.frombuffer(ids, np.int32).astype(np.int64), arr)
        return found

    def _map(self, segment: str) -> NDArray[np.float32] | None:
        """A segment file's whole floats, memory-mapped read-only; None if missing or empty."""
        path = self.segments / Path(segment).name
        try:
            count = path.stat().st_size // _FLOAT  # a write cut short may leave a partial float
            if not count:
                return None
            # A plain array over the map (which it keeps open): slices skip memmap's bookkeeping.
            return np.memmap(path, np.float32, mode="r", shape=(count,)).view(np.ndarray)
        except OSError:
            return None

    def put_later(self, items: list[tuple[str, TokenEmbeddings]]) -> None:
        """Queue entries for the writer thread; ``flush`` or ``close`` waits for them."""
        self._writer.submit(items)

    def _write(self, items: list[tuple[str, TokenEmbeddings]]) -> None:
        if self._writer_db is None:
            self._writer_db = self._connect()
        if self._segment is None:
            self.segments.mkdir(exist_ok=True)
            name = f"{uuid.uuid4().hex}.f32"  # this writer's alone: no other process appends
            self._segment = (name, (self.segments / name).open("ab"))
        name, out = self._segment
        rows = []
        for key, emb in items:
            offset = out.tell()
            vectors = np.ascontiguousarray(emb.vectors, dtype=np.float32)
            out.write(vectors.data)  # a buffer: no copy of the vectors into bytes first
            rows.append(
                (key, len(emb.ids), vectors.shape[1], emb.ids.astype(np.int32).data, name, offset)
            )
        out.flush()
        os.fsync(out.fileno())  # on disk before their rows commit: a crash cannot leave a row
        # pointing at data that never arrived (some filesystems zero-fill such a tail)
        with self._writer_db:
            self._writer_db.executemany(
                "INSERT OR REPLACE INTO token_vectors VALUES (?,?,?,?,?,?)", rows
            )

    def _close_writer(self) -> None:
        if self._segment is not None:
            self._segment[1].close()
            self._segment = None
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
