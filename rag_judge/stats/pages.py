"""Pages of a memory-mapped array let go once read: a reader of many columns kept in files
(``data.column``, or :func:`spilled` here) then holds one column's pages at a time, not every
column's."""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BLOCK", "blocks", "mapped", "release", "spilled"]


def release(*arrays: Any) -> None:
    """Drop the pages of the file mapping under each of ``arrays`` (a ``numpy.memmap`` or a
    view of one) from this process's memory; they stay in the system's file cache, and a later
    read maps them again. Any other array is left as it is."""
    for array in arrays:
        base = _mapping(array)
        if base is not None and hasattr(mmap, "MADV_DONTNEED") and not base.closed:
            base.madvise(mmap.MADV_DONTNEED)


# Items of an array read at a time by :func:`blocks` (2 MB of doubles; fewer cost time).
BLOCK = 262_144


def blocks(array: NDArray[Any], size: int | None = None) -> Iterator[tuple[int, NDArray[Any]]]:
    """``array`` ``size`` items at a time (default :data:`BLOCK`), each block with the position
    of its first item; a mapped array's pages are let go after each block, so a pass over a
    column in a file holds one block of it. A block is a view: the caller copies what it keeps."""
    size = BLOCK if size is None else size
    for start in range(0, len(array), size):
        yield start, array[start : start + size]
        release(array)


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
        fh.write(np.ascontiguousarray(array).data.cast("B"))  # no copy in bytes
        fh.flush()
        return np.memmap(fh, array.dtype, "r", shape=array.shape)
