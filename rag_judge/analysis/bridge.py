"""A bridge between two judges: per rubric, the old judge's and the new judge's scores of the
same samples (a seeded subset of an old report, judged again by ``rag-judge bridge``), and a
map from the old scale to the new one fitted on them.

The map ``g`` is a least-squares line (``linear``) and, on a 1-5 scale, a monotone step map
(``isotonic``, PAVA), each with seeded bootstrap intervals of its parameters. The old report's
mean on the new judge's scale is estimated PPI-style, mean_N(g(old)) + mean_n(new − g(old)):
the second term corrects whatever error g has, so the estimate is unbiased for any g, and g
only decides how small its interval is. :mod:`rag_judge.analysis.judge_change` uses a bridge
to compare a baseline judged by the old judge with a run judged by the new one;
docs/judge-estimates.md ("Bridging a judge change") explains both.
"""

from __future__ import annotations

import math
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

__all__ = ["Bridge", "MapFit", "RubricBridge", "bridged_mean", "fit_map", "fit_rubric"]

Mapping = Literal["linear", "isotonic"]


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
    """One rubric's pairs on the subset and what was fitted to them. ``mapped_mean``: the old
    report's mean (over its ``n_old`` scored samples) on the new judge's scale, by the
    ``mapping`` chosen, with its bootstrap interval ``mapped_ci``."""

    metric: str
    scale: tuple[float, float | None] = (1.0, 5.0)
    ids: list[str]
    old: list[float]
    new: list[float]
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
        """new − g(old) on the subset: what the map leaves unexplained."""
        return np.asarray(self.new, dtype=np.float64) - self.chosen().predict(self.old)


class Bridge(BaseModel):
    """What ``rag-judge bridge`` stores: the old and the new judge's signatures of each
    bridged metric, the subset (``ids``, drawn by ``seed`` for ``n``), each rubric's pairs and
    fits, and what the re-judging cost."""

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


def bridged_mean(
    old_all: NDArray[np.float64], old: NDArray[np.float64], new: NDArray[np.float64], g: MapFit
) -> float:
    """The old report's mean on the new scale: mean_N(g(old)) + mean_n(new − g(old))."""
    return float(g.predict(old_all).mean() + (new - g.predict(old)).mean())


def fit_rubric(
    metric: str,
    ids: list[str],
    old: ArrayLike,
    new: ArrayLike,
    old_all: ArrayLike,
    *,
    scale: tuple[float, float | None] = (1.0, 5.0),
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    monotone: bool | None = None,
) -> RubricBridge:
    """Fit the maps of one rubric's pairs (``old``, ``new``, index-aligned with ``ids``) and
    their bootstrap intervals; ``old_all``: every old score of the old report. The intervals
    resample the pairs (refitting each map) and, for the mapped mean, the old scores too.
    ``monotone``: fit and choose the isotonic map too (default: on a 1-5 scale)."""
    o, n, full = (np.asarray(v, dtype=np.float64) for v in (old, new, old_all))
    if len(o) < 3:
        raise ConfigError(f"{metric}: {len(o)} pairs scored by both judges; a bridge needs 3")
    five = is_five_point(scale)
    steps = five if monotone is None else monotone
    kinds: list[Mapping] = ["linear", "isotonic"] if steps else ["linear"]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(o), size=(resamples, len(o)))
    rows_all = rng.integers(0, len(full), size=(resamples, len(full)))
    fits: dict[str, MapFit] = {}
    means: dict[str, list[float]] = {}
    for kind in kinds:
        point = fit_map(kind, o, n)
        draws = [fit_map(kind, o[r], n[r]) for r in rows]
        means[kind] = [
            bridged_mean(full[ra], o[r], n[r], g) for g, r, ra in zip(draws, rows, rows_all)
        ]
        fits[kind] = point.model_copy(update={"ci": _param_cis(point, draws, confidence)})
    mapping: Mapping = "isotonic" if steps else "linear"
    chosen = fits[mapping]
    lo, hi = np.quantile(means[mapping], [(1 - confidence) / 2, (1 + confidence) / 2])
    return RubricBridge(
        metric=metric, scale=scale, ids=ids, old=o.tolist(), new=n.tolist(),
        linear=fits["linear"], isotonic=fits.get("isotonic"), mapping=mapping,
        kappa=_kappa(o, n) if five else None, alpha=krippendorff_alpha_interval(o, n),
        n_old=len(full), old_mean=float(full.mean()) if len(full) else None,
        mapped_mean=bridged_mean(full, o, n, chosen), mapped_ci=(float(lo), float(hi)),
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
    delta: NDArray[np.float64],
    residuals: NDArray[np.float64],
    df_fit: int | NDArray[np.int64],
    confidence: float = 0.95,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """NEW − bridged BASE and its standard error and t-quantile, along the last axis (a
    simulation passes many datasets at once). ``delta``: new − g(base old) over the N paired
    samples; ``residuals``: new − g(old) over the bridge's n pairs, g fitted with ``df_fit``
    parameters. The difference is mean_N(delta) − mean_n(residuals); se² is the new run's
    part, var(delta)/N, plus the bridge's, Σ residuals² /((n − df_fit) n): added as if
    independent, which overstates it when the two runs share their questions."""
    big, small = delta.shape[-1], residuals.shape[-1]
    df = np.maximum(small - np.asarray(df_fit), 1)
    centred = residuals - residuals.mean(axis=-1, keepdims=True)
    var_bridge = (centred**2).sum(axis=-1) / df
    var_new = delta.var(axis=-1, ddof=1) if big > 1 else np.zeros(delta.shape[:-1])
    se = np.sqrt(var_new / big + var_bridge / small)
    diff = delta.mean(axis=-1) - residuals.mean(axis=-1)
    quantile = np.vectorize(lambda d: t_value(confidence, float(d)))(df)
    return diff, se, np.asarray(quantile, dtype=np.float64)


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
