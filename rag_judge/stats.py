"""Aggregation: exact means and seeded percentile-bootstrap confidence intervals."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["bootstrap_ci"]

_CHUNK = 2_000_000  # resampled elements held in memory at once


def bootstrap_ci(
    values: NDArray[np.float64],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: Callable[[NDArray[np.float64]], float] | None = None,
) -> tuple[float, float] | tuple[None, None]:
    """Percentile bootstrap interval of ``statistic`` (the mean by default) over the rows.

    ``values`` is 1-D for per-sample scores or 2-D for per-sample sufficient statistics, in
    which case ``statistic`` maps a set of rows to a number (e.g. corpus BLEU).
    """
    n = len(values)
    if n == 0 or resamples <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    if statistic is None:
        flat = np.asarray(values, dtype=np.float64)
        stats = []
        per_chunk = max(1, _CHUNK // n)
        for start in range(0, resamples, per_chunk):
            size = min(per_chunk, resamples - start)
            stats.append(flat[rng.integers(0, n, size=(size, n))].mean(axis=1))
        boot = np.concatenate(stats)
    else:
        boot = np.array([statistic(values[rng.integers(0, n, size=n)]) for _ in range(resamples)])
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(low), float(high)
