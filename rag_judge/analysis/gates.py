"""CI gates: fail a run whose report misses a threshold or regresses against a baseline.

``check_gates(report, {"ndcg@10": ">= 0.6", "unscored_rate": "<= 0.02"})`` is a pure function
over two reports; ``rag-judge gate`` wraps it (exit 0 pass, 1 a gate failed, 2 bad input).

What a gate name can be:

- a metric of the report's summary: its ``mean``;
- ``<metric>.ci_low`` / ``<metric>.ci_high``: a bound of its bootstrap interval;
- ``unscored_rate``: Σ unscored / Σ (n + errors) over the judge rubrics
  (:meth:`Report.judge_rubrics`: judge metrics on their own 1-5 scale; a rubric's normalised
  twin repeats its verdicts, so it is not counted again); it has no value, and fails, when the
  judge scored nothing at all (a dead server errs on every call and unscores none);
- ``error_rate``: Σ errors / Σ (n + errors) over every summary entry (unscored verdicts included);
- ``<metric>_ppi``: a judge metric's bias-corrected (PPI++) mean on the human scale, from the
  report's ``estimates`` (computed from its ``labels`` when a report has those alone);
  ``<metric>_ppi.ci_low`` / ``<metric>_ppi.ci_high``: that estimate's interval;
- ``<metric>[key=value]``: its mean over one segment of the report's ``segments``
  (``ndcg@10[topic=billing]``); a segment with fewer values than its ``min_n`` fails.

A name that none of these can be (a misspelled metric) is a ConfigError with the closest
legal names (:func:`check_gate_names`; ``rag-judge run`` checks the names against the metrics
its evaluators will produce before any work). A metric without a value fails the gate with a
message. A :class:`RegressionRule` adds a gate per metric against a baseline report, comparing
the two means over the sample ids both reports scored (paired as ``rag-judge compare`` pairs
them; the message says how many), in the metric's direction (``MetricSummary.direction``),
with ``compare``'s paired bootstrap for ``significant_only``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rag_judge.analysis._gate_names import BOUNDS, PPI_FORMS, check_gate_names, unknown_gate
from rag_judge.analysis.bridge import Bridge
from rag_judge.analysis.compare import CompareOptions, compare_pairs
from rag_judge.analysis.judge_change import bridged_diff, check_judge_change
from rag_judge.analysis.paired import paired as pairs_of
from rag_judge.analysis.ppi import has_labels, ppi_estimate
from rag_judge.analysis.segments import parse_segment_gate, resolve_segment_gate
from rag_judge.errors import ConfigError
from rag_judge.report.model import Direction, MetricSummary, Report
from rag_judge.report.result import Level, level_of
from rag_judge.report.thresholds import meets, parse_threshold

__all__ = [
    "GateCheck",
    "GateResult",
    "RegressionRule",
    "check_gate_names",
    "check_gates",
    "unknown_gate",
]

DROP_SLACK = 1e-12  # a drop printed as equal to max_drop (0.0300 vs 0.03) is not over it


@dataclass(frozen=True)
class GateCheck:
    """One gate and its outcome. ``bound`` is the threshold (or the lowest allowed value)."""

    metric: str
    value: float | None
    bound: float | None
    message: str
    op: str = ">="
    passed: bool = False
    kind: Literal["threshold", "regression"] = "threshold"


@dataclass(frozen=True)
class GateResult:
    checked: list[GateCheck] = field(default_factory=list)

    @property
    def failures(self) -> list[GateCheck]:
        return [c for c in self.checked if not c.passed]

    @property
    def passed(self) -> bool:
        return not self.failures

    def render(self, *, verbose: bool = False) -> str:
        """One ``FAIL ...`` line per failed gate (``PASS`` lines too if verbose), then a tally."""
        shown = self.checked if verbose else self.failures
        lines = [f"{'PASS' if c.passed else 'FAIL'} {c.message}" for c in shown]
        n, bad = len(self.checked), len(self.failures)
        lines.append(f"{bad} of {n} gates failed" if bad else f"all {n} gates passed")
        return "\n".join(lines)


@dataclass(frozen=True)
class RegressionRule:
    """Fail a metric whose mean fell more than ``max_drop`` (in the metric's own units) below
    the ``baseline``'s: new < base − max_drop, or new > base + max_drop for a metric whose
    direction is ``lower`` (an error rate, a latency, a rank). Checked for each metric with a
    mean in both reports whose direction is not ``neutral`` (a count: neither way is worse), or
    each of ``metrics`` (a neutral one there is a ConfigError).

    Both means are taken over the same samples, as ``rag-judge compare`` pairs them: the sample
    ids scored (with a finite value) in both reports; the gate's message says how many were
    paired and how many were left out. The direction is the report's summary's (the
    baseline's when the report lacks the metric; a report written before directions reads
    ``higher``); ``lower_is_better`` names metrics to read as ``lower`` whatever they declare.
    Corpus aggregates (BLEU) are compared on their per-sample scores. A drop that equals
    ``max_drop`` up to float rounding (``DROP_SLACK``) passes.

    With ``significant_only`` such a drop fails only if it is also significant: the seeded
    paired-bootstrap ``confidence`` interval of mean(new − base) lies entirely on the worse side
    of 0. It is ``compare``'s bootstrap (:func:`compare_pairs`), with ``compare``'s default
    resamples, so the same seed gives ``compare``'s interval.

    A judge metric whose judge changed between the two reports is refused (a JudgeChangeError,
    as in ``compare``) unless ``bridge`` covers it (the baseline's mean is then its bridged
    mean on the new judge's scale, and ``significant_only`` reads the bridged interval) or
    ``allow_judge_change``.
    """

    baseline: Report
    max_drop: float = 0.0
    significant_only: bool = False
    lower_is_better: Collection[str] = ()
    metrics: Sequence[str] | None = None
    level: Level | None = None  # only the metrics of this level (``turn``: ``turn.X``)
    seed: int = 0
    resamples: int = CompareOptions.resamples
    confidence: float = CompareOptions.confidence
    allow_judge_change: bool = False
    bridge: Bridge | None = None
    # what a refusal calls the two reports (``gate`` passes their paths)
    baseline_label: str = "baseline"
    report_label: str = "report"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_drop) and self.max_drop >= 0):
            raise ConfigError(f"max_drop must be a finite number >= 0, got {self.max_drop}")
        self.options()  # resamples and confidence checked as compare checks them

    def options(self) -> CompareOptions:
        """The settings of the paired bootstrap, as ``compare`` takes them (the sign-flip test's
        permutations are not used by the gate)."""
        return CompareOptions(
            resamples=self.resamples, confidence=self.confidence, permutations=1, seed=self.seed
        )

    def direction(self, report: Report, metric: str) -> Direction:
        """Which way ``metric`` improves: ``lower`` if listed in ``lower_is_better``, else as
        the report (or the baseline) declares it."""
        if metric in set(self.lower_is_better):
            return Direction.LOWER
        declared = report.summary.get(metric, self.baseline.summary.get(metric))
        return Direction.HIGHER if declared is None else declared.direction

    def names(self, report: Report) -> list[str]:
        """The metrics gated: ``metrics`` (each in one of the reports at least, and not
        neutral), else every metric in both reports that is not neutral."""
        known = [*report.summary, *(m for m in self.baseline.summary if m not in report.summary)]
        check_gate_names(self.lower_is_better, known, what="lower_is_better", suffixes=False)
        if self.metrics is None:
            shared = [m for m in report.summary if m in self.baseline.summary]
            if self.level is not None:
                shared = [m for m in shared if level_of(m) == self.level]
            return [m for m in shared if self.direction(report, m) is not Direction.NEUTRAL]
        check_gate_names(self.metrics, known, what="regression gate", suffixes=False)
        for metric in self.metrics:
            if self.direction(report, metric) is Direction.NEUTRAL:
                raise ConfigError(
                    f"regression gate {metric!r}: a neutral metric (neither a rise nor a fall "
                    "is an improvement; docs/metric-direction.md): gate it with a threshold, or "
                    "name it in lower_is_better"
                )
        return list(self.metrics)


def check_gates(
    report: Report,
    thresholds: Mapping[str, str | float],
    regression: RegressionRule | None = None,
) -> GateResult:
    """Check ``thresholds`` on ``report`` and, if given, the ``regression`` rule."""
    parsed = {m: parse_threshold(e, metric=m) for m, e in thresholds.items()}  # fail fast
    check_gate_names(parsed, report.summary, judge=[*report.judge_rubrics(), *report.estimates])
    checks = [_threshold(report, m, op, bound) for m, (op, bound) in parsed.items()]
    if regression is not None:
        names = regression.names(report)
        shared = [m for m in names if m in report.summary and m in regression.baseline.summary]
        bridged = check_judge_change(
            regression.baseline, report, shared, allow=regression.allow_judge_change,
            bridge=regression.bridge, base_label=regression.baseline_label,
            new_label=regression.report_label,
        )  # fmt: skip
        checks += [_regression(report, regression, name, name in bridged) for name in names]
    return GateResult(checks)


# ---- threshold gates --------------------------------------------------------------------------


def _threshold(report: Report, name: str, op: str, bound: float) -> GateCheck:
    value, problem = _resolve(report, name)
    need = f"needs {op} {bound:g}"
    if problem is not None:
        return GateCheck(name, None, bound, f"{name}: {problem} ({need})", op)
    assert value is not None  # _resolve returns a value when there is no problem
    ok = meets(value, op, bound)
    return GateCheck(name, value, bound, f"{name} = {value:.4f} ({need})", op, ok)


def _resolve(report: Report, name: str) -> tuple[float | None, str | None]:
    """The value a gate name stands for, or why there is none."""
    summary = report.summary
    if name in summary:  # an exact metric name wins over the pseudo-metrics and suffixes
        s = summary[name]
        if s.mean is None:
            return None, f"no value ({_scored(s)})"
        return s.mean, None
    segment = parse_segment_gate(name)  # ndcg@10[topic=billing]: docs/segments.md
    if segment is not None and segment.metric in summary:
        return resolve_segment_gate(report, segment)
    if name == "unscored_rate":
        rubrics = report.judge_rubrics()
        if not rubrics:
            return None, "the report has no judge rubric (a judge metric on its 1-5 scale)"
        if report.judge_scored_nothing():  # a dead judge errs on every call, unscores none
            errors = sum(summary[m].errors for m in rubrics)
            return None, f"the judge scored no value ({errors} failed), so it has no rate"
        return _rate([summary[m].unscored for m in rubrics], [_total(report, m) for m in rubrics])
    if name == "error_rate":
        if not summary:
            return None, "the report has no metrics"
        return _rate([s.errors for s in summary.values()], [_total(report, m) for m in summary])
    for suffix in BOUNDS:
        base = name.removesuffix(suffix)
        if base != name and base in summary:
            bound = getattr(summary[base], suffix[1:])
            if bound is None:
                return None, f"no confidence interval ({summary[base].n} scored)"
            return float(bound), None
    for suffix, part in PPI_FORMS:
        base = name.removesuffix(suffix)
        if base != name and base:
            return _ppi(report, base, part)
    return None, unknown_gate(name, summary, judge=report.judge_rubrics()) or "not in the report"


def _ppi(report: Report, metric: str, part: str) -> tuple[float | None, str | None]:
    """A bound or the value of ``metric``'s PPI++ estimate: the report's, else one computed
    from its labels (at the report's confidence; the point and interval need no seed)."""
    rubrics = report.judge_rubrics()
    if metric not in rubrics and metric not in report.estimates:  # or a retrieval metric's
        return None, (
            f"{metric!r} is not a judge metric of the report, so it has no PPI estimate "
            f"(its judge metrics: {', '.join(rubrics) or 'none'})"
        )
    estimate = report.estimates.get(metric)
    if estimate is None:
        if not has_labels(report.labels, metric):
            return None, (
                f"the report has no human labels of {metric}, so no PPI estimate (give the "
                "run labels: in its config)"
            )
        estimate = ppi_estimate(report, metric, report.labels, confidence=report.confidence)
    if part == "estimate":
        value = estimate.estimate
    else:
        value = None if estimate.ci is None else estimate.ci[0 if part == "ci_low" else 1]
    if value is None:
        return None, (
            f"no PPI estimate ({estimate.n_labelled} labelled samples with a judge score; "
            "it needs 2 or more)"
        )
    return value, None


def _total(report: Report, metric: str) -> int:
    s = report.summary[metric]
    return s.n + s.errors


def _rate(numerators: list[int], totals: list[int]) -> tuple[float | None, str | None]:
    if sum(totals) == 0:
        return None, "no values were computed"
    return sum(numerators) / sum(totals), None


# ---- regression against a baseline ------------------------------------------------------------


def _regression(new: Report, rule: RegressionRule, name: str, bridged: bool) -> GateCheck:
    lower = rule.direction(new, name) is Direction.LOWER
    sign = -1.0 if lower else 1.0  # so that a positive difference is always an improvement
    b = rule.baseline.summary.get(name)
    n = new.summary.get(name)
    op = "<=" if lower else ">="

    def check(value: float | None, floor: float | None, ok: bool, message: str) -> GateCheck:
        return GateCheck(name, value, floor, f"{name}{message}", op, ok, "regression")

    if b is None or n is None:
        where = "baseline" if b is None else "report"
        return check(None, None, False, f": not in the {where} (regression gate)")
    if b.mean is None:
        return check(n.mean, None, True, ": baseline has no value; nothing to compare")
    if n.mean is None:
        return check(None, None, False, f": no value ({_scored(n)}); baseline {b.mean:.4f}")
    # The means compared are over the same samples, as in ``rag-judge compare``: whole-report
    # means over different sample sets would call a change of dataset a regression.
    found = pairs_of(rule.baseline, new, name)
    base_scores, new_scores, missing = found.base, found.new, found.missing
    paired = len(base_scores)
    pairing = _pairing(rule.baseline, new, paired, missing)
    if paired == 0:
        return check(None, None, False, f": no sample scored in both reports ({pairing})")
    base_mean = math.fsum(base_scores.tolist()) / paired
    new_mean = math.fsum(new_scores.tolist()) / paired
    through = None
    if bridged and rule.bridge is not None:  # the baseline on the new judge's scale
        through = bridged_diff(
            rule.bridge, name, base_scores, new_scores, rule.confidence, found.ids
        )
        base_mean = through.base_mean
        pairing += f", baseline bridged: {through.note}"
    floor = base_mean - sign * rule.max_drop
    drop = sign * (base_mean - new_mean)
    text = f" = {new_mean:.4f} (baseline {base_mean:.4f}, {pairing}, max_drop {rule.max_drop:g}"
    # the worse way, in words: a latency that doubled "rose", it did not "drop"
    fell, worse = ("rise", "rose") if lower else ("drop", "dropped")
    if drop <= rule.max_drop + DROP_SLACK:  # a drop equal to max_drop up to rounding passes
        change = fell if drop > 0 else "change"
        return check(new_mean, floor, True, f"{text}: {change} {abs(drop):.4f})")
    if not rule.significant_only:
        return check(new_mean, floor, False, f"{text}: {worse} {drop:.4f})")
    if paired < 2:
        return check(
            new_mean,
            floor,
            False,
            f"{text}: {worse} {drop:.4f}; only {paired} paired sample, cannot test significance)",
        )
    if through is not None:
        low, high = through.ci_low, through.ci_high
        how = "bridged t interval"
    else:
        result = compare_pairs(base_scores, new_scores, rule.options(), clusters=found.clusters)
        low, high = result.ci_low, result.ci_high
        how = f"bootstrap {rule.resamples} resamples, seed {rule.seed}"
    if low is None or high is None:
        return check(new_mean, floor, False, f"{text}: {worse} {drop:.4f}; no interval)")
    ci = f"paired {rule.confidence:.0%} CI of the change [{low:+.4f}, {high:+.4f}], {how}"
    if (low > 0) if lower else (high < 0):  # entirely on the worse side of 0
        return check(new_mean, floor, False, f"{text}: {worse} {drop:.4f}, significant: {ci})")
    return check(new_mean, floor, True, f"{text}: {worse} {drop:.4f}, not significant: {ci})")


def _pairing(base: Report, new: Report, paired: int, missing: int) -> str:
    """``paired n=18 (2 only in baseline, 1 unscored)``: how many samples the means cover."""
    base_ids = set(base.ids())
    new_ids = set(new.ids())
    notes = [
        f"{count} {what}"
        for count, what in (
            (len(base_ids - new_ids), "only in baseline"),
            (len(new_ids - base_ids), "only in report"),
            (missing, "unscored"),
        )
        if count
    ]
    return f"paired n={paired}" + (f" ({', '.join(notes)})" if notes else "")


def _scored(s: MetricSummary) -> str:
    return f"{s.n} scored, {s.errors} errors"
