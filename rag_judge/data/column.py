"""One metric's values over the samples of a run, in order: in memory, or past a few thousand
values in an unnamed temporary file (``spill``) that the column reads back through a
read-only memory map, so a run's columns cost disk, not memory, whatever the samples.

A reader of a spilled column holds only the pages it touched, and lets them go with
:func:`~rag_judge.stats.pages.release` (or when its array is dropped): the bootstrap over
twenty columns of a million samples touches each in turn, not all at once.
"""

from __future__ import annotations

import math
import os
import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Column", "Rows", "padded"]

# Values a spilled column keeps in memory before it appends them to its files: 8,192 values
# are 72 kB, and a write of that size costs about what a chunk's scoring does.
TAIL = 8192


class Column:
    """One metric over samples, in order: its values (NaN where it has none) and where it has
    one (a value may itself be NaN); 9 bytes a sample, in memory or, given ``spill`` (a
    folder), on disk past :data:`TAIL` values. A column may be shorter than the samples it
    belongs to: samples past its end have no value."""

    def __init__(self, n: int = 0, spill: str | Path | None = None) -> None:
        self.values = array("d")  # the values not yet in the files (all of them, unspilled)
        self.present = bytearray()
        self._spill = None if spill is None else Path(spill)
        self._files: tuple[IO[bytes], IO[bytes]] | None = None
        self._on_disk = 0  # values in the files
        self._pad(n)

    def __len__(self) -> int:
        return self._on_disk + len(self.present)

    @property
    def spilled(self) -> bool:
        """Whether the column's values are in files (a memory map reads them)."""
        return self._files is not None

    def extend(self, values: Sequence[float | None]) -> None:
        self.values.extend(math.nan if v is None else v for v in values)
        self.present.extend(v is not None for v in values)
        self._maybe_spill()

    def push(self, at: int, value: float, flag: bool) -> None:
        """``value`` and its flag for sample ``at``; the samples before it that had none get
        NaN and no flag."""
        self._pad(at - len(self))
        self.values.append(value)
        self.present.append(flag)
        self._maybe_spill()

    def get(self, i: int) -> float | None:
        if not 0 <= i < len(self):
            return None
        if i >= self._on_disk:
            at = i - self._on_disk
            return self.values[at] if self.present[at] else None
        assert self._files is not None  # on disk, so spilled
        flag = os.pread(self._files[1].fileno(), 1, i)
        if flag != b"\x01":
            return None
        value: float = np.frombuffer(os.pread(self._files[0].fileno(), 8, 8 * i), np.float64)[0]
        return float(value)

    def window(self, start: int, stop: int) -> list[float | None]:
        """The values of samples ``start`` to ``stop`` (None: no value, or past the column's
        end), read from the files without mapping them: the run's join, a chunk at a time."""
        self._flush()
        end = max(start, min(stop, len(self)))
        if self._files is None:
            values, flags = self.values[start:end].tolist(), bytes(self.present[start:end])
        else:
            raw = os.pread(self._files[0].fileno(), 8 * (end - start), 8 * start)
            flags = os.pread(self._files[1].fileno(), end - start, start)
            values = np.frombuffer(raw, np.float64).tolist()
        out: list[float | None] = [v if f else None for v, f in zip(values, flags, strict=True)]
        return out + [None] * (stop - start - len(out))

    def arrays(self, n: int | None = None) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Values and presence over ``n`` samples (default: the column's length): read-only
        views where the column is complete (in memory, or a map of its files), not copies."""
        n = len(self) if n is None else n
        self._flush()
        if self._files is None or not len(self):
            values = np.frombuffer(self.values, dtype=np.float64)
            present = np.frombuffer(self.present, dtype=np.bool_)
        else:
            values = np.memmap(self._files[0], np.float64, "r", shape=(len(self),))
            present = np.memmap(self._files[1], np.bool_, "r", shape=(len(self),))
        return padded(values, n, np.nan), padded(present, n, False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to another process) with its values, in memory: files stay with their
        process."""
        if self._files is None:
            return {"values": self.values, "present": self.present}
        values, present = self.arrays()
        return {"values": array("d", values.tobytes()), "present": bytearray(present.tobytes())}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        self.values, self.present = state["values"], state["present"]

    def _pad(self, missing: int) -> None:
        if missing > 0:
            self.values.extend(array("d", [math.nan]) * missing)
            self.present.extend(bytes(missing))
            self._maybe_spill()

    def _maybe_spill(self) -> None:
        if self._spill is not None and len(self.present) >= TAIL:
            self._flush(to_disk=True)

    def _flush(self, to_disk: bool = False) -> None:
        """The values held in memory appended to the files (created at the first spill)."""
        if self._files is None and not to_disk:
            return
        if self._files is None:
            # unnamed (unlinked at once): the files go when the column does, run ended or not
            folder = self._spill
            self._files = (
                tempfile.TemporaryFile(dir=folder),  # noqa: SIM115 - the column's lifetime
                tempfile.TemporaryFile(dir=folder),  # noqa: SIM115
            )
        values, flags = self._files
        if self.present:
            values.write(memoryview(self.values).cast("B"))
            flags.write(self.present)
            self._on_disk += len(self.present)
            self.values, self.present = array("d"), bytearray()
        values.flush()
        flags.flush()


class Rows:
    """A corpus statistic's per-sample rows (``k`` numbers each), appended a chunk at a time:
    in memory, or given ``spill`` (a folder) in an unnamed temporary file."""

    def __init__(self, spill: str | Path | None = None) -> None:
        self._chunks: list[NDArray[np.float64]] = []
        self._file = None if spill is None else tempfile.TemporaryFile(dir=spill)  # noqa: SIM115
        self._n = 0
        self._tail: tuple[int, ...] = ()  # a row's shape (``(k,)``; ``()``: one number a row)

    def append(self, rows: NDArray[np.float64]) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        self._tail = rows.shape[1:]
        if self._file is None:
            self._chunks.append(rows)
        else:
            self._file.write(rows.tobytes())
        self._n += len(rows)

    def array(self) -> NDArray[np.float64]:
        """Every row so far: a read-only map of the file, or the chunks joined once."""
        if self._file is None:
            if len(self._chunks) > 1:  # joined once, the chunks let go (80 MB a million: BLEU)
                self._chunks[:] = [np.concatenate(self._chunks)]
            return self._chunks[0] if self._chunks else np.empty((0, *self._tail))
        self._file.flush()
        if not self._n:
            return np.empty((0, *self._tail))
        return np.memmap(self._file, np.float64, "r", shape=(self._n, *self._tail))


def padded(view: NDArray[Any], n: int, fill: float | bool) -> NDArray[Any]:
    """``view`` read-only when it is ``n`` long, else a copy padded to ``n`` with ``fill``."""
    if len(view) == n:
        view.flags.writeable = False
        return view
    return np.concatenate([view, np.full(n - len(view), fill, dtype=view.dtype)])
