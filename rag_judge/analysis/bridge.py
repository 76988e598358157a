"""A bridge between two judges: per rubric, the old judge's and the new judge's scores of the
same samples (a seeded subset of an old report, judged again by ``rag-judge bridge``), and a
map from the old scale to the new one fitted on them.

The map ``g`` is a least-squares line (``linear``) and, on a 1-5 scale, a monotone step map
(``isotonic``, PAVA), each with seeded bootstrap intervals of its parameters. The old report's
mean on the new judge's scale is estimated PPI-style with cross-fitting: the pairs are split
into seeded folds; g_k is fitted without fold k; the rectifier new − g_k(old) is taken on fold
k itself. A map never scores the pairs it was fitted on, so the rectifier's mean is an honest
estimate of g's error and the estimate is unbiased for any g (a map fitted on all the pairs
keeps their mean: its residuals average 0 and would correct nothing).
:mod:`rag_judge.analysis.judge_change` uses a bridge to compare a baseline judged by the old
judge with a run judged by the new one; docs/judge-estimates.md ("Bridging a judge change")
explains both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field

from rag_judge.analysis.calibration import krippendorff_alpha_interval, quadratic_kappa
from rag_judge.errors import ConfigError
from rag_judge.report.model import Signature, Usage
from rag_judge.stats.isotonic import isotonic_fit, isotonic_predict, linear_fit
from rag_judge.stats.student import t_value

__all__ = [
    "FOLDS",
    "MIN_PAIRS",
    "Bridge",
    "CrossFit",
    "MapFit",
    "RubricBridge",
    "assign_folds",
    "bridged_difference",
    "cross_fit",
    "fit_map",
    "fit_rubric",
]

Mapping = Literal["linear", "isotonic"]
FOLDS = 5  # cross-fitting folds (fewer when there are fewer pairs)
# Fewer pairs than this: the interval's coverage was not measured (docs/judge-estimates.md
# simulates 8, 20 and 50 pairs); ``rag-judge bridge`` warns.
MIN_PAIRS = 8


class MapFit(BaseModel):
    """One fitted old -> new map. ``linear``: ``intercept`` + ``slope`` · x; ``isotonic``:
    ``values`` at ``knots``, linear between them and flat beyond. ``df``: the parameters
    fitted (2 for a line, the distinct fitted values of a step map). ``ci``: each parameter's
    seeded bootstrap interval (``intercept``, ``slope``; ``g(x)`` at each knot)."""

    model_config = ConfigDict(frozen=True)

    kind: Mapping
    intercept: float = 0.0
    slope: float = 0.0
    knots: list[float] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)
    df: int = 2
    ci: dict[str, tuple[float, float]] = Field(default_factory=dict)

    def predict(self, x: ArrayLike) -> NDArray[np.float64]:
        xs = np.asarray(x, dtype=np.float64)
        if self.kind == "linear":
            return self.intercept + self.slope * xs
        return isotonic_predict(self.knots, self.values, xs)


class RubricBridge(BaseModel):
    """One rubric's pairs on the subset and what was fitted to them. ``fold``: each pair's
    cross-fitting fold. ``mapped_mean``: the old report's mean (over its ``n_old`` scored
    samples) on the new judge's scale, by the ``mapping`` chosen and cross-fitted, with its t
    interval ``mapped_ci``."""

    metric: str
    scale: tuple[float, float | None] = (1.0, 5.0)
    ids: list[str]
    old: list[float]
    new: list[float]
    fold: list[int] = Field(default_factory=list)
    linear: MapFit
    isotonic: MapFit | None = None
    mapping: Mapping = "linear"
    kappa: float | None = None  # quadratic-weighted, on a 1-5 scale only
    alpha: float | None = None  # Krippendorff's, interval metric
    n_old: int = 0
    old_mean: float | None = None
    mapped_mean: float | None = None
    mapped_ci: tuple[float, float] | None = None

    def chosen(self) -> MapFit:
        return self.isotonic if self.mapping == "isotonic" and self.isotonic else self.linear

    def residuals(self) -> NDArray[np.float64]:
        """new − g(old) on the subset, g fitted on every pair: what the map leaves unexplained
        (their mean is 0; the estimates use :meth:`cross_fit`'s out-of-fold residuals)."""
        return np.asarray(self.new, dtype=np.float64) - self.chosen().predict(self.old)

    def cross_fit(self) -> CrossFit:
        """The chosen kind of map cross-fitted over the stored folds."""
        fold = self.fold or [i % min(FOLDS, len(self.old)) for i in range(len(self.old))]
        return cross_fit(self.chosen().kind, self.old, self.new, fold, self.ids)


class Bridge(BaseModel):
    """What ``rag-judge bridge`` stores: the old and the new judge's signatures of each
    bridged metric, the subset (``ids``, drawn by ``seed`` for ``n``), each rubric's pairs and
    fits, the judge metrics left out (``skipped``, with why) and what the re-judging cost."""

    format: Literal["rag-judge-bridge/1"] = "rag-judge-bridge/1"
    old_report: str
    new_config: str
    seed: int
    n: int
    confidence: float = 0.95
    resamples: int = 2000
    ids: list[str]
    old_signatures: dict[str, Signature]
    new_signatures: dict[str, Signature]
    rubrics: dict[str, RubricBridge]
    skipped: dict[str, str] = Field(default_factory=dict)  # metric -> why it is not bridged
    usage: Usage = Field(default_factory=Usage)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Bridge:
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the bridge {path}: {exc}") from None


def is_five_point(scale: tuple[float, float | None]) -> bool:
    return tuple(scale) == (1.0, 5.0)


def fit_map(kind: Mapping, old: NDArray[np.float64], new: NDArray[np.float64]) -> MapFit:
    """``kind``'s least-squares map of ``new`` on ``old`` (no intervals)."""
    if kind == "linear":
        intercept, slope = linear_fit(old, new)
        return MapFit(kind=kind, intercept=float(intercept), slope=float(slope))
    knots, values, df = isotonic_fit(old, new)
    return MapFit(kind=kind, knots=knots.tolist(), values=values.tolist(), df=df)


def assign_folds(n: int, seed: int, folds: int = FOLDS) -> list[int]:
    """Each of ``n`` pairs' fold: ``min(folds, n)`` folds of sizes differing by at most one,
    in a seeded random order."""
    k = max(1, min(folds, n))
    order = np.random.default_rng(seed).permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) % k
    return [int(v) for v in out]


@dataclass(frozen=True)
class CrossFit:
    """``maps[k]``: the map fitted without fold k; ``residuals``: new − g_k(old) of each pair
    of fold k (out of fold); ``ids``: the pairs' sample ids, so that a pair's own sample is
    mapped by the map that did not see it."""

    maps: list[MapFit]
    fold: NDArray[np.int64]
    residuals: NDArray[np.float64]
    ids: list[str]

    def predict(self, x: ArrayLike, ids: Sequence[str] | None = None) -> NDArray[np.float64]:
        """h(x): a sample of the subset (by ``ids``) through the map fitted without its fold,
        any other through the average of the fold maps (none of which saw it)."""
        xs = np.asarray(x, dtype=np.float64)
        out = np.mean([g.predict(xs) for g in self.maps], axis=0)
        if ids is not None:
            where = {i: k for k, i in enumerate(self.ids)}
            for j, i in enumerate(ids):
                if i in where:
                    out[j] = self.maps[int(self.fold[where[i]])].predict(xs[j : j + 1])[0]
        return np.asarray(out, dtype=np.float64)


def cross_fit(
    kind: Mapping, old: ArrayLike, new: ArrayLike, fold: Sequence[int], ids: Sequence[str] = ()
) -> CrossFit:
    """``kind``'s map fitted once per fold without it, and the out-of-fold residuals. With a
    single fold (one pair) the map is the pair's own, a constant: its residual is 0."""
    o, n = (np.asarray(v, dtype=np.float64) for v in (old, new))
    folds = np.asarray(fold, dtype=np.int64)
    maps: list[MapFit] = []
    residuals = np.zeros(len(o))
    for k in range(int(folds.max()) + 1 if len(folds) else 0):
        out = folds == k
        train = ~out if (~out).any() else out
        g = fit_map(kind, o[train], n[train])
        maps.append(g)
        residuals[out] = n[out] - g.predict(o[out])
    return CrossFit(maps, folds, residuals, list(ids))


def fit_rubric(
    metric: str,
    ids: list[str],
    old: ArrayLike,
    new: ArrayLike,
    old_all: ArrayLike,
    *,
    all_ids: Sequence[str] | None = None,
    scale: tuple[float, float | None] = (1.0, 5.0),
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    monotone: bool | None = None,
) -> RubricBridge:
    """Fit the maps of one rubric's pairs (``old``, ``new``, index-aligned with ``ids``) and
    their parameters' bootstrap intervals (resampling the pairs, refitting each map);
    ``old_all``: every old score of the old report (their ids ``all_ids``, so that the subset's
    own samples are mapped out of fold). The mapped mean is cross-fitted over seeded folds,
    with a t interval (:func:`bridged_difference` with no new run). ``monotone``: fit and
    choose the isotonic map too (default: on a 1-5 scale)."""
    o, n, full = (np.asarray(v, dtype=np.float64) for v in (old, new, old_all))
    if len(o) < 3:
        raise ConfigError(f"{metric}: {len(o)} pairs scored by both judges; a bridge needs 3")
    five = is_five_point(scale)
    steps = five if monotone is None else monotone
    kinds: list[Mapping] = ["linear", "isotonic"] if steps else ["linear"]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(o), size=(resamples, len(o)))
    fits: dict[str, MapFit] = {}
    for kind in kinds:
        point = fit_map(kind, o, n)
        draws = [fit_map(kind, o[r], n[r]) for r in rows]
        fits[kind] = point.model_copy(update={"ci": _param_cis(point, draws, confidence)})
    mapping: Mapping = "isotonic" if steps else "linear"
    fold = assign_folds(len(o), seed)
    cf = cross_fit(mapping, o, n, fold, ids)
    mapped = cf.predict(full, all_ids)
    mean, se, q = (float(v) for v in bridged_difference(-mapped, cf.residuals, confidence))
    ok = len(full) > 0 and math.isfinite(se)
    return RubricBridge(
        metric=metric, scale=scale, ids=ids, old=o.tolist(), new=n.tolist(), fold=fold,
        linear=fits["linear"], isotonic=fits.get("isotonic"), mapping=mapping,
        kappa=_kappa(o, n) if five else None, alpha=krippendorff_alpha_interval(o, n),
        n_old=len(full), old_mean=float(full.mean()) if len(full) else None,
        mapped_mean=-mean if ok else None,
        mapped_ci=(-mean - q * se, -mean + q * se) if ok else None,
    )  # fmt: skip


def _param_cis(
    point: MapFit, draws: list[MapFit], confidence: float
) -> dict[str, tuple[float, float]]:
    q = [(1 - confidence) / 2, (1 + confidence) / 2]
    if point.kind == "linear":
        params = {"intercept": [d.intercept for d in draws], "slope": [d.slope for d in draws]}
    else:  # each draw's map read at the point fit's knots
        at = np.array([d.predict(point.knots) for d in draws])
        params = {f"g({k:g})": at[:, j].tolist() for j, k in enumerate(point.knots)}
    return {
        k: (float(np.quantile(v, q[0])), float(np.quantile(v, q[1]))) for k, v in params.items()
    }


def _kappa(old: NDArray[np.float64], new: NDArray[np.float64]) -> float | None:
    # Scores of n > 1 samples are means: rounded to the nearest grade for the categories.
    a, b = (np.clip(np.floor(v + 0.5), 1, 5).astype(np.int64) for v in (old, new))
    return quadratic_kappa(a, b)


# ---- the bridged difference -------------------------------------------------------------------


def bridged_difference(
    delta: NDArray[np.float64], residuals: NDArray[np.float64], confidence: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """NEW − bridged BASE and its standard error and t-quantile, along the last axis (a
    simulation passes many datasets at once). ``delta``: new − h(base old) over the N paired
    samples (h: :meth:`CrossFit.predict`); ``residuals``: the bridge's n out-of-fold residuals
    new − g_k(old). The difference is mean_N(delta) − mean_n(residuals); se² is the new run's
    part, var(delta)/N, plus the bridge's, var(residuals)/n, added as if independent (when
    both runs answered the same questions their covariance is usually positive, and leaving
    it out overstates se); t with n − 1 degrees of freedom. ``delta`` = −h(old) alone gives
    −(BASE's mean on the new scale)."""
    big, small = delta.shape[-1], residuals.shape[-1]
    var_bridge = residuals.var(axis=-1, ddof=1) if small > 1 else np.zeros(delta.shape[:-1])
    var_new = delta.var(axis=-1, ddof=1) if big > 1 else np.zeros(delta.shape[:-1])
    se = np.sqrt(var_new / big + var_bridge / small)
    diff = delta.mean(axis=-1) - residuals.mean(axis=-1)
    quantile = np.full(np.shape(diff), t_value(confidence, max(small - 1, 1)))
    return diff, se, quantile


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
