"""Power before the run: ``rag-judge plan``. How many paired samples a comparison needs to
detect a drop of a given size, per metric, from a baseline report (docs/power.md).

The closed form is the normal approximation of a paired test:
``n = ((z_{1-a/2} + z_{power}) * sd_diff / mde)^2``, rounded up (``z_{1-a}`` one-sided). Read
backwards at the dataset's own n, it gives the smallest drop that dataset can detect.

The sd of the paired differences comes from one of two places. Given a second report of the
same samples (``new``), it is the sd of the actual differences. Given the baseline alone, it
is ``sd * sqrt(2 * (1 - rho))``: the variance of a difference of two runs whose per-sample
scores correlate by ``rho`` (:data:`DEFAULT_RHO` unless told).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from rag_judge.analysis.paired import paired
from rag_judge.errors import ConfigError
from rag_judge.report.format import MISSING, Column, Table, amount, num, short
from rag_judge.report.model import Report
from rag_judge.report.result import level_of

__all__ = [
    "DEFAULT_RHO",
    "MetricPlan",
    "PlanOptions",
    "PlanResult",
    "detectable_effect",
    "plan_reports",
    "plan_runs",
    "plan_table",
    "required_n",
    "sd_of_difference",
]

# G*Power's default correlation between repeated measures. At 0.5 the difference of two runs
# varies as much as one run's scores do (sd_diff = sd): between independent runs (rho = 0,
# twice the variance) and two near-identical systems (rho near 1, little variance at all).
DEFAULT_RHO = 0.5

Sides = Literal["two", "one"]


@dataclass(frozen=True)
class PlanOptions:
    """The drop to detect (in the metric's own units), the power, the test's level and sides,
    and, for a baseline alone, the assumed correlation ``rho`` of two runs' scores."""

    mde: float
    power: float = 0.8
    alpha: float = 0.05
    sides: Sides = "two"
    rho: float = DEFAULT_RHO

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mde) and self.mde > 0):
            raise ConfigError(f"mde must be a positive number, got {self.mde!r}")
        # Below 50% power z_power is negative: a plan that expects to miss the drop.
        if not 0.5 <= self.power < 1.0:
            raise ConfigError(f"power must be in [0.5, 1), got {self.power!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"alpha must be between 0 and 1 (exclusive), got {self.alpha!r}")
        if self.sides not in ("two", "one"):
            raise ConfigError(f"sides must be 'two' or 'one', got {self.sides!r}")
        if not -1.0 <= self.rho < 1.0:
            raise ConfigError(f"rho must be in [-1, 1), got {self.rho!r}")

    def z_sum(self) -> float:
        """``z_{1-a/2} + z_{power}`` (``z_{1-a}`` for a one-sided test)."""
        tail = self.alpha / 2 if self.sides == "two" else self.alpha
        return NormalDist().inv_cdf(1 - tail) + NormalDist().inv_cdf(self.power)


def sd_of_difference(sd: float, rho: float) -> float:
    """The sd of a difference of two runs with per-sample sd ``sd`` and correlation ``rho``:
    ``sqrt(2 * sd^2 * (1 - rho))``."""
    return math.sqrt(2.0 * sd * sd * (1.0 - rho))


def required_n(sd_diff: float, options: PlanOptions) -> int:
    """Paired samples needed to detect a drop of ``options.mde`` at ``options.power``."""
    exact = (options.z_sum() * sd_diff / options.mde) ** 2
    # Rounded to 9 places first: a product that is a whole number up to float error stays one.
    return max(1, math.ceil(round(exact, 9)))


def detectable_effect(sd_diff: float, n: int, options: PlanOptions) -> float:
    """The smallest drop ``n`` paired samples detect at ``options.power``."""
    return options.z_sum() * sd_diff / math.sqrt(n)


@dataclass
class MetricPlan:
    """One metric's plan. ``n``: the samples the dataset scored (pairs, given a second report).
    ``sd``: the baseline's per-sample sd; ``sd_diff``: the paired differences' sd (measured or
    assumed). ``needed`` and ``detectable`` are None when there is no variance to plan from:
    ``reason`` then says why."""

    metric: str
    n: int
    sd: float | None
    sd_diff: float | None
    needed: int | None
    detectable: float | None  # the smallest drop detectable at n
    enough: bool | None  # n >= needed
    reason: str | None = None

    def message(self, options: PlanOptions) -> str:
        """The plan in one sentence, as the table's notes say it."""
        if self.reason is not None or self.needed is None or self.detectable is None:
            return f"{self.metric}: cannot plan: {self.reason}"
        drop, power = short(options.mde, 6), f"{short(options.power * 100, 1)}%"
        head = (
            f"{self.metric}: needs {amount(self.needed)} samples; the dataset has {amount(self.n)}"
        )
        if self.enough:
            tail = f"(and {short(self.detectable, 4)} with all {amount(self.n)})"
            return f"{head}: it can detect a {drop} drop at {power} power {tail}"
        return (
            f"{head}: it cannot detect a {drop} drop at {power} power; "
            f"it can detect {short(self.detectable, 4)}"
        )


@dataclass
class PlanResult:
    """Every metric's plan, with where its variance came from."""

    baseline: str
    options: PlanOptions
    new: str | None = None  # the second report whose paired differences gave sd_diff
    metrics: list[MetricPlan] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # metrics scored per turn or step

    @property
    def variance(self) -> str:
        """``paired`` (measured on a second report) or ``assumed`` (from ``rho``)."""
        return "assumed" if self.new is None else "paired"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``rag-judge plan --format json``."""
        o = self.options
        return {
            "baseline": self.baseline,
            "new": self.new,
            "variance": self.variance,
            "mde": o.mde,
            "power": o.power,
            "alpha": o.alpha,
            "sides": o.sides,
            "rho": o.rho if self.new is None else None,
            "metrics": [{**asdict(m), "message": m.message(o)} for m in self.metrics],
            "skipped": self.skipped,
        }


def _sd(values: np.ndarray[Any, np.dtype[np.float64]]) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else None


def _plan_metric(metric: str, base: Report, new: Report | None, options: PlanOptions) -> MetricPlan:
    values = np.array(
        [v for v in base.column(metric).values() if v is not None and math.isfinite(v)],
        dtype=np.float64,
    )
    sd = _sd(values)
    if new is None:
        n, sd_diff = len(values), None if sd is None else sd_of_difference(sd, options.rho)
    else:
        pairs = paired(base, new, metric)
        n, sd_diff = len(pairs.base), _sd(pairs.new - pairs.base)
    if sd_diff is None:
        what = "pairs" if new is not None else "scored samples"
        return MetricPlan(metric, n, sd, None, None, None, None, f"{n} {what}, fewer than 2")
    if sd_diff == 0:
        what = "paired differences are" if new is not None else "baseline's values are"
        return MetricPlan(metric, n, sd, 0.0, None, None, None, f"the {what} all equal")
    needed = required_n(sd_diff, options)
    detectable = detectable_effect(sd_diff, n, options)
    return MetricPlan(metric, n, sd, sd_diff, needed, detectable, n >= needed)


def plan_reports(
    base: Report,
    options: PlanOptions,
    *,
    new: Report | None = None,
    metrics: list[str] | None = None,
    base_label: str = "BASELINE",
    new_label: str = "NEW",
) -> PlanResult:
    """Plan every per-sample metric of ``base`` (or ``metrics``); with ``new``, from the paired
    differences of the metrics both reports hold."""
    names = [m for m in base.summary if new is None or m in new.summary]
    for m in metrics or []:
        if m not in names:
            where = "the baseline" if new is None else "both reports"
            raise ConfigError(f"metric {m!r} is not in {where}; there: {', '.join(names) or '-'}")
        if level_of(m) != "conversation":
            raise ConfigError(
                f"metric {m!r} is scored per turn or step, whose units are not independent; "
                "plan works on per-sample metrics"
            )
    chosen = list(dict.fromkeys(metrics)) if metrics else names
    result = PlanResult(base_label, options, None if new is None else new_label)
    for m in chosen:
        if level_of(m) != "conversation":
            result.skipped.append(m)
        else:
            result.metrics.append(_plan_metric(m, base, new, options))
    return result


def plan_runs(
    baseline: str | Path,
    options: PlanOptions,
    *,
    new: str | Path | None = None,
    metrics: list[str] | None = None,
) -> PlanResult:
    """:func:`plan_reports` over report.json files (or run folders), labelled by their paths."""
    return plan_reports(
        Report.load(baseline),
        options,
        new=None if new is None else Report.load(new),
        metrics=metrics,
        base_label=str(baseline),
        new_label=str(new),
    )


def plan_table(result: PlanResult) -> Table:
    """A row per metric, then each metric's plan in a sentence and how it was computed."""
    o = result.options
    columns = [Column("metric", "text"), Column("n"), Column("sd"), Column("sd diff")]
    columns += [Column("needed"), Column("enough", "text"), Column("detectable at n")]
    rows = []
    for m in result.metrics:
        enough = MISSING if m.enough is None else ("yes" if m.enough else "no")
        row = [m.metric, amount(m.n), num(m.sd), num(m.sd_diff)]
        rows.append([*row, amount(m.needed), enough, num(m.detectable)])
    notes = [m.message(o) for m in result.metrics]
    if result.new is None:
        how = (
            f"sd diff = sd * sqrt(2 * (1 - rho)), rho = {short(o.rho, 4)} assumed "
            "(--rho; --new REPORT measures it)"
        )
    else:
        how = f"sd diff: of the paired differences {result.new} - {result.baseline}"
    tail = "two-sided" if o.sides == "two" else "one-sided"
    notes.append(
        f"needed = ((z(1-alpha{'/2' if o.sides == 'two' else ''}) + z(power)) * sd diff / mde)^2, "
        f"rounded up (normal approximation); mde {short(o.mde, 6)}, power "
        f"{short(o.power * 100, 1)}%, alpha {short(o.alpha, 4)} {tail}; {how}"
    )
    if result.skipped:
        notes.append(f"not planned (scored per turn or step): {', '.join(result.skipped)}")
    return Table(f"Plan for {result.baseline}", columns, rows, notes)
