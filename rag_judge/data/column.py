"""Per-sample arrays of a run that grow with the samples (score columns, corpus rows, the
index's ids and lengths, a file's offsets): in memory, or given a folder to ``spill`` to, past
8,192 items (corpus rows: from the first) in an unnamed temporary file that readers see
through a read-only memory map, so a run's memory stays flat whatever the number of samples.
Where that folder is on a RAM file system (tmpfs), the files are memory too: ``TMPDIR`` picks
the folder of a run's temporary files.

A reader of a spilled array holds only the pages it touched, and lets them go with
:func:`~rag_judge.stats.pages.release` (or when its array is dropped): the bootstrap over
twenty columns of a million samples touches each in turn, not all at once. A spilled array
pickled carries its values, and spills again (into the system's temporary folder) as it is
unpickled; :func:`dump` and :func:`load` copy them a block at a time, beside the pickle.
"""

from __future__ import annotations

import math
import os
import pickle
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Column", "FileArray", "Rows", "dump", "load", "padded"]

# Items a spilled array keeps in memory before it appends them to its file: 8,192 doubles are
# 64 kB, a write that costs about what a chunk's scoring does.
TAIL = 8192

_DTYPES = {"d": np.float64, "q": np.int64, "i": np.int32, "B": np.uint8}
_BLOCK = 65_536  # items copied at a time between a file and a stream


class _Pickler(pickle.Pickler):
    """Pickles an object, each :class:`FileArray` in it by reference: its items follow the
    pickle, written a block at a time (:func:`dump`)."""

    def __init__(self, fh: IO[bytes]) -> None:
        super().__init__(fh, pickle.HIGHEST_PROTOCOL)
        self.arrays: list[FileArray] = []
        self._seen: dict[int, int] = {}  # an array reached twice is written once

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, FileArray):
            return None
        if id(obj) not in self._seen:
            self._seen[id(obj)] = len(self.arrays)
            self.arrays.append(obj)
        return (self._seen[id(obj)], obj.typecode, len(obj), obj._spill is not None)


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh: IO[bytes]) -> None:
        super().__init__(fh)
        self.arrays: list[tuple[FileArray, int]] = []

    def persistent_load(self, pid: Any) -> FileArray:
        k, typecode, n, spills = pid
        if k < len(self.arrays):  # the same array, reached again
            again: FileArray = self.arrays[k][0]
            return again
        made = FileArray(typecode, tempfile.gettempdir() if spills else None)
        # empty until the pickle is read: its bytes follow it (a __setstate__ meanwhile
        # would see no items)
        self.arrays.append((made, n))
        return made


def dump(obj: Any, fh: IO[bytes]) -> None:
    """``obj`` pickled to ``fh`` with its :class:`FileArray` items after it, copied a block at a
    time: neither the writer nor the reader (:func:`load`) holds an array whole, where
    pickling would hold every array of ``obj`` at once."""
    pickler = _Pickler(fh)
    pickler.dump(obj)
    for kept in pickler.arrays:
        kept.write_to(fh)


def load(fh: IO[bytes]) -> Any:
    """What :func:`dump` wrote; its arrays spill (to the system's temporary folder) as they are
    read, when they did where they were written."""
    unpickler = _Unpickler(fh)
    obj = unpickler.load()
    for made, n in unpickler.arrays:
        made.read_from(fh, n)
    return obj


class FileArray:
    """An append-only array of one type (``typecode``: ``d``, ``q``, ``i`` or ``B``), in memory
    or, given ``spill`` (a folder), in an unnamed temporary file past :data:`TAIL` items."""

    def __init__(self, typecode: str, spill: str | Path | None = None) -> None:
        self.typecode = typecode
        self._dtype = np.dtype(_DTYPES[typecode])
        self._tail = array(typecode)  # the items not yet in the file (all of them, unspilled)
        self._spill: str | Path | None = spill
        self._file: IO[bytes] | None = None
        self._on_disk = 0  # items in the file

    def __len__(self) -> int:
        return self._on_disk + len(self._tail)

    @property
    def spilled(self) -> bool:
        return self._file is not None

    def append(self, item: Any) -> None:
        self._tail.append(item)
        self._maybe_spill()

    def extend(self, items: Iterable[Any] | bytes) -> None:
        if isinstance(items, bytes | bytearray):
            self._tail.frombytes(items)
        else:
            self._tail.extend(items)
        self._maybe_spill()

    def item(self, i: int) -> Any:
        """Item ``i`` (within the array): from memory, or one read of the file."""
        if i >= self._on_disk:
            return self._tail[i - self._on_disk]
        return self.read(i, i + 1)[0].item()

    def read(self, start: int, stop: int) -> NDArray[Any]:
        """Items ``start`` to ``stop`` (within the array), a copy read without a map."""
        start, stop = max(0, start), min(stop, len(self))
        if stop <= start:
            return np.empty(0, self._dtype)
        size = self._dtype.itemsize
        parts = []
        if start < self._on_disk and self._file is not None:
            end = min(stop, self._on_disk)
            raw = os.pread(self._file.fileno(), size * (end - start), size * start)
            parts.append(np.frombuffer(raw, self._dtype))
        if stop > self._on_disk:
            lo = max(start, self._on_disk) - self._on_disk
            parts.append(np.frombuffer(self._tail, self._dtype)[lo : stop - self._on_disk].copy())
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def numpy(self) -> NDArray[Any]:
        """Every item: a view of the array in memory, or a read-only map of the file."""
        self._flush()
        if self._file is None or not len(self):
            return np.frombuffer(self._tail, self._dtype)
        return np.memmap(self._file, self._dtype, "r", shape=(len(self),))

    def write_to(self, fh: IO[bytes]) -> None:
        """Every item's bytes to ``fh``, a block at a time (:func:`dump`)."""
        for start in range(0, len(self), _BLOCK):
            fh.write(self.read(start, start + _BLOCK).tobytes())

    def read_from(self, fh: IO[bytes], n: int) -> None:
        """``n`` items appended from ``fh``, a block at a time, spilling as they come."""
        size = self._dtype.itemsize
        for start in range(0, n, _BLOCK):
            want = size * min(_BLOCK, n - start)
            raw = b""
            while len(raw) < want:  # a stream may give less than asked
                more = fh.read(want - len(raw))
                if not more:
                    raise EOFError("the file ends before its arrays do")
                raw += more
            self.extend(raw)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with its items (a file stays with its process), and whether it spills."""
        items = self._tail if self._file is None else array(self.typecode, self.numpy().tobytes())
        return {"typecode": self.typecode, "items": items, "spills": self._spill is not None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        spill = tempfile.gettempdir() if state["spills"] else None
        self.__init__(state["typecode"], spill)  # type: ignore[misc]
        self._tail = state["items"]
        self._maybe_spill()

    def _maybe_spill(self) -> None:
        if self._spill is not None and len(self._tail) >= TAIL:
            self._flush(to_disk=True)

    def _flush(self, to_disk: bool = False) -> None:
        """The items held in memory appended to the file (made at the first spill)."""
        if self._file is None and not to_disk:
            return
        if self._file is None:
            # unnamed (unlinked at once): the file goes when the array does, run ended or not
            self._file = tempfile.TemporaryFile(dir=self._spill)  # noqa: SIM115
        if self._tail:
            self._file.write(memoryview(self._tail).cast("B"))
            self._on_disk += len(self._tail)
            self._tail = array(self.typecode)
        self._file.flush()


class Column:
    """One metric over samples, in order: its values (NaN where it has none) and where it has
    one (a value may itself be NaN); 9 bytes a sample, in memory or, given ``spill`` (a
    folder), on disk past :data:`TAIL` values. A column may be shorter than the samples it
    belongs to: samples past its end have no value."""

    def __init__(self, n: int = 0, spill: str | Path | None = None) -> None:
        self._values = FileArray("d", spill)
        self._present = FileArray("B", spill)
        self._pad(n)

    def __len__(self) -> int:
        return len(self._present)

    @property
    def spilled(self) -> bool:
        """Whether the column's values are in files (a memory map reads them)."""
        return self._values.spilled

    def extend(self, values: Sequence[float | None]) -> None:
        self._values.extend(math.nan if v is None else v for v in values)
        self._present.extend(v is not None for v in values)

    def push(self, at: int, value: float, flag: bool) -> None:
        """``value`` and its flag for sample ``at``; the samples before it that had none get
        NaN and no flag."""
        self._pad(at - len(self))
        self._values.append(value)
        self._present.append(flag)

    def get(self, i: int) -> float | None:
        if not 0 <= i < len(self) or not self._present.item(i):
            return None
        return float(self._values.item(i))

    def window(self, start: int, stop: int) -> list[float | None]:
        """The values of samples ``start`` to ``stop`` (None: no value, or past the column's
        end), read from the files without mapping them: the run's join, a chunk at a time."""
        values = self._values.read(start, stop).tolist()
        flags = self._present.read(start, stop).tolist()
        out: list[float | None] = [v if f else None for v, f in zip(values, flags, strict=True)]
        return out + [None] * (stop - start - len(out))

    def arrays(self, n: int | None = None) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Values and presence over ``n`` samples (default: the column's length): read-only
        views where the column is complete (in memory, or a map of its files), not copies."""
        n = len(self) if n is None else n
        values = self._values.numpy()
        present = self._present.numpy().view(np.bool_)
        return padded(values, n, np.nan), padded(present, n, False)

    def _pad(self, missing: int) -> None:
        if missing > 0:
            self._values.extend(array("d", [math.nan]) * missing)
            self._present.extend(bytes(missing))


class Rows:
    """A corpus statistic's per-sample rows (``k`` numbers each), appended a chunk at a time:
    in memory, or given ``spill`` (a folder) in an unnamed temporary file."""

    def __init__(self, spill: str | Path | None = None) -> None:
        self._chunks: list[NDArray[np.float64]] = []
        self._spill = spill
        self._file: IO[bytes] | None = None
        self._n = 0
        self._tail: tuple[int, ...] = ()  # a row's shape (``(k,)``; ``()``: one number a row)

    def append(self, rows: NDArray[np.float64]) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        self._tail = rows.shape[1:]
        if self._spill is None:
            self._chunks.append(rows)
        else:
            if self._file is None:
                self._file = tempfile.TemporaryFile(dir=self._spill)  # noqa: SIM115
            self._file.write(rows.tobytes())
        self._n += len(rows)

    def array(self) -> NDArray[np.float64]:
        """Every row so far: a read-only map of the file, or the chunks joined once."""
        if self._spill is None:
            if len(self._chunks) > 1:  # joined once, the chunks let go (80 MB a million: BLEU)
                self._chunks[:] = [np.concatenate(self._chunks)]
            return self._chunks[0] if self._chunks else np.empty((0, *self._tail))
        if self._file is None or not self._n:
            return np.empty((0, *self._tail))
        self._file.flush()
        return np.memmap(self._file, np.float64, "r", shape=(self._n, *self._tail))


def padded(view: NDArray[Any], n: int, fill: float | bool) -> NDArray[Any]:
    """``view`` read-only when it is ``n`` long, else a copy padded to ``n`` with ``fill``."""
    if len(view) == n:
        view.flags.writeable = False
        return view
    return np.concatenate([view, np.full(n - len(view), fill, dtype=view.dtype)])
