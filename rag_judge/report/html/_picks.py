"""Two ways of choosing samples for report.html without a copy of a million of anything: the
first ``k`` of a column read a block at a time, and the positions a random draw picks from."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["Others", "first_k"]


def first_k(parts: Iterable[tuple[int, npt.NDArray[np.float64]]], k: int) -> npt.NDArray[np.intp]:
    """The positions of the ``k`` smallest keys, in order, the earliest first among ties; NaN
    keys left out. ``parts`` gives the keys a block at a time, each with its first position,
    in order: a block's own first ``k`` are all it can add, so k candidates are kept."""
    best = np.empty(0, dtype=np.float64)
    at = np.empty(0, dtype=np.intp)
    for start, block in parts:
        valid = np.flatnonzero(~np.isnan(block))
        values = block[valid]
        if valid.size > k:  # only the candidates up to the block's k-th value are sorted
            kth = np.partition(values, k - 1)[k - 1]
            valid, values = valid[values <= kth], values[values <= kth]
        best = np.concatenate([best, values])
        at = np.concatenate([at, valid + start])
        order = np.lexsort((at, best))[:k]
        best, at = best[order], at[order]
    return at


class Others(Sequence[int]):
    """The positions 0..n-1 other than ``taken``, in order, found as asked: what the random
    draw samples from, without a list of a million ints."""

    def __init__(self, n: int, taken: set[int]) -> None:
        self._skip = sorted(taken)
        self._n = n - len(taken)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, j: int) -> int:  # type: ignore[override]
        if not -self._n <= j < self._n:
            raise IndexError(j)
        j %= self._n
        # The j-th position not taken: j plus the taken positions at or below it.
        lo, hi = j, j + len(self._skip)
        while lo < hi:  # the smallest p with p - (taken positions <= p) == j
            mid = (lo + hi) // 2
            if mid - bisect_right(self._skip, mid) < j:
                lo = mid + 1
            else:
                hi = mid
        return lo
