"""Agreement between several coders (judges, or a judge and a person) on an interval scale."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["krippendorff_alpha_interval"]


def krippendorff_alpha_interval(values: NDArray[np.float64]) -> float | None:
    """Krippendorff's α, interval metric, for a (units × coders) matrix with NaN where a coder
    gave no value. Only units with two or more values are pairable; with n pairable values,
    m_u of them in unit u:

        D_o = (1/n) Σ_u 2 m_u S_u / (m_u − 1),   D_e = 2 S / (n − 1),   α = 1 − D_o / D_e

    where S_u is unit u's sum of squares about its mean and S the pooled sum of squares about
    the pooled mean (the coincidence-matrix definition, rewritten with Σ_{i≠j} (v_i − v_j)² =
    2 m Σ (v − v̄)²). None when nothing is pairable or every pairable value is the same."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a (units x coders) matrix, got shape {x.shape}")
    present = ~np.isnan(x)
    m = present.sum(axis=1)
    rows = x[m >= 2]
    mask = present[m >= 2]
    m = m[m >= 2]
    n = int(m.sum())
    if n < 2:
        return None
    filled = np.where(mask, rows, 0.0)
    unit_mean = filled.sum(axis=1) / m
    within = (np.where(mask, rows - unit_mean[:, None], 0.0) ** 2).sum(axis=1)
    pooled = rows[mask]
    spread = float(((pooled - pooled.mean()) ** 2).sum())
    if spread == 0:
        return None
    observed = float((2 * m * within / (m - 1)).sum()) / n
    expected = 2 * spread / (n - 1)
    return 1.0 - observed / expected
