"""Pages of a memory-mapped array let go once read: a reader of many columns kept in files
(``data.column``, or :func:`spilled` here) then holds one column's pages at a time, not every
column's."""

from __future__ import annotations

import mmap
import tempfile
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["mapped", "release", "spilled"]


def release(array: Any) -> None:
    """Drop the pages of the file mapping under ``array`` (a ``numpy.memmap`` or a view of
    one) from this process's memory; they stay in the system's file cache, and a later read
    maps them again. Any other array is left as it is."""
    base = _mapping(array)
    if base is None or not hasattr(mmap, "MADV_DONTNEED") or base.closed:
        return
    base.madvise(mmap.MADV_DONTNEED)


def mapped(array: Any) -> bool:
    """Whether ``array`` is (a view of) a memory map of a file."""
    return _mapping(array) is not None


def _mapping(array: Any) -> mmap.mmap | None:
    base = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base


# Arrays from this size are worth a file: below it, the page faults would cost more than the
# memory they save (1 MB: 131,072 doubles).
SPILL_BYTES = 1 << 20


def spilled(array: NDArray[Any]) -> NDArray[Any]:
    """``array`` copied to an unnamed temporary file and mapped read-only, for a reader that
    goes through several such arrays again and again (:func:`release` after each); a small
    array is returned as it is."""
    if array.nbytes < SPILL_BYTES:
        return array
    with tempfile.TemporaryFile() as fh:  # the map keeps its own descriptor of the file
        fh.write(np.ascontiguousarray(array).tobytes())
        fh.flush()
        return np.memmap(fh, array.dtype, "r", shape=array.shape)
