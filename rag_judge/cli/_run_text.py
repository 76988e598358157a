"""What ``rag-judge run`` prints about a run: the header before its first step, the summary
(a table per level when metrics are scored per turn or per step), the dry-run table, and the
failure summary on stderr with the steps that failed beyond ``max_error_rate``. Text from
types, no I/O; ``run.py`` re-exports every name."""

from __future__ import annotations

from collections import Counter

from rag_judge.config import ExperimentConfig
from rag_judge.evaluators.base import DryRun
from rag_judge.pipeline import RunResult
from rag_judge.report.costs import cost_table
from rag_judge.report.format import Column, Table, text_table
from rag_judge.report.levels import degraded_count
from rag_judge.report.markdown import level_sections, summary_table
from rag_judge.report.model import FailureKind, MetricKind, Report, Signature, stub_method
from rag_judge.report.result import UNIT_PREFIXES

__all__ = [
    "MAX_REASONS",
    "MAX_REASON_CHARS",
    "dry_run_table",
    "evaluator_failures",
    "failure_summary",
    "run_header",
    "run_summary",
]

MAX_REASONS = 3  # distinct failure reasons shown on stderr
MAX_REASON_CHARS = 300


def run_summary(report: Report) -> str:
    """The summary a run prints: report.md's summary table; with metrics scored per turn or
    per step, a table per level and how many conversations and turns degraded."""
    sections = level_sections(report, "### ", brief=True)
    if not sections:
        return summary_table(report) + _cost(report)
    count = degraded_count(report)
    if count.turns or _has_unit_thresholds(report):  # without a threshold, nothing can fail
        sections.append(f"rag-judge: {count.text()}")
    return "\n".join(sections).rstrip("\n") + _cost(report)


def _cost(report: Report) -> str:
    """The cost per evaluator and per 1,000 samples under the summary, when a cost is known."""
    table = cost_table(report)
    return "" if table is None else "\n\n" + text_table(table, rule=True)


def _has_unit_thresholds(report: Report) -> bool:
    gates = report.config.get("gates") or {}
    return bool(report.config.get("thresholds")) or any(
        str(m).startswith(UNIT_PREFIXES) for m in gates
    )


def evaluator_failures(result: RunResult, max_error_rate: float) -> dict[str, tuple[int, int]]:
    """The steps of a run (``target``, ``evaluators[i] (type)``) that failed: more than
    ``max_error_rate`` of their values failed, or all of them; as (failed, all) values."""
    return {
        step: (bad, total)
        for step, (bad, total) in result.failure_counts().items()
        if total and (bad == total or bad / total > max_error_rate)
    }


def failure_summary(
    result: RunResult, over: dict[str, tuple[int, int]], max_error_rate: float
) -> str:
    """A few lines for stderr: how many values and model calls failed, the first distinct
    reasons (errors first, then unscored verdicts, then missing inputs), and each step that
    failed beyond ``max_error_rate``; "" when nothing failed."""
    counts = result.failure_counts()
    bad = sum(b for b, _ in counts.values())
    total = sum(t for _, t in counts.values())
    calls = result.report.usage.failures
    if not bad and not calls:
        return ""
    head = [f"{bad} of {total} values failed"] if bad else []
    if calls:
        head.append(f"{calls} model call{'s' if calls != 1 else ''} failed")
    lines = ["; ".join(head)]
    reasons = _reasons(result.report)
    for (kind, message), (n, metrics) in reasons[:MAX_REASONS]:
        if len(message) > MAX_REASON_CHARS:
            message = message[: MAX_REASON_CHARS - 1] + "…"
        where = ", ".join(metrics[:3]) + (", …" if len(metrics) > 3 else "")
        lines.append(f"  {kind.value} ×{n} ({where}): {message}")
    more = len(reasons) - MAX_REASONS
    if more > 0:
        lines.append(f"  … and {more} more distinct reason{'s' if more > 1 else ''}")
    if reasons:
        lines.append("  (every reason: samples[].errors in report.json, and report.md)")
    for step, (b, t) in over.items():
        why = "no value at all" if b == t else f"more than max_error_rate {max_error_rate:g}"
        lines.append(f"{step} failed: {b} of {t} values failed ({b / t:.0%}), {why}")
    return "\n".join(lines)


def _reasons(report: Report) -> list[tuple[tuple[FailureKind, str], tuple[int, list[str]]]]:
    """Distinct (kind, message) of the report's failures with their count of values and the
    metrics they hit; errors first, then unscored, then missing inputs, most frequent first.
    A judge rubric's normalised twin repeats its rubric's failure, so it is skipped."""
    twins = {m for m, s in report.summary.items() if s.normalises is not None}
    counts: Counter[tuple[FailureKind, str]] = Counter()
    metrics: dict[tuple[FailureKind, str], list[str]] = {}
    for _, metric, failure in report.index().failures:
        if metric in twins:
            continue
        key = (failure.kind, failure.message)
        counts[key] += 1
        hit = metrics.setdefault(key, [])
        if metric not in hit:
            hit.append(metric)
    order = list(FailureKind)
    ranked = sorted(counts, key=lambda k: (order.index(k[0]), -counts[k]))  # stable: first seen
    return [(k, (counts[k], metrics[k])) for k in ranked]


_DRY_RUN_COLUMNS = [
    ("evaluator", None),
    ("prompts", "prompts"),
    ("skipped", "skipped"),
    ("requests", "requests"),
    ("cache hits", "cache_hits"),
    ("prompt tokens", "prompt_tokens_estimate"),
    ("max completion tokens", "completion_tokens_max"),
    ("cost", "cost_estimate"),
]


def dry_run_table(estimates: list[tuple[str, DryRun]]) -> str:
    """A plain-text table of dry-run estimates, one row per evaluator that would call a model
    (named like ``evaluators[4] (judge)``); "no judge calls" when there is none. Prompts are
    the rendered prompts, skipped the samples (x rubrics) left out for a missing input,
    requests those not already cached (identical ones counted once), prompt tokens an
    estimate, max completion tokens the bound the requests ask for; cost is an upper bound from
    the client's prices or the price table (docs/prices.md), or "no price set"."""
    if not estimates:
        return "no judge calls: no evaluator of this config calls a model"
    columns = [
        Column(title, "text" if field is None else "number") for title, field in _DRY_RUN_COLUMNS
    ]
    rows = []
    for label, estimate in estimates:
        row = [label]
        for _, field in _DRY_RUN_COLUMNS[1:]:
            value = getattr(estimate, str(field))
            if field == "cost_estimate":
                row.append("no price set" if value is None else f"${value:.4f}")
            else:
                row.append(f"{value:,}")
        rows.append(row)
    return text_table(Table("Dry run", columns, rows), rule=True)


def run_header(config: ExperimentConfig) -> list[str]:
    """What a run is about to do, for the terminal before its first step: its evaluators and
    judge models, and a plain word when a judge is the stub, whose scores are a heuristic. From
    the evaluators' signatures, which a run's report then carries: known before any sample."""
    signatures: dict[str, Signature] = {}
    stubbed: dict[str, list[str]] = {}
    for evaluator in config.evaluators:
        for metric, sig in evaluator.signatures().items():
            signatures[metric] = sig
            method = stub_method(sig)
            if method is None:
                continue
            info = evaluator.metric_info(metric)  # a rubric on its own scale, not its _norm twin
            if info.kind is MetricKind.JUDGE and info.normalises is None:
                stubbed.setdefault(method, []).append(metric)
    judges = sorted({s.options["judge"] for s in signatures.values() if "judge" in s.options})
    line = f"rag-judge: evaluators: {', '.join(e.type for e in config.evaluators)}"
    lines = [line + (f" · judge: {', '.join(judges)}" if judges else "")]
    for method, metrics in stubbed.items():
        lines.append(
            f"rag-judge: note: {', '.join(metrics)} scored by the stub judge, {method}, not an "
            "LLM (set client.provider to openai or local)"
        )
    return lines
