"""Pages of a memory-mapped array let go once read: a reader of many columns kept in files
(``data.column``) then holds one column's pages at a time, not every column's."""

from __future__ import annotations

import mmap
from typing import Any

__all__ = ["release"]


def release(array: Any) -> None:
    """Drop the pages of the file mapping under ``array`` (a ``numpy.memmap`` or a view of
    one) from this process's memory; they stay in the system's file cache, and a later read
    maps them again. Any other array is left as it is."""
    base = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    if base is None or not hasattr(mmap, "MADV_DONTNEED") or base.closed:
        return
    base.madvise(mmap.MADV_DONTNEED)
