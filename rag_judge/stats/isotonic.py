"""Monotone and linear maps from one judge's scores to another's, fitted by least squares.

:func:`isotonic_fit` is the pool-adjacent-violators algorithm (PAVA) over the distinct x
values; :func:`linear_fit` is ordinary least squares, batched over leading axes so that a
simulation fits thousands of datasets at once. Both return the fitted parameters as plain
arrays; :func:`isotonic_predict` evaluates a step map between its knots.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["isotonic_fit", "isotonic_predict", "linear_fit", "pava"]


def pava(y: ArrayLike, w: ArrayLike) -> NDArray[np.float64]:
    """The non-decreasing sequence closest to ``y`` in ``w``-weighted least squares."""
    values = [float(v) for v in np.asarray(y, dtype=np.float64)]
    weights = [float(v) for v in np.asarray(w, dtype=np.float64)]
    # Blocks of pooled neighbours: (mean, weight, count), merged while out of order.
    blocks: list[list[float]] = []
    for v, wt in zip(values, weights):
        blocks.append([v, wt, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            total = w1 + w2
            blocks.append([(m1 * w1 + m2 * w2) / total, total, c1 + c2])
    out = [m for m, _, c in blocks for _ in range(int(c))]
    return np.asarray(out, dtype=np.float64)


def isotonic_fit(
    x: ArrayLike, y: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """The least-squares non-decreasing map of ``y`` on ``x``: its knots (the distinct x, in
    order), its value at each knot, and its number of distinct values (the fit's degrees of
    freedom, as each pooled block is one fitted mean)."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    knots, inverse, counts = np.unique(xs, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ys, minlength=len(knots))
    fitted = pava(sums / counts, counts)
    return knots, fitted, len(np.unique(fitted))


def isotonic_predict(knots: ArrayLike, values: ArrayLike, x: ArrayLike) -> NDArray[np.float64]:
    """The step map at ``x``: linear between knots, flat beyond the first and the last."""
    return np.interp(
        np.asarray(x, dtype=np.float64),
        np.asarray(knots, dtype=np.float64),
        np.asarray(values, dtype=np.float64),
    )


def linear_fit(
    x: NDArray[np.float64], y: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """OLS intercept and slope of ``y`` on ``x`` along the last axis (a constant x: slope 0,
    intercept the mean of y)."""
    mx = x.mean(axis=-1, keepdims=True)
    my = y.mean(axis=-1, keepdims=True)
    sxx = ((x - mx) ** 2).sum(axis=-1)
    sxy = ((x - mx) * (y - my)).sum(axis=-1)
    slope = np.divide(sxy, sxx, out=np.zeros_like(sxy), where=sxx > 0)
    intercept = my[..., 0] - slope * mx[..., 0]
    return intercept, slope
