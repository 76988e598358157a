"""Paired comparison of runs: ``rag-judge compare BASE NEW [NEW ...]``.

Per metric, over the samples both reports scored: the mean difference NEW − BASE, a paired
percentile-bootstrap interval of it and a two-sided sign-flip randomisation test, with an
optional multiple-comparison correction across every (NEW, metric) pair. For a judge metric
whose human labels both reports carry, also the prediction-powered (PPI++) difference of the
means on the human scale (:func:`rag_judge.analysis.ppi.ppi_difference`). The statistics are
pure functions over arrays; :func:`compare_reports` and :func:`compare_all` work on Reports in
memory, :func:`compare_runs` reads them from disk first. The results are typed dataclasses;
:func:`comparison_table` is one NEW's table, which ``rag_judge.cli.compare`` renders.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from rag_judge.analysis.bridge import Bridge
from rag_judge.analysis.judge_change import bridged_diff, check_judge_change
from rag_judge.analysis.paired import cluster_sums, paired
from rag_judge.analysis.ppi import ppi_difference
from rag_judge.data.sample import duplicate_id
from rag_judge.errors import ConfigError, DataError
from rag_judge.report.format import MISSING, Column, Table, ci_label, interval, num, p_value
from rag_judge.report.model import Direction, Report
from rag_judge.report.result import Level, level_of
from rag_judge.stats import (
    CORRECTIONS,
    EXACT_MAX,
    adjust_pvalues,
    bootstrap_ci,
    clustered_bootstrap_ci,
    sign_flip_pvalue,
)

__all__ = [
    "CompareOptions",
    "CompareResult",
    "Comparison",
    "MetricComparison",
    "apply_correction",
    "compare_all",
    "compare_pairs",
    "compare_reports",
    "compare_runs",
    "comparison_table",
    "footer",
]


@dataclass(frozen=True)
class CompareOptions:
    """How many resamples and sign flips, the CI level and the seed (shared by every metric,
    so that selecting metrics does not change any one metric's numbers)."""

    resamples: int = 10_000
    confidence: float = 0.95
    permutations: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("resamples", "permutations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(
                f"confidence must be between 0 and 1 (exclusive), got {self.confidence!r}"
            )


@dataclass
class MetricComparison:
    """One metric of one NEW against BASE; statistics are None when no pair is scored. The
    ``ppi_`` fields: the PPI++ difference of the means on the human scale, with its interval
    (by the new report's method: ``ppi_difference``) and the number of samples labelled in
    both; None unless both reports carry labels of this judge metric (the difference and
    interval also with fewer than 2 such)."""

    n: int
    base_mean: float | None
    new_mean: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    missing: int  # samples in both reports with this metric unscored on either side
    exact: bool = False  # p from full enumeration of the sign flips
    corpus: str | None = None  # the summary's corpus aggregate, when it is not a mean
    signature_differs: bool = False  # the two reports computed it with different options
    ppi_diff: float | None = None
    ppi_ci_low: float | None = None
    ppi_ci_high: float | None = None
    ppi_n_labelled: int | None = None
    direction: Direction = Direction.HIGHER  # which way the metric improves (NEW's summary)
    bridged: str | None = None  # BASE translated to NEW's judge through a bridge: how

    def change(self) -> Literal["better", "worse", "same"] | None:
        """The sign of ``diff`` read in the metric's direction: a rise of a latency is
        ``worse``. Not a test (the CI and p say whether it is more than noise); None for a
        neutral metric (a count) or without a difference."""
        if self.diff is None or self.direction is Direction.NEUTRAL:
            return None
        if self.diff == 0:
            return "same"
        gain = self.diff if self.direction is Direction.HIGHER else -self.diff
        return "better" if gain > 0 else "worse"


@dataclass
class Comparison:
    """One NEW against BASE: per shared metric, and what only one side has."""

    new: str
    only_in_base: int  # sample ids
    only_in_new: int
    metrics: dict[str, MetricComparison] = field(default_factory=dict)
    metrics_only_in_base: list[str] = field(default_factory=list)
    metrics_only_in_new: list[str] = field(default_factory=list)


@dataclass
class CompareResult:
    """Every NEW against BASE, with the settings they share."""

    base: str
    comparisons: list[Comparison]
    options: CompareOptions = field(default_factory=CompareOptions)
    correction: str = "none"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``rag-judge compare --format json`` and comparison.json."""
        return {
            "base": self.base,
            "comparisons": [_without_unbridged(asdict(c)) for c in self.comparisons],
            **asdict(self.options),
            "correction": self.correction,
        }


def _without_unbridged(data: dict[str, Any]) -> dict[str, Any]:
    # ``bridged`` only where it applies: the JSON of a comparison without a bridge is unchanged
    for mc in data["metrics"].values():
        if mc["bridged"] is None:
            del mc["bridged"]
    return data


def compare_pairs(
    base: NDArray[np.float64],
    new: NDArray[np.float64],
    options: CompareOptions,
    missing: int = 0,
    clusters: Sequence[str] | None = None,
) -> MetricComparison:
    """Statistics of paired scores (index-aligned, all present). ``clusters`` labels each
    pair with its conversation (pairs of turns or steps): the interval then resamples
    conversations, and the randomisation test flips the sign of each conversation's summed
    difference, as its turns are not independent."""
    n = len(base)
    if n == 0:
        return MetricComparison(0, None, None, None, None, None, None, None, missing)
    d = np.asarray(new, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    o = options
    if clusters is None:
        low, high = bootstrap_ci(d, resamples=o.resamples, confidence=o.confidence, seed=o.seed)
        p, exact = sign_flip_pvalue(d, permutations=o.permutations, seed=o.seed)
    else:
        low, high = clustered_bootstrap_ci(
            d, clusters, resamples=o.resamples, confidence=o.confidence, seed=o.seed
        )
        p, exact = sign_flip_pvalue(
            cluster_sums(d, clusters), permutations=o.permutations, seed=o.seed
        )
    return MetricComparison(
        n=n,
        base_mean=math.fsum(base.tolist()) / n,
        new_mean=math.fsum(new.tolist()) / n,
        diff=math.fsum(d.tolist()) / n,
        ci_low=low,
        ci_high=high,
        p_value=p,
        p_adjusted=p,
        missing=missing,
        exact=exact,
    )


def compare_reports(
    base: Report,
    new: Report,
    options: CompareOptions | None = None,
    *,
    metrics: list[str] | None = None,
    base_label: str = "BASE",
    new_label: str = "NEW",
    level: Level | None = None,
    allow_judge_change: bool = False,
    bridge: Bridge | None = None,
) -> Comparison:
    """Compare ``new`` with ``base`` on the shared metrics (or ``metrics``), paired by id;
    only those of ``level`` (``turn``: the ``turn.X`` metrics) when it is given. A judge
    metric whose judge changed is a JudgeChangeError, unless ``bridge`` covers it (then BASE
    is translated to NEW's judge) or ``allow_judge_change`` (then it is flagged)."""
    options = options or CompareOptions()
    base_ids, new_ids = _ids(base, base_label), _ids(new, new_label)
    base_names, new_names = list(base.summary), list(new.summary)
    shared = [m for m in base_names if m in new.summary]
    if metrics:
        for m in metrics:
            if m not in shared:
                where = "in neither report"
                if m in base.summary or m in new.summary:
                    where = f"only in {base_label if m in base.summary else new_label}"
                raise ConfigError(
                    f"metric {m!r} is {where}; metrics in both: {', '.join(shared) or '(none)'}"
                )
        shared = list(dict.fromkeys(metrics))
    both = len(base_ids & new_ids)
    out = Comparison(
        new=new_label,
        only_in_base=len(base_ids) - both,
        only_in_new=len(new_ids) - both,
        metrics_only_in_base=[m for m in base_names if m not in new.summary],
        metrics_only_in_new=[m for m in new_names if m not in base.summary],
    )
    if level is not None:
        shared = [m for m in shared if level_of(m) == level]
    bridged = check_judge_change(
        base, new, shared, allow=allow_judge_change, bridge=bridge,
        base_label=base_label, new_label=new_label,
    )  # fmt: skip
    for m in shared:
        found = paired(base, new, m)
        aggregates = {base.summary[m].aggregate, new.summary[m].aggregate}
        b_sig, n_sig = base.signatures.get(m), new.signatures.get(m)
        ppi = ppi_difference(base, new, m, confidence=options.confidence)
        out.metrics[m] = replace(
            compare_pairs(found.base, found.new, options, found.missing, found.clusters),
            corpus=next((a for a in sorted(aggregates) if a != "mean"), None),
            signature_differs=b_sig is not None
            and n_sig is not None
            and not b_sig.same_metric(n_sig),
            ppi_diff=None if ppi is None else ppi.estimate,
            ppi_ci_low=None if ppi is None else ppi.ci_low,
            ppi_ci_high=None if ppi is None else ppi.ci_high,
            ppi_n_labelled=None if ppi is None else ppi.n_labelled,
            direction=new.summary[m].direction,
        )
        if bridge is not None and m in bridged and len(found.base):
            b = bridged_diff(bridge, m, found.base, found.new, options.confidence, found.ids)
            out.metrics[m] = replace(out.metrics[m], **b.fields())
    return out


def _ids(report: Report, label: str) -> set[str]:
    dup = duplicate_id(report.ids())
    if dup is not None:
        raise DataError(f"{label}: sample id {dup!r} appears twice")
    return set(report.ids())


def apply_correction(comparisons: list[Comparison], method: str) -> None:
    """Adjust every p-value of ``comparisons`` in place, as one family."""
    cells = [mc for c in comparisons for mc in c.metrics.values() if mc.p_value is not None]
    adjusted = adjust_pvalues(np.array([mc.p_value for mc in cells], dtype=np.float64), method)
    for mc, p in zip(cells, adjusted):
        mc.p_adjusted = float(p)


def compare_all(
    base: Report,
    news: Sequence[tuple[str, Report]],
    options: CompareOptions | None = None,
    *,
    metrics: list[str] | None = None,
    correction: str = "none",
    base_label: str = "BASE",
    level: Level | None = None,
    allow_judge_change: bool = False,
    bridge: Bridge | None = None,
) -> CompareResult:
    """Each labelled NEW against ``base``, every p-value corrected as one family (a judge
    change: as :func:`compare_reports`)."""
    if correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")
    options = options or CompareOptions()
    comparisons = [
        compare_reports(
            base,
            new,
            options,
            metrics=metrics,
            base_label=base_label,
            new_label=label,
            level=level,
            allow_judge_change=allow_judge_change,
            bridge=bridge,
        )
        for label, new in news
    ]
    apply_correction(comparisons, correction)
    return CompareResult(base_label, comparisons, options, correction)


def compare_runs(
    base: str | Path,
    news: Sequence[str | Path],
    options: CompareOptions | None = None,
    *,
    metrics: list[str] | None = None,
    correction: str = "none",
    level: Level | None = None,
    allow_judge_change: bool = False,
    bridge: Bridge | None = None,
) -> CompareResult:
    """:func:`compare_all` over report.json files (or run folders), labelled by their paths."""
    if correction not in CORRECTIONS:  # before reading anything
        raise ConfigError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")
    loaded = [(str(new), Report.load(new)) for new in news]
    return compare_all(
        Report.load(base),
        loaded,
        options,
        metrics=metrics,
        correction=correction,
        base_label=str(base),
        level=level,
        allow_judge_change=allow_judge_change,
        bridge=bridge,
    )


# ---- the table -------------------------------------------------------------------------------


def comparison_table(result: CompareResult, comp: Comparison) -> Table:
    """One NEW against BASE, a row per metric. The PPI columns are shown when some metric of
    the result has a PPI++ difference; the adjusted p when a correction was asked for."""
    adjusted = result.correction != "none"
    ppi = any(
        mc.ppi_n_labelled is not None for c in result.comparisons for mc in c.metrics.values()
    )
    ci = ci_label(result.options.confidence)
    columns = [Column("metric", "text"), Column("n"), Column("base"), Column("new")]
    columns += [Column("diff"), Column("change", "text"), Column(ci), Column("p")]
    columns += [Column(f"p ({result.correction})")] if adjusted else []
    columns.append(Column("missing"))
    columns += [Column("PPI diff"), Column(f"PPI {ci}"), Column("labelled")] if ppi else []
    rows = []
    for name, mc in comp.metrics.items():
        flag = "*" if mc.corpus or mc.signature_differs or mc.bridged else ""
        row = [name + flag, str(mc.n), num(mc.base_mean), num(mc.new_mean)]
        row += [num(mc.diff, "+.4f"), mc.change() or MISSING]
        row += [interval(mc.ci_low, mc.ci_high, "+.4f"), p_value(mc.p_value)]
        row += [p_value(mc.p_adjusted)] if adjusted else []
        row.append(str(mc.missing))
        if ppi:
            labelled = MISSING if mc.ppi_n_labelled is None else str(mc.ppi_n_labelled)
            row += [num(mc.ppi_diff, "+.4f"), interval(mc.ppi_ci_low, mc.ppi_ci_high, "+.4f")]
            row.append(labelled)
        rows.append(row)
    return Table(f"{comp.new} vs {result.base}", columns, rows, _notes(comp))


def _notes(comp: Comparison) -> list[str]:
    notes = [f"paired samples: only in base {comp.only_in_base}, only in new {comp.only_in_new}"]
    if any(mc.ppi_n_labelled is not None for mc in comp.metrics.values()):
        notes.append(
            "PPI diff: the prediction-powered (PPI++) difference of the means on the human "
            "scale, from the judge's paired differences and the labels of the samples labelled "
            "in both runs (labelled); CI: the new run's interval method (labels.method: t, "
            "small-sample, by default)"
        )
    units = [m for m in comp.metrics if level_of(m) != "conversation"]
    if units:
        notes.append(
            f"{', '.join(units)}: scored per turn or step, paired by conversation id and turn "
            "(and step) index; the CI resamples conversations and the sign-flip test flips each "
            "conversation's summed difference, as a conversation's turns are not independent"
        )
    for name, mc in comp.metrics.items():
        if mc.corpus:
            notes.append(
                f"{name}*: the report's aggregate is {mc.corpus}; base/new/diff and the "
                "paired tests use the per-sample (sentence-level) values"
            )
        if mc.bridged:
            notes.append(
                f"{name}*: base bridged to the new judge's scale ({mc.bridged}); CI: bridged "
                "t interval, p: t test (not the footer's bootstrap and sign-flip test)"
            )
        elif mc.signature_differs:
            notes.append(f"{name}*: the two reports computed it with different options")
    if comp.metrics_only_in_base:
        notes.append(f"metrics only in base: {', '.join(comp.metrics_only_in_base)}")
    if comp.metrics_only_in_new:
        notes.append(f"metrics only in new: {', '.join(comp.metrics_only_in_new)}")
    return notes


def footer(result: CompareResult) -> str:
    """What every table of ``result`` was computed with, in one line under them all."""
    o = result.options
    return (
        "diff = mean(new - base) over paired samples; change: diff read in the metric's "
        f"direction (lower is better for error rates, latency and ranks; {MISSING} for a "
        "neutral metric), not a test; CI: paired bootstrap, "
        f"{o.resamples} resamples; p: two-sided sign-flip test, "
        f"{o.permutations} permutations (exact for n <= {EXACT_MAX}); "
        f"correction: {result.correction}; seed {o.seed}"
    )
