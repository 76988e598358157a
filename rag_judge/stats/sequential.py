"""Anytime-valid confidence sequences for the mean of bounded scores, and gate decisions.

The sequence is the predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB) of
Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS B 86(1),
2023, Theorem 2. For X_1, X_2, ... in [0, 1] with conditional mean mu, with probability at least
1 - alpha, for every t at once, mu lies in

    C_t = sum(l_i X_i) / sum(l_i)  +-  (log(2/alpha) + sum(v_i psi(l_i))) / sum(l_i)

where the sums run over i <= t and

    mu_t   = (1/2 + sum_{i<=t} X_i) / (t + 1),         mu_0 = 1/2
    s2_t   = (1/4 + sum_{i<=t} (X_i - mu_i)^2) / (t + 1), s2_0 = 1/4
    l_t    = min(sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t))), c)   (c = 1/2 here)
    v_t    = 4 (X_t - mu_{t-1})^2
    psi(l) = (-log(1 - l) - l) / 4.

Because the bound holds for every t at once, the running intersection of the C_t holds too,
and a run may look after every sample and stop whenever it likes. Scores on [a, b] are mapped
to [0, 1] first. A paired drop uses the differences new - base, which lie in [-(b-a), b-a].

A gate ``mean OP bound`` is decided PASS when the whole sequence lies strictly on its passing
side, FAIL when strictly on the failing side, else it is undecided. At a true mean equal to the
bound, any decision means the sequence missed the mean: at most alpha of runs, ever.

``naive_bootstrap_stop`` is the negative control: stop at the first look whose percentile
bootstrap interval excludes the bound. Each look alone is a 1 - alpha interval, but looking
again and again inflates its error well past alpha (docs/sequential.md gives the rate).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Decision",
    "confidence_sequence",
    "decide",
    "decisions",
    "naive_bootstrap_stop",
    "paired_confidence_sequence",
    "sequential_stop",
]

Decision = Literal["pass", "fail", "undecided"]
LAMBDA_CAP = 0.5  # the paper's c: bets stay below 1/2 (it suggests 1/2 or 3/4)
PASSING = {">=": 1, ">": 1, "<=": -1, "<": -1}  # which side of the bound passes


def confidence_sequence(
    x: ArrayLike, alpha: float = 0.05, *, lo: float = 0.0, hi: float = 1.0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The PrPl-EB sequence after each value of ``x`` (last axis: time; other axes: runs),
    running-intersected: ``(lower[..., t], upper[..., t])`` hold mu after t + 1 values.
    Every value must lie in [lo, hi]."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not hi > lo:
        raise ValueError(f"the range [{lo}, {hi}] is empty")
    values = np.asarray(x, dtype=np.float64)
    if values.shape[-1] == 0:
        raise ValueError("no values")
    y = (values - lo) / (hi - lo)
    if np.any(y < -1e-12) or np.any(y > 1 + 1e-12):
        raise ValueError(f"values outside [{lo}, {hi}]")
    y = np.clip(y, 0.0, 1.0)
    t = np.arange(1, y.shape[-1] + 1, dtype=np.float64)
    log_term = math.log(2.0 / alpha)
    mu = (0.5 + np.cumsum(y, axis=-1)) / (t + 1)  # mu_t, t = 1..n
    s2 = (0.25 + np.cumsum((y - mu) ** 2, axis=-1)) / (t + 1)  # s2_t
    mu_prev = np.concatenate([np.full((*y.shape[:-1], 1), 0.5), mu[..., :-1]], axis=-1)
    s2_prev = np.concatenate([np.full((*y.shape[:-1], 1), 0.25), s2[..., :-1]], axis=-1)
    lam = np.minimum(np.sqrt(2 * log_term / (s2_prev * t * np.log1p(t))), LAMBDA_CAP)
    v = 4 * (y - mu_prev) ** 2
    psi = (-np.log1p(-lam) - lam) / 4
    lam_sum = np.cumsum(lam, axis=-1)
    centre = np.cumsum(lam * y, axis=-1) / lam_sum
    half = (log_term + np.cumsum(v * psi, axis=-1)) / lam_sum
    lower = np.maximum.accumulate(np.clip(centre - half, 0.0, 1.0), axis=-1)
    upper = np.minimum.accumulate(np.clip(centre + half, 0.0, 1.0), axis=-1)
    return lo + (hi - lo) * lower, lo + (hi - lo) * upper


def paired_confidence_sequence(
    new: ArrayLike, base: ArrayLike, alpha: float = 0.05, *, lo: float = 0.0, hi: float = 1.0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The sequence of mean(new - base) for paired scores on [lo, hi]: the differences lie in
    [-(hi - lo), hi - lo]."""
    diff = np.asarray(new, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    return confidence_sequence(diff, alpha, lo=-(hi - lo), hi=hi - lo)


def decide(lower: float, upper: float, op: str, bound: float) -> Decision:
    """PASS when [lower, upper] lies strictly on the passing side of ``bound``, FAIL when
    strictly on the failing side, else undecided. ``op`` is one of >=, >, <=, <."""
    side = _side(op)
    if side * (lower - bound) > 0 and side * (upper - bound) > 0:
        return "pass"
    if side * (lower - bound) < 0 and side * (upper - bound) < 0:
        return "fail"
    return "undecided"


def decisions(
    lower: NDArray[np.float64], upper: NDArray[np.float64], op: str, bound: float
) -> NDArray[np.int8]:
    """``decide`` elementwise: +1 pass, -1 fail, 0 undecided."""
    side = _side(op)
    a, b = side * (lower - bound), side * (upper - bound)
    return np.where((a > 0) & (b > 0), 1, np.where((a < 0) & (b < 0), -1, 0)).astype(np.int8)


def sequential_stop(
    x: ArrayLike,
    op: str,
    bound: float,
    looks: ArrayLike,
    alpha: float = 0.05,
    *,
    lo: float = 0.0,
    hi: float = 1.0,
) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
    """For each run (rows of ``x``), the decision at the first look (a count of values) that
    decides the gate, and that count; an undecided run is 0 at the last look."""
    lower, upper = confidence_sequence(x, alpha, lo=lo, hi=hi)
    at = np.asarray(looks, dtype=np.int64) - 1
    return _first(decisions(lower[..., at], upper[..., at], op, bound), at + 1)


def naive_bootstrap_stop(
    x: ArrayLike,
    op: str,
    bound: float,
    looks: ArrayLike,
    alpha: float = 0.05,
    *,
    resamples: int = 200,
    seed: int = 0,
) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
    """The negative control: at each look, the percentile bootstrap 1 - alpha interval of the
    mean of the values so far; stop at the first that excludes ``bound``. Same returns as
    ``sequential_stop``. The bootstrap is exact and fast: a resample of n values is a
    multinomial draw of the counts of each distinct value."""
    values = np.atleast_2d(np.asarray(x, dtype=np.float64))
    distinct, codes = np.unique(values, return_inverse=True)
    codes = codes.reshape(values.shape)
    rng = np.random.default_rng(seed)
    ns = np.asarray(looks, dtype=np.int64)
    found = np.zeros((values.shape[0], len(ns)), dtype=np.int8)
    for k, n in enumerate(ns):
        counts = np.stack([(codes[:, :n] == j).sum(axis=1) for j in range(len(distinct))], 1)
        draws = rng.multinomial(int(n), counts / n, size=(resamples, values.shape[0]))
        means = (draws @ distinct) / n  # (resamples, runs)
        low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
        found[:, k] = decisions(low, high, op, bound)
    return _first(found, ns)


def _first(
    found: NDArray[np.int8], looks: NDArray[np.int64]
) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
    decided = found != 0
    first = np.where(decided.any(axis=-1), decided.argmax(axis=-1), found.shape[-1] - 1)
    verdict = np.take_along_axis(found, first[..., None], axis=-1)[..., 0]
    return verdict.astype(np.int8), looks[first]


def _side(op: str) -> int:
    if op not in PASSING:
        raise ValueError(f"a sequential gate needs >=, >, <= or <, not {op!r}")
    return PASSING[op]
