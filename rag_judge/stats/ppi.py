"""Prediction-powered inference: a mean on the human scale from a judge's scores on every sample
and human labels on a random slice (PPI++: Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient
Prediction-Powered Inference", arXiv:2311.01453), and the Rogan–Gladen pass rate.

With n labels y and the judge's f on them, and N more samples the judge alone scored:

    θ̂ = λ·mean_N(f) + mean_n(y − λ f),   se² = λ²·Var_N(f) / N + Var_n(y − λ f) / n

unbiased for E[y] whatever the judge's bias, for any fixed λ. The power-tuned λ̂ (which
minimises se² to first order) is

    λ̂ = Cov_n(y, f) / ((1 + n/N) · Var_{n+N}(f)),   clipped to [0, 1].

θ̂ and λ̂ are those of the authors' reference package ppi_py (``ppi_mean_ci`` and
``_calc_lam_glm``, github.com/aangelopoulos/ppi_py, ppi_py/ppi.py): Cov is plug-in (ddof 0),
Var_{n+N}(f) over every judge score ddof 1. The interval is θ̂ ± q·se by one of two methods
(:class:`PPIMethod`):

- ``t`` (the default): small-sample. With λ tuned on the labels, y − λ̂ f is the residual of a
  fit with two parameters (its mean and λ̂), so Var_n(y − λ f) divides by n − 2 and q is
  Student's t quantile with n − 2 degrees of freedom (n − 1 and n − 1 with λ fixed); the judge's
  variance in the second term is Var_{n+N}(f) (ddof 1) over every judge score, the same
  population on a random slice, defined even for N = 1. ppi_py's interval covers the mean in
  about 90% of 15-label datasets at 95%; this one in 94% (``tests/stats/test_ppi_coverage.py``).
- ``ppi_py``: the reference package's interval exactly: the variances of se² plug-in (ddof 0)
  and q the normal quantile.

With λ = 0 the estimate, se and interval are the labels-only (classical) ones exactly, under
either method (the classical interval of ``t`` is the t interval of the labels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rag_judge.errors import ConfigError
from rag_judge.stats.student import t_value

__all__ = [
    "MeanCI",
    "PPIMean",
    "PPIMethod",
    "RoganGladenRate",
    "as_method",
    "mean_ci",
    "normal_mean_ci",
    "power_tuned_lambda",
    "ppi_mean",
    "rogan_gladen",
    "z_value",
]


class PPIMethod(str, Enum):
    """How a PPI++ interval (and the labels' and the judge's beside it) is computed: see the
    module's docstring."""

    T = "t"  # small-sample: variances with their degrees of freedom, Student's t quantile
    PPI_PY = "ppi_py"  # the reference package's normal interval, exactly


class MeanCI(NamedTuple):
    """A mean with its standard error and normal interval; None where undefined."""

    mean: float | None
    se: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class PPIMean:
    """A PPI++ mean beside the labels-only (classical) one. ``ess``: the labels the classical
    estimate would need for PPI's variance, Var_n(y) / se²; ``ess_gain`` = ess / n. None where
    undefined: fewer than 2 labels, or (``ess``) a zero variance on either side."""

    estimate: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    lam: float | None
    n_labelled: int
    n_unlabelled: int
    classical_mean: float | None
    classical_se: float | None
    classical_ci_low: float | None
    classical_ci_high: float | None
    ess: float | None
    ess_gain: float | None


@dataclass(frozen=True)
class RoganGladenRate:
    """A pass rate corrected for the judge's errors; see :func:`rogan_gladen`."""

    apparent: float | None
    sensitivity: float | None
    specificity: float | None
    corrected: float | None
    ci_low: float | None
    ci_high: float | None


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.959964 for 0.95)."""
    _check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def normal_mean_ci(values: ArrayLike, *, confidence: float = 0.95) -> MeanCI:
    """The mean of ``values`` and its normal interval, se = std (ddof 0) / √n as ppi_py's
    classical interval; the mean alone for one value, nothing for none."""
    x = _vector(values, "values")
    z = z_value(confidence)
    if len(x) == 0:
        return MeanCI(None, None, None, None)
    mean = float(x.mean())
    if len(x) < 2:
        return MeanCI(mean, None, None, None)
    se = math.sqrt(float(x.var()) / len(x))  # as ppi_mean writes it: λ = 0 gives this exactly
    return MeanCI(mean, se, mean - z * se, mean + z * se)


def mean_ci(
    values: ArrayLike, *, confidence: float = 0.95, method: PPIMethod | str = PPIMethod.T
) -> MeanCI:
    """The mean of ``values`` and its interval: with ``t``, se = std (ddof 1) / √n and
    Student's t quantile with n − 1 degrees of freedom; with ``ppi_py``,
    :func:`normal_mean_ci`."""
    if as_method(method) is PPIMethod.PPI_PY:
        return normal_mean_ci(values, confidence=confidence)
    x = _vector(values, "values")
    _check_confidence(confidence)
    if len(x) < 2:
        return MeanCI(float(x.mean()) if len(x) else None, None, None, None)
    mean = float(x.mean())
    se = math.sqrt(float(x.var(ddof=1)) / len(x))
    q = t_value(confidence, len(x) - 1)
    return MeanCI(mean, se, mean - q * se, mean + q * se)


def as_method(method: PPIMethod | str) -> PPIMethod:
    """``method`` as a :class:`PPIMethod`; an unknown name is refused, naming the legal ones."""
    try:
        return PPIMethod(method)
    except ValueError:
        legal = ", ".join(m.value for m in PPIMethod)
        raise ConfigError(f"method must be one of {legal}, got {method!r}") from None


def power_tuned_lambda(
    y_labelled: ArrayLike, f_labelled: ArrayLike, f_unlabelled: ArrayLike
) -> float | None:
    """PPI++'s λ̂ for a mean, clipped to [0, 1]; None with fewer than 2 labels. 0 when there is
    nothing to borrow from the judge: no unlabelled sample, or every judge score the same."""
    y, f, fu = _inputs(y_labelled, f_labelled, f_unlabelled)
    if len(y) < 2:
        return None
    return _tuned(y, f, fu)[0]


def _tuned(
    y: NDArray[np.float64], f: NDArray[np.float64], fu: NDArray[np.float64]
) -> tuple[float, bool]:
    """λ̂ and whether it was fitted to the labels (False where it is 0 by rule)."""
    n, big_n = len(y), len(fu)
    var_all = float(np.concatenate([f, fu]).var(ddof=1))
    if big_n == 0 or var_all == 0.0:
        return 0.0, False
    cov = float(((y - y.mean()) * (f - f.mean())).mean())
    return float(np.clip(cov / ((1.0 + n / big_n) * var_all), 0.0, 1.0)), True


def ppi_mean(
    y_labelled: ArrayLike,
    f_labelled: ArrayLike,
    f_unlabelled: ArrayLike,
    *,
    confidence: float = 0.95,
    lam: float | None = None,
    method: PPIMethod | str = PPIMethod.T,
) -> PPIMean:
    """PPI++ estimate of E[y] with its ``confidence`` interval by ``method`` (``t``,
    small-sample, or ``ppi_py``, the reference package's; the estimate is the same); ``lam``
    fixes λ (1: plain PPI, 0: the labels alone), None tunes it (:func:`power_tuned_lambda`).
    With no unlabelled sample there is nothing to borrow, and λ is 0 whatever ``lam`` says;
    with ``t`` and 2 labels, fitting λ would leave no degree of freedom, and λ is 0 too."""
    y, f, fu = _inputs(y_labelled, f_labelled, f_unlabelled)
    method = as_method(method)
    if lam is not None and not (math.isfinite(lam) and 0.0 <= lam <= 1.0):
        raise ConfigError(f"lam must be a number in [0, 1], got {lam!r}")
    n, big_n = len(y), len(fu)
    classical = mean_ci(y, confidence=confidence, method=method)
    if n < 2:
        return PPIMean(None, None, None, None, None, n, big_n, *classical, None, None)
    small = method is PPIMethod.T
    if big_n == 0:
        lam_, fitted = 0.0, False
    elif lam is not None:
        lam_, fitted = lam, False
    elif small and n < 3:
        lam_, fitted = 0.0, False
    else:
        lam_, fitted = _tuned(y, f, fu)
    rectifier = y - lam_ * f
    imputed = lam_ * float(fu.mean()) if big_n else 0.0
    estimate = imputed + float(rectifier.mean())
    if small:
        ddof = 2 if fitted else 1
        judge_var = float(np.concatenate([f, fu]).var(ddof=1)) if big_n else 0.0
        var = float(rectifier.var(ddof=ddof)) / n + (lam_**2 * judge_var / big_n if big_n else 0)
        q = t_value(confidence, n - ddof)
        var_y = float(y.var(ddof=1))
    else:
        var = float(rectifier.var()) / n + (lam_**2 * float(fu.var()) / big_n if big_n else 0.0)
        q = z_value(confidence)
        var_y = float(y.var())
    se = math.sqrt(var)
    ess = var_y / var if var > 0 and var_y > 0 else None
    return PPIMean(
        estimate=estimate,
        se=se,
        ci_low=estimate - q * se,
        ci_high=estimate + q * se,
        lam=lam_,
        n_labelled=n,
        n_unlabelled=big_n,
        classical_mean=classical.mean,
        classical_se=classical.se,
        classical_ci_low=classical.low,
        classical_ci_high=classical.high,
        ess=ess,
        ess_gain=None if ess is None else ess / n,
    )


def rogan_gladen(
    judge_pass_all: ArrayLike,
    judge_pass_labelled: ArrayLike,
    human_pass_labelled: ArrayLike,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> RoganGladenRate:
    """The judge's pass rate corrected for its errors (Rogan & Gladen 1978).

    ``apparent``: the judge's pass rate over every scored sample (``judge_pass_all``, the
    labelled ones included); sensitivity and specificity: the judge's pass rate among the
    labelled samples a person passed, its fail rate among those a person failed; corrected =
    (apparent + spec − 1) / (sens + spec − 1), clipped to [0, 1]. None when a class is absent
    from the labels or sens + spec − 1 ≤ 0 (the judge is no better than chance).

    Verdicts are booleans (or numbers, non-zero passing).

    Interval: a seeded percentile bootstrap that resamples the labelled pairs (for sens and
    spec) and, independently, every scored sample (for the apparent rate). Resampling m 0/1
    values with replacement draws a Binomial(m, p̂) count, and resampling the pairs draws a
    Multinomial over the four cells of the judge-by-person table: those are drawn directly (the
    same distribution, without an m-wide matrix per resample). Resamples in which the correction
    is undefined are left out; the interval is None when that is half of them or more.
    """
    every = _flags(judge_pass_all, "judge_pass_all")
    judge = _flags(judge_pass_labelled, "judge_pass_labelled")
    human = _flags(human_pass_labelled, "human_pass_labelled")
    if len(judge) != len(human):
        raise ValueError(f"{len(judge)} judge verdicts for {len(human)} human labels")
    z_value(confidence)  # checks it
    if len(every) == 0:
        return RoganGladenRate(None, None, None, None, None, None)
    apparent = float(every.mean())
    # the judge-by-person table: TP, FN (person passed), FP, TN (person failed)
    tp, fn = np.sum(judge & human), np.sum(~judge & human)
    fp, tn = np.sum(judge & ~human), np.sum(~judge & ~human)
    cells = np.array([tp, fn, fp, tn], dtype=np.float64)
    sens, spec, corrected = _correct(np.array([apparent]), cells[None, :])
    if not np.isfinite(corrected[0]):
        sens_ = float(sens[0]) if np.isfinite(sens[0]) else None
        spec_ = float(spec[0]) if np.isfinite(spec[0]) else None
        return RoganGladenRate(apparent, sens_, spec_, None, None, None)
    low = high = None
    if resamples > 0:
        rng = np.random.default_rng(seed)
        boot_apparent = rng.binomial(len(every), apparent, size=resamples) / len(every)
        boot_cells = rng.multinomial(len(judge), cells / len(judge), size=resamples)
        boot = _correct(boot_apparent, boot_cells.astype(np.float64))[2]
        boot = boot[np.isfinite(boot)]
        if 2 * len(boot) > resamples:
            alpha = (1.0 - confidence) / 2.0
            low, high = (float(q) for q in np.quantile(boot, [alpha, 1.0 - alpha]))
    return RoganGladenRate(apparent, float(sens[0]), float(spec[0]), float(corrected[0]), low, high)


def _correct(
    apparent: NDArray[np.float64], cells: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Row-wise sens, spec and the clipped corrected rate of (apparent, [TP, FN, FP, TN]);
    NaN where undefined."""
    passed, failed = cells[:, 0] + cells[:, 1], cells[:, 2] + cells[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        sens = np.where(passed > 0, cells[:, 0] / passed, np.nan)
        spec = np.where(failed > 0, cells[:, 3] / failed, np.nan)
        youden = sens + spec - 1.0
        corrected = np.where(youden > 0, (apparent + spec - 1.0) / youden, np.nan)
    return sens, spec, np.clip(corrected, 0.0, 1.0)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")


def _vector(values: ArrayLike, name: str) -> NDArray[np.float64]:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: every value must be finite (leave unscored samples out)")
    return x


def _flags(values: ArrayLike, name: str) -> NDArray[np.bool_]:
    return _vector(values, name).astype(bool)


def _inputs(
    y: ArrayLike, f: ArrayLike, fu: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    yv, fv = _vector(y, "y_labelled"), _vector(f, "f_labelled")
    if len(yv) != len(fv):
        raise ValueError(f"{len(yv)} labels y_labelled for {len(fv)} judge scores f_labelled")
    return yv, fv, _vector(fu, "f_unlabelled")
