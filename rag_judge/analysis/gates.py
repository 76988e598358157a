"""CI gates: fail a run whose report misses a threshold or regresses against a baseline.

``check_gates(report, {"ndcg@10": ">= 0.6", "unscored_rate": "<= 0.02"})`` is a pure function
over two reports; ``rag-judge gate`` wraps it (exit 0 pass, 1 a gate failed, 2 bad input).

What a gate name can be:

- a metric of the report's summary: its ``mean``;
- ``<metric>.ci_low`` / ``<metric>.ci_high``: a bound of its bootstrap interval;
- ``unscored_rate``: Σ unscored / Σ (n + errors) over the judge rubrics, a rubric being a summary
  entry ``X`` (not itself ending in ``_norm``) that has an ``X_norm`` entry beside it; ``X_norm``
  repeats X's verdicts, so only ``X`` is counted;
- ``error_rate``: Σ errors / Σ (n + errors) over every summary entry (unscored verdicts included).

A name that resolves to nothing, or a metric without a value, fails the gate with a message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.report.model import Report
from rag_judge.stats import bootstrap_ci

__all__ = ["GateCheck", "GateResult", "check_gates", "parse_threshold"]

OPERATORS = (">=", "<=", "==", ">", "<")  # longest first, so ">=" is never read as ">"
_EXPR = re.compile(r"^\s*(>=|<=|==|>|<)\s*(\S+)\s*$")
_NAMED_EXPR = re.compile(r"^\s*(?P<metric>[^<>=\s]+)\s*(?P<op>>=|<=|==|>|<)\s*(?P<value>\S+)\s*$")
_PSEUDO = ("unscored_rate", "error_rate")
_BOUNDS = (".ci_low", ".ci_high")


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


def parse_threshold(expr: str | float, *, metric: str = "") -> tuple[str, float]:
    """``">= 0.6"`` → ``(">=", 0.6)``. A bare number (not a string) means ``>=``."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        op, value = ">=", float(expr)
    else:
        match = _EXPR.match(str(expr))
        where = f"gate {metric!r}: " if metric else ""
        if match is None:
            raise ConfigError(
                f"{where}bad threshold {expr!r}; expected '<operator> <number>' with an "
                f"operator of {', '.join(OPERATORS)} (e.g. '>= 0.6')"
            )
        op, value = match.group(1), _number(match.group(2), f"{where}threshold {expr!r}")
    if not math.isfinite(value):
        raise ConfigError(f"gate {metric!r}: threshold {expr!r} is not a finite number")
    return op, value


def check_gates(
    report: Report,
    thresholds: Mapping[str, str | float],
    *,
    baseline: Report | None = None,
    max_drop: float | None = None,
    significant_only: bool = False,
    lower_is_better: Collection[str] = (),
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> GateResult:
    """Check ``thresholds`` on ``report`` and, with a baseline, the regression rule.

    Regression (``baseline`` and ``max_drop`` together): for each metric with a mean in both
    reports (or each of ``metrics``), fail if new < base − max_drop (new > base + max_drop for a
    metric in ``lower_is_better``); ``max_drop`` is in the metric's own units. With
    ``significant_only`` a drop over ``max_drop`` fails only if it is also significant: the seeded
    paired-bootstrap ``confidence`` interval of mean(new − base) over the sample ids scored in
    both reports lies entirely on the worse side of 0. Corpus aggregates (BLEU) are tested on
    their per-sample scores.
    """
    parsed = {m: parse_threshold(e, metric=m) for m, e in thresholds.items()}  # fail fast
    if (baseline is None) != (max_drop is None):
        raise ConfigError("a regression gate needs both a baseline report and max_drop")
    if max_drop is not None and not (math.isfinite(max_drop) and max_drop >= 0):
        raise ConfigError(f"max_drop must be a finite number >= 0, got {max_drop}")
    checks = [_threshold(report, m, op, bound) for m, (op, bound) in parsed.items()]
    if baseline is not None and max_drop is not None:
        names = list(metrics) if metrics is not None else [
            m for m in report.summary if m in baseline.summary
        ]  # fmt: skip
        for name in names:
            checks.append(
                _regression(
                    report, baseline, name, max_drop, name in set(lower_is_better),
                    significant_only, seed, resamples, confidence,
                )
            )  # fmt: skip
    return GateResult(checks)


# ---- threshold gates --------------------------------------------------------------------------


def _threshold(report: Report, name: str, op: str, bound: float) -> GateCheck:
    value, problem = _resolve(report, name)
    need = f"needs {op} {bound:g}"
    if problem is not None:
        return GateCheck(name, None, bound, f"{name}: {problem} ({need})", op)
    assert value is not None  # _resolve returns a value when there is no problem
    ok = _compare(value, op, bound)
    return GateCheck(name, value, bound, f"{name} = {value:.4f} ({need})", op, ok)


def _compare(value: float, op: str, bound: float) -> bool:
    if op == ">=":
        return value >= bound
    if op == ">":
        return value > bound
    if op == "<=":
        return value <= bound
    if op == "<":
        return value < bound
    return math.isclose(value, bound, rel_tol=1e-9, abs_tol=1e-12)  # "==": means are floats


def _resolve(report: Report, name: str) -> tuple[float | None, str | None]:
    """The value a gate name stands for, or why there is none."""
    summary = report.summary
    if name in summary:  # an exact metric name wins over the pseudo-metrics and suffixes
        s = summary[name]
        if s.mean is None:
            return None, f"no value ({s.n} scored, {s.errors} errors)"
        return s.mean, None
    if name == "unscored_rate":
        rubrics = [m for m in summary if not m.endswith("_norm") and f"{m}_norm" in summary]
        if not rubrics:
            return None, "the report has no judge rubric (a metric X with an X_norm beside it)"
        return _rate([summary[m].unscored for m in rubrics], [_total(report, m) for m in rubrics])
    if name == "error_rate":
        if not summary:
            return None, "the report has no metrics"
        return _rate([s.errors for s in summary.values()], [_total(report, m) for m in summary])
    for suffix in _BOUNDS:
        base = name.removesuffix(suffix)
        if base != name and base in summary:
            bound = getattr(summary[base], suffix[1:])
            if bound is None:
                return None, f"no confidence interval ({summary[base].n} scored)"
            return float(bound), None
    known = ", ".join([*summary, *_PSEUDO]) or "none"
    return None, f"not in the report (gates can name: {known}; or <metric>.ci_low/.ci_high)"


def _total(report: Report, metric: str) -> int:
    s = report.summary[metric]
    return s.n + s.errors


def _rate(numerators: list[int], totals: list[int]) -> tuple[float | None, str | None]:
    if sum(totals) == 0:
        return None, "no values were computed"
    return sum(numerators) / sum(totals), None


# ---- regression against a baseline ------------------------------------------------------------


def _regression(
    new: Report,
    base: Report,
    name: str,
    max_drop: float,
    lower: bool,
    significant_only: bool,
    seed: int,
    resamples: int,
    confidence: float,
) -> GateCheck:
    sign = -1.0 if lower else 1.0  # so that a positive difference is always an improvement
    b = base.summary.get(name)
    n = new.summary.get(name)
    floor = None if b is None or b.mean is None else b.mean - sign * max_drop
    op = "<=" if lower else ">="

    def check(value: float | None, ok: bool, message: str) -> GateCheck:
        return GateCheck(name, value, floor, f"{name}{message}", op, ok, "regression")

    if b is None or n is None:
        where = "baseline" if b is None else "report"
        return check(None, False, f": not in the {where} (regression gate)")
    if b.mean is None:
        return check(n.mean, True, ": baseline has no value; nothing to compare")
    if n.mean is None:
        return check(None, False, f": no value ({n.n} scored, {n.errors} errors); baseline "
                     f"{b.mean:.4f}")  # fmt: skip
    drop = sign * (b.mean - n.mean)
    text = f" = {n.mean:.4f} (baseline {b.mean:.4f}, max_drop {max_drop:g}"
    if drop <= max_drop:
        return check(n.mean, True, f"{text}: {'drop' if drop > 0 else 'change'} "
                     f"{abs(drop):.4f})")  # fmt: skip
    if not significant_only:
        return check(n.mean, False, f"{text}: dropped {drop:.4f})")
    diffs = _paired_differences(new, base, name) * sign
    if len(diffs) < 2:
        return check(n.mean, False, f"{text}: dropped {drop:.4f}; only {len(diffs)} paired "
                     "samples, cannot test significance)")  # fmt: skip
    low, high = bootstrap_ci(diffs, resamples=resamples, confidence=confidence, seed=seed)
    assert low is not None and high is not None  # non-empty input
    ci = f"paired {confidence:.0%} CI of the change [{low:+.4f}, {high:+.4f}], n={len(diffs)}"
    if high < 0:
        return check(n.mean, False, f"{text}: dropped {drop:.4f}, significant: {ci})")
    return check(n.mean, True, f"{text}: dropped {drop:.4f}, not significant: {ci})")


def _paired_differences(new: Report, base: Report, name: str) -> NDArray[np.float64]:
    """new − base per sample id scored in both reports, in the new report's order."""
    before = {s.id: s.scores.get(name) for s in base.samples}
    pairs = [
        (v, before[s.id])
        for s in new.samples
        if (v := s.scores.get(name)) is not None and before.get(s.id) is not None
    ]
    return np.array([a - b for a, b in pairs if b is not None], dtype=np.float64)


# ---- command line -----------------------------------------------------------------------------


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not a number") from None
