"""Student's t distribution: its two-sided quantile, for the small-sample intervals of
:mod:`rag_judge.stats.ppi` (numpy has none, and scipy is not a dependency).

P(|T_ν| ≤ t) = 1 − I_x(ν/2, 1/2) with x = ν / (ν + t²), I the regularized incomplete beta
function, evaluated by its continued fraction (modified Lentz; Press et al., *Numerical
Recipes*, 3rd ed., §6.4); the quantile is found by bisection to the last bit.
"""

from __future__ import annotations

import math
from functools import lru_cache

from rag_judge.errors import ConfigError

__all__ = ["t_coverage", "t_value"]

_TINY = 1e-300  # keeps Lentz's products off zero
_EPS = 1e-16


def t_coverage(t: float, df: float) -> float:
    """P(|T| ≤ ``t``) for Student's t with ``df`` degrees of freedom (``t`` ≥ 0)."""
    if t <= 0.0:
        return 0.0
    # x and 1 − x each from its own expression, so neither loses digits to a subtraction
    t2 = t * t
    x, one_minus_x = df / (df + t2), t2 / (df + t2)
    return 1.0 - _beta_reg(df / 2.0, 0.5, x, one_minus_x)


@lru_cache(maxsize=512)
def t_value(confidence: float, df: float) -> float:
    """The two-sided quantile of Student's t with ``df`` degrees of freedom: P(|T| ≤ t) =
    ``confidence`` (12.706205 for 0.95 and 1 df, 2.144787 for 14, → 1.959964 as df grows)."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    if not (math.isfinite(df) and df > 0):
        raise ValueError(f"degrees of freedom must be a positive number, got {df!r}")
    low, high = 0.0, 2.0
    while t_coverage(high, df) < confidence:
        low, high = high, 2.0 * high
    for _ in range(200):  # bisection: each step halves the bracket, down to adjacent floats
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        if t_coverage(mid, df) < confidence:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def _beta_reg(a: float, b: float, x: float, one_minus_x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if one_minus_x <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        + a * math.log(x) + b * math.log(one_minus_x)
    )  # fmt: skip
    front = math.exp(log_front)
    # the continued fraction converges fast for x < (a + 1) / (a + b + 2); else use the symmetry
    # I_x(a, b) = 1 − I_{1−x}(b, a)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, one_minus_x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), by the modified Lentz method."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((a - 1.0 + m2) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h
