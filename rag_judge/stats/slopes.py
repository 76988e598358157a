"""The percentile bootstrap interval of an OLS slope (the judge audit's length bias: score on
answer length), for several responses on one regressor from one set of draws.

Each resample's slope comes from its moments (the sums of x, x², y and xy over the drawn
rows), found as the rows weighted by how often each was drawn, as the means' bootstrap finds
them (``bootstrap.count_chunks``): several rubrics judged on the same answers share the draws
and the regressor's sums, and no drawn rows are gathered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from rag_judge.stats.bootstrap import count_chunks, multiplied
from rag_judge.stats.pages import release, spilled

__all__ = ["grouped", "ols_slopes", "slope_cis"]

# A resample whose regressor's spread is within this share of its scale might be a single
# value; it is then checked exactly (rounding is many orders of magnitude below this).
_SUSPECT = 1e-9


def ols_slopes(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise OLS slopes of y on x (2-D), NaN for a row whose x are all equal; from the
    rows' moments, so centre x and y first (once, not per resample) to keep them exact."""
    n = x.shape[-1]
    sx, sy = x.sum(axis=-1), y.sum(axis=-1)
    sxx, sxy = np.einsum("ij,ij->i", x, x), np.einsum("ij,ij->i", x, y)
    flat = x.min(axis=-1) == x.max(axis=-1)
    return np.where(flat, np.nan, (n * sxy - sx * sy) / np.where(flat, 1.0, n * sxx - sx * sx))


def slope_cis(
    x: NDArray[np.float64],
    ys: Sequence[NDArray[np.float64]],
    *,
    resamples: int,
    confidence: float,
    seed: int,
    per: float = 1.0,
) -> list[tuple[float, float] | None]:
    """The percentile bootstrap interval of the slope of each of ``ys`` on ``x``, resampling
    rows: the draws are ``default_rng(seed).integers(0, n, (resamples, n))``, one set for every
    response. A resample whose x are all one value has no slope and is dropped; None where no
    resample has one. The moments are summed as weighted rows, not in draw order, so an
    interval can differ from gathering the drawn rows in the last digits. ``per``: the unit
    the slopes are given in (100: per 100 units of x)."""
    n = len(x)
    if n == 0 or resamples <= 0:
        return [None] * len(ys)
    # The moments' columns, each in a file past a megabyte (``pages.spilled``) and let go
    # once weighed: a million answers hold one column at a time, not six.
    xc = x - x.mean()
    columns, products = [spilled(xc), spilled(xc * xc)], []
    for y in ys:
        yc = y - y.mean()
        columns.append(spilled(yc))
        products.append(spilled(xc * yc))
        del yc  # in its file now: not held through the loop
    columns += products
    del xc, products
    release(x, *ys)  # read once for the centring: the loop below reads their files
    boot: list[list[NDArray[np.float64]]] = [[] for _ in ys]
    buf = np.empty(0)
    for _, counts in count_chunks(n, resamples, seed, ahead=True):
        if buf.shape != counts.shape:
            buf = np.empty(counts.shape)
        drawn = counts.astype(np.float64)  # once: a product of doubles is the faster
        sx, sxx, *rest = (_weighed(drawn, c, buf) for c in columns)
        spread = n * sxx - sx * sx
        flat = np.zeros(len(counts), dtype=bool)
        for r in np.flatnonzero(spread <= _SUSPECT * (n * sxx + sx * sx)):
            picked = columns[0][counts[r] > 0]  # the centred regressor's drawn values
            flat[r] = picked.min() == picked.max()
            release(columns[0])
        for k in range(len(ys)):
            sy, sxy = rest[k], rest[len(ys) + k]
            slopes = (n * sxy - sx * sy) / np.where(flat, 1.0, spread)
            boot[k].append(np.where(flat, np.nan, slopes))
    alpha = (1.0 - confidence) / 2.0
    out: list[tuple[float, float] | None] = []
    for found in boot:
        slopes = np.concatenate(found)
        slopes = slopes[~np.isnan(slopes)] * per
        if len(slopes) == 0:
            out.append(None)
            continue
        low, high = np.quantile(slopes, [alpha, 1.0 - alpha])
        out.append((float(low), float(high)))
    return out


def _weighed(
    drawn: NDArray[np.float64], column: NDArray[np.float64], buf: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Each resample's sum of ``column`` weighted by its draw counts (a column in a file is
    weighed a block at a time, its pages let go after each: ``multiplied``)."""
    found: NDArray[np.float64] = multiplied(drawn, column, buf).sum(axis=1)
    return found


def grouped(xs: Mapping[str, NDArray[np.float64]]) -> list[tuple[NDArray[np.float64], list[str]]]:
    """The names of equal regressors together, each group with its regressor (first seen
    first): what can share one :func:`slope_cis`."""
    groups: list[tuple[NDArray[np.float64], list[str]]] = []
    for name, x in xs.items():
        same = next((g for g in groups if np.array_equal(g[0], x)), None)
        if same is None:
            groups.append((x, [name]))
        else:
            same[1].append(name)
    return groups
