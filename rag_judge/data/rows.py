"""Rows in a JSON Lines file, read back one at a time: what a large run holds per sample lives
on disk, indexed by byte offsets, and only the rows asked for are parsed.

``RowWriter`` appends lines and records where each starts; ``RowFile`` is a read-only
``Sequence`` over them (``len``, ``[i]``, slices, iteration in order), generic over the function
that parses a line. A file the run made for itself (``owned``) is deleted with its last
``RowFile``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Generic, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.column import FileArray

__all__ = ["RowFile", "RowWriter", "line_offsets"]

T = TypeVar("T")
_BLOCK = 1 << 22  # bytes read at a time when a file's line starts are found by scanning


class RowWriter:
    """Appends one row per line (a line must not hold a newline) and records the offsets
    (unless told not to: a file read only in order)."""

    def __init__(
        self, path: str | Path, *, offsets: bool = True, spill: str | Path | None = None
    ) -> None:
        self.path = Path(path)
        self._fh = self.path.open("wb")
        # A file read only in order (a run's spool) keeps no offsets: 8 bytes a row saved;
        # ``spill``: a folder for them past a few thousand rows (``data.column``).
        self._starts = FileArray("q", spill) if offsets else None
        if self._starts is not None:
            self._starts.append(0)
        self._n = 0
        self._end = 0

    def write(self, line: bytes) -> None:
        self._fh.write(line + b"\n")
        self._n += 1
        self._end += len(line) + 1
        if self._starts is not None:
            self._starts.append(self._end)

    def __len__(self) -> int:
        return self._n

    def flush(self) -> None:
        """Make the rows written so far readable by another handle on the file."""
        self._fh.flush()

    @property
    def offsets(self) -> FileArray | None:
        """The offsets kept so far, as stored (to hand to another process, spilled or not)."""
        return self._starts

    def close(self) -> NDArray[np.int64]:
        """Close the file; the offsets of its rows (one more than the rows: the end), or only
        the end for a writer that keeps none."""
        if not self._fh.closed:
            self._fh.close()
        if self._starts is None:
            return np.array([self._end], dtype=np.int64)
        offsets: NDArray[np.int64] = self._starts.numpy()
        return offsets


def line_offsets(path: Path) -> NDArray[np.int64]:
    """Where each line of ``path`` starts, and the end, found by scanning for newlines; a last
    line without a newline counts."""
    found = [np.zeros(1, dtype=np.int64)]
    size = 0
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10) + size + 1
            found.append(ends.astype(np.int64))
            size += len(block)
    offsets = np.concatenate(found)
    if offsets[-1] != size:
        offsets = np.append(offsets, size)
    return offsets


class RowFile(Sequence[T], Generic[T]):
    """The rows of a JSON Lines file, parsed by ``parse`` when asked for."""

    def __init__(
        self,
        path: str | Path,
        parse: Callable[[bytes], T],
        offsets: NDArray[np.int64] | None = None,
        *,
        owned: bool = False,
    ) -> None:
        self.path = Path(path)
        self._parse = parse
        self._offsets = line_offsets(self.path) if offsets is None else offsets
        if owned:  # the file, and the folder the run made for it, go with the last reference
            weakref.finalize(self, _remove, self.path)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"row {index} of {n}")
        index %= n
        start, end = int(self._offsets[index]), int(self._offsets[index + 1])
        with self.path.open("rb") as fh:
            fh.seek(start)
            return self._parse(fh.read(end - start))

    def __iter__(self) -> Iterator[T]:
        for line in self.lines():
            yield self._parse(line)

    def lines(self) -> Iterator[bytes]:
        """Each row's line as stored, newline included, in order."""
        with self.path.open("rb") as fh:
            for _ in range(len(self)):
                yield fh.readline()

    def copy_to(self, dest: Path) -> None:
        """The file, byte for byte, at ``dest`` (a hard link where the file system allows)."""
        if dest.exists() and dest.samefile(self.path):
            return
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(self.path, tmp)
        except OSError:
            shutil.copyfile(self.path, tmp)
        tmp.replace(dest)


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the run's own temporary folder, once empty
        path.parent.rmdir()
