"""Active prediction-powered inference with known inclusion probabilities, and its anytime-valid
confidence sequence (Zrnic & Candès 2024, "Active Statistical Inference", arXiv:2403.03208).

Samples arrive in a seeded random order (the stream). Sample i carries the judge's score f_i
and a known inclusion probability pi_i; it is labelled iff xi_i = 1, with xi_i ~ Bernoulli(pi_i)
drawn before any label is seen. With w_i = xi_i / pi_i, each processed sample gives

    phi_i = lam_i f_i + w_i (Y_i - lam_i f_i),    E[phi_i | the past] = E[Y]

for any lam_i fixed before sample i (predictable). So the running mean of the phi estimates the
human-scale mean whatever the judge's bias. lam_i is 1 (plain PPI) until ``LAM_WARMUP`` labels
were seen, then the value that minimises the plug-in variance of the phi so far: with
a = w Y and b = (1 - w) f, phi = a + lam b, so lam = -Cov(a, b) / Var(b), clipped to [0, 1].

The interval is the two-sided asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha,
Kennedy & Ramdas (2023), "Time-uniform central limit theory and asymptotic confidence
sequences", Theorem 2.2 (the normal-mixture boundary):

    mean_t ± sd_t · sqrt(2 (t rho² + 1) / (t² rho²) · log(sqrt(t rho² + 1) / alpha))

with sd_t the plug-in standard deviation of phi_1..phi_t and rho² = (-2 log alpha +
log(-2 log alpha + 1)) / t_star, which makes it narrowest near t = t_star. It holds at every t
at once (asymptotically), so a person may look after every label and stop whenever they like.
The phi are bounded (|w| <= 1 / pi_min), which the theorem's moment condition needs.

``inclusion_probabilities`` spreads a labelling rate over samples by their expected share of the
variance; ``planned_rate`` picks the rate; ``active_path`` computes the sequence (vectorised over
runs: the last axis is the stream). The review page's script computes the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "FLOOR",
    "LAM_WARMUP",
    "MIN_LABELS",
    "MIX",
    "ActivePath",
    "active_path",
    "inclusion_probabilities",
    "margin",
    "planned_rate",
    "rho2",
]

MIX = 0.4  # the uniform share of each inclusion probability: pi_i >= MIX * rate
FLOOR = 0.5  # the residual (points) assumed where the judge recorded no disagreement
LAM_WARMUP = 10  # labels before lam is tuned; plain PPI (lam = 1) until then
MIN_LABELS = 20  # the page and the CLI say "stop" only after this many labels
Array = NDArray[np.float64]


@dataclass(frozen=True)
class ActivePath:
    """The estimate and sequence after each stream step (last axis), with the labels so far."""

    estimate: Array
    low: Array
    high: Array
    lam: Array
    labels: NDArray[np.int64]

    @property
    def half(self) -> Array:
        return (self.high - self.low) / 2.0


def rho2(alpha: float, t_star: float) -> float:
    """The mixture's rho² that makes the sequence narrowest near ``t_star``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a = -2.0 * math.log(alpha)
    return (a + math.log(a + 1.0)) / max(float(t_star), 1.0)


def margin(t: ArrayLike, alpha: float, t_star: float) -> Array:
    """The boundary per unit standard deviation at step(s) ``t`` (>= 1)."""
    r2 = rho2(alpha, t_star)
    tt = np.asarray(t, dtype=np.float64)
    return np.sqrt(2.0 * (tt * r2 + 1.0) / (tt**2 * r2) * np.log(np.sqrt(tt * r2 + 1.0) / alpha))


def inclusion_probabilities(
    uncertainty: ArrayLike | None, n: int, rate: float, *, mix: float = MIX
) -> Array:
    """Each sample's probability of being labelled: ``rate`` on average, a share ``mix``
    uniform and the rest proportional to g_i = sqrt(u_i² + FLOOR²), a guess of the judge's
    residual |Y - f| (the optimal rule is proportional to it). A missing uncertainty (None, NaN)
    counts as 0; with none at all every sample gets ``rate``. Capped at 1, the excess spread
    over the others."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    g = residual_guess(uncertainty, n)
    shape = (1.0 - mix) * g / g.mean() + mix
    pi = rate * shape
    for _ in range(50):  # a few rounds move the excess above 1 onto the others
        over = pi > 1.0
        if not over.any():
            break
        excess = float((pi[over] - 1.0).sum())
        pi[over] = 1.0
        free = pi < 1.0
        if not free.any():
            break
        pi[free] += excess * pi[free] / pi[free].sum()
    out: Array = np.minimum(pi, 1.0)
    return out


def residual_guess(uncertainty: ArrayLike | None, n: int) -> Array:
    """g_i = sqrt(u_i² + FLOOR²), u missing counted as 0."""
    if uncertainty is None:
        return np.full(n, FLOOR)
    u = np.nan_to_num(np.asarray(uncertainty, dtype=np.float64), nan=0.0)
    if u.shape != (n,):
        raise ValueError(f"{u.shape} uncertainties for {n} samples")
    return np.sqrt(u**2 + FLOOR**2)


def planned_rate(
    uncertainty: ArrayLike | None,
    judge: ArrayLike,
    h: float,
    alpha: float,
    *,
    mix: float = MIX,
) -> float:
    """The smallest labelling rate (a grid of 1/200 steps) whose projected sequence reaches
    ±0.9 h halfway through the stream (a margin for a wrong guess); 1 when none does. The
    projection takes Var(Y) ≈ Var(f) and the residual² ≈ g² (:func:`inclusion_probabilities`):
    a guess that decides only how many labels the plan queues, never whether its interval
    holds."""
    f = np.asarray(judge, dtype=np.float64)
    n = len(f)
    g2 = residual_guess(uncertainty, n) ** 2
    base, edge = float(f.var()), float(margin(max(n // 2, 1), alpha, n))
    for rate in np.arange(1, 201) / 200.0:
        pi = inclusion_probabilities(uncertainty, n, float(rate), mix=mix)
        var = base + float(((1.0 / pi - 1.0) * g2).mean())
        if math.sqrt(var) * edge <= 0.9 * h:
            return float(rate)
    return 1.0


def active_path(
    judge: ArrayLike,
    pi: ArrayLike,
    labelled: ArrayLike,
    labels: ArrayLike,
    alpha: float,
    t_star: float,
) -> ActivePath:
    """The estimate and confidence sequence after each step of the stream. ``judge`` (f),
    ``pi``, ``labelled`` (xi, 0/1) and ``labels`` (Y; any value, e.g. NaN, where xi = 0) share
    their shape, the stream on the last axis."""
    f = np.asarray(judge, dtype=np.float64)
    p = np.broadcast_to(np.asarray(pi, dtype=np.float64), f.shape)
    xi = np.asarray(labelled, dtype=np.float64)
    y = np.where(xi > 0, np.asarray(labels, dtype=np.float64), 0.0)
    w = xi / p
    a, b = w * y, (1.0 - w) * f
    lam = _predictable_lam(a, b, xi)
    phi = a + lam * b
    t = np.arange(1, f.shape[-1] + 1, dtype=np.float64)
    mean = np.cumsum(phi, axis=-1) / t
    var = np.maximum(np.cumsum(phi**2, axis=-1) / t - mean**2, 0.0)
    half = np.sqrt(var) * margin(t, alpha, t_star)
    count = np.cumsum(xi, axis=-1).astype(np.int64)
    return ActivePath(mean, mean - half, mean + half, lam, count)


def _predictable_lam(a: Array, b: Array, xi: Array) -> Array:
    """lam_t from the steps before t: 1 until LAM_WARMUP labels, then -Cov(a, b) / Var(b)
    (plug-in), clipped to [0, 1]; 1 where Var(b) is 0."""

    def before(x: Array) -> Array:
        s = np.cumsum(x, axis=-1)
        return np.concatenate([np.zeros_like(s[..., :1]), s[..., :-1]], axis=-1)

    k = np.maximum(before(np.ones_like(a)), 1.0)
    sa, sb = before(a) / k, before(b) / k
    cov = before(a * b) / k - sa * sb
    var = before(b * b) / k - sb * sb
    with np.errstate(divide="ignore", invalid="ignore"):
        tuned = np.clip(-cov / var, 0.0, 1.0)
    ready = (before(xi) >= LAM_WARMUP) & (var > 1e-12)
    return np.where(ready, tuned, 1.0)
