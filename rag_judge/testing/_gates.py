"""``assert_gates``: ``check_gates`` as a test assertion whose message a person can act on.

A failed gate is shown with its value, the metric's confidence interval and the samples that
pulled it down, so the pytest output says where to look without opening the report.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rag_judge.analysis._gate_names import BOUNDS, PPI_FORMS
from rag_judge.analysis.gates import GateResult, RegressionRule, check_gates
from rag_judge.errors import ConfigError
from rag_judge.report.model import Direction, Report

if TYPE_CHECKING:
    from rag_judge.pipeline import RunResult

__all__ = ["assert_gates", "explain"]

MAX_REASON = 80  # characters of a failure's reason shown beside its sample


def assert_gates(
    report: Report | RunResult,
    gates: Mapping[str, str | float] | None = None,
    *,
    baseline: Report | RunResult | str | Path | None = None,
    max_drop: float = 0.0,
    significant_only: bool = False,
    lower_is_better: Collection[str] = (),
    metrics: Sequence[str] | None = None,
    worst: int = 3,
) -> GateResult:
    """Check ``gates`` (metric -> ``">= 0.6"``; None: the config's own ``gates``) and, with a
    ``baseline`` (a report, or its report.json or run folder), a regression rule with
    ``max_drop``, ``significant_only``, ``lower_is_better`` and ``metrics`` as
    :class:`~rag_judge.analysis.gates.RegressionRule` takes them.

    Raises AssertionError naming each failed gate with its value, its threshold, the metric's
    confidence interval and the ``worst`` samples for it; returns the result when all pass.
    A misspelled gate is a ConfigError, as in ``rag-judge gate``."""
    report = _report(report)
    if gates is None:
        gates = report.config.get("gates") or {}
    rule = None
    if baseline is not None:
        rule = RegressionRule(
            baseline=_report(baseline),
            max_drop=max_drop,
            significant_only=significant_only,
            lower_is_better=lower_is_better,
            metrics=metrics,
        )
    if not gates and rule is None:
        raise ConfigError("no gates to check: give gates, a baseline, or a config with gates:")
    result = check_gates(report, gates, rule)
    if not result.passed:
        raise AssertionError(explain(report, result, rule, worst=worst))
    return result


def _report(value: Report | RunResult | str | Path) -> Report:
    if isinstance(value, Report):
        return value
    if isinstance(value, str | Path):
        return Report.load(value)
    return value.report


def explain(
    report: Report, result: GateResult, rule: RegressionRule | None = None, *, worst: int = 3
) -> str:
    """The assertion message: a tally, then each failed gate with its interval and samples,
    then the gates that passed, one line each."""
    lines = [f"{len(result.failures)} of {len(result.checked)} rag-judge gates failed"]
    for check in result.failures:
        lines.append(f"FAIL {check.message}")
        metric = _metric_of(report, check.metric)
        if metric is None:
            lines += [f"     {line}" for line in _pseudo_samples(report, check.metric, worst)]
            continue
        lines.append(f"     {_interval(report, metric, named=metric != check.metric)}")
        if check.kind == "regression" and rule is not None:
            lines.append(f"     most regressed: {_regressed(report, rule, metric, worst)}")
        else:
            lines.append(f"     worst samples: {_worst(report, metric, worst)}")
        missing = _without_value(report, [metric], worst)
        if missing:
            lines.append(f"     no value: {missing}")
    lines += [f"PASS {c.message}" for c in result.checked if c.passed]
    return "\n".join(lines)


def _metric_of(report: Report, gate: str) -> str | None:
    """The report metric a gate name reads (``ndcg@5.ci_low`` reads ``ndcg@5``), or None for
    ``unscored_rate`` and ``error_rate``."""
    summary = report.summary
    if gate in summary:
        return gate
    for suffix in [*BOUNDS, *(s for s, _ in PPI_FORMS)]:
        base = gate.removesuffix(suffix)
        if base != gate and base in summary:
            return base
    return None


def _interval(report: Report, metric: str, *, named: bool) -> str:
    """The metric's interval and counts; its name and mean too when the gate reads another
    number of it (``ndcg@5.ci_low``, ``faithfulness_ppi``)."""
    s = report.summary[metric]
    if s.ci_low is None or s.ci_high is None:
        ci = "no confidence interval"
    else:
        ci = f"{report.confidence:.0%} CI [{s.ci_low:.4f}, {s.ci_high:.4f}]"
    text = f"{ci} over {s.n} samples ({s.errors} failed)"
    if not named:
        return text
    mean = "no value" if s.mean is None else f"{s.mean:.4f}"
    return f"{metric} = {mean}, {text}"


def _worst(report: Report, metric: str, k: int) -> str:
    """The ``k`` samples with the worst values in the metric's direction."""
    values = [(sid, v) for sid, v in report.column(metric).items() if v is not None]
    lower = report.summary[metric].direction is Direction.LOWER
    values.sort(key=lambda item: (-item[1] if lower else item[1], item[0]))
    shown = ", ".join(f"{sid}={v:.4g}" for sid, v in values[:k])
    return shown or "none has a value"


def _regressed(report: Report, rule: RegressionRule, metric: str, k: int) -> str:
    """The ``k`` samples whose value moved most the worse way against the baseline."""
    base = rule.baseline.column(metric)
    sign = -1.0 if rule.direction(report, metric) is Direction.LOWER else 1.0
    moves = []
    for sid, new in report.column(metric).items():
        old = base.get(sid)
        if new is not None and old is not None and math.isfinite(new) and math.isfinite(old):
            moves.append((sign * (new - old), sid, old, new))
    moves.sort()
    shown = [f"{sid} {old:.4g} -> {new:.4g}" for change, sid, old, new in moves[:k] if change < 0]
    return ", ".join(shown) or "no paired sample got worse"


def _without_value(report: Report, metrics: Collection[str], k: int) -> str:
    """Up to ``k`` samples that failed one of ``metrics``, each with its reason."""
    index = report.index()
    seen: dict[str, str] = {}
    for i, metric, failure in index.failures:
        sid = index.ids[i]
        if metric in metrics and sid not in seen:
            seen[sid] = _short(failure.text())
    shown = [f"{sid} ({why})" for sid, why in list(seen.items())[:k]]
    more = f" and {len(seen) - k} more" if len(seen) > k else ""
    return "; ".join(shown) + more


def _pseudo_samples(report: Report, gate: str, k: int) -> list[str]:
    """For ``unscored_rate`` and ``error_rate``: the samples that failed, with reasons."""
    metrics = report.judge_rubrics() if gate == "unscored_rate" else list(report.summary)
    missing = _without_value(report, metrics, k)
    return [f"failed samples: {missing}"] if missing else []


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
