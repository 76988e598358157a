"""One Markdown pull-request comment of a run against its baseline (``rag-judge comment``).

It opens with a hidden marker (:data:`MARKER`), so a CI step can find its own comment and
update it in place. Then: a summary line; per metric the paired difference with its bootstrap
interval and the corrected p (``compare``'s :class:`CompareResult`); the gate verdicts; and,
for each metric that got worse, the samples that got worse the most. Every piece of data (ids,
metric names, paths, messages) goes through ``md_text`` or ``md_code``, so that no markup
comes from data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rag_judge.analysis.compare import (
    CompareResult,
    Comparison,
    MetricComparison,
    comparison_table,
    footer,
)
from rag_judge.analysis.gates import GateResult
from rag_judge.analysis.junit import testcase_name
from rag_judge.report.format import (
    MISSING,
    Column,
    Table,
    ci_label,
    interval,
    markdown_table,
    md_code,
    md_text,
    num,
    p_value,
)
from rag_judge.report.model import Direction, Report

__all__ = [
    "MARKER",
    "MAX_ID_CHARS",
    "MAX_REGRESSED_METRICS",
    "Regressed",
    "regressed_samples",
    "render_comment",
]

MARKER = "<!-- rag-judge-comment -->"  # what a CI step searches the comments for
MAX_ID_CHARS = 60  # a longer sample id is cut, so that one id cannot fill the comment
MAX_REGRESSED_METRICS = 10  # metrics with a sample table; the others are named in one line


@dataclass(frozen=True)
class Regressed:
    """One sample's value of a metric in both runs."""

    id: str
    base: float
    new: float


def regressed_samples(
    base: Report, new: Report, metric: str, direction: Direction, top: int
) -> list[Regressed]:
    """The ``top`` samples (or turns, steps) whose ``metric`` got worse the most, in the
    metric's direction, over the ids both reports scored with a finite value; ties in base
    order. Empty for a neutral metric: neither way is worse."""
    if direction is Direction.NEUTRAL or top < 1:
        return []
    sign = -1.0 if direction is Direction.LOWER else 1.0
    after = new.column(metric)
    found = []
    for i, b in base.column(metric).items():
        v = after.get(i)
        if b is None or v is None or not (math.isfinite(b) and math.isfinite(v)):
            continue
        gain = sign * (v - b)
        if gain < 0:
            found.append((gain, Regressed(i, b, v)))
    found.sort(key=lambda pair: pair[0])  # stable: equal losses keep the base's order
    return [r for _, r in found[:top]]


def render_comment(
    result: CompareResult,
    base: Report,
    new: Report,
    gates: GateResult | None = None,
    *,
    top: int = 3,
) -> str:
    """The comment: ``result`` must compare ``new`` (its one comparison) with ``base``."""
    (comp,) = result.comparisons
    alpha = 1.0 - result.options.confidence
    lines = [MARKER, f"## rag-judge: {md_code(comp.new)} vs {md_code(result.base)}", ""]
    lines += [_gate_line(gates), "", _summary(result, comp, alpha), ""]
    lines += ["### Metrics", "", markdown_table(_metric_table(result, comp, alpha)), ""]
    if gates is not None and gates.checked:
        lines += ["### Gates", "", markdown_table(_gate_table(gates)), ""]
    lines += _regressions(base, new, comp, top)
    lines.append(md_text(footer(result)))
    return "\n".join(lines) + "\n"


def _gate_line(gates: GateResult | None) -> str:
    if gates is None or not gates.checked:
        return "**Gates:** none given."
    n, bad = len(gates.checked), len(gates.failures)
    if bad:
        return f"**Gates: {bad} of {n} failed.**"
    return f"**Gates:** all {n} passed."


def _significant(mc: MetricComparison, alpha: float) -> bool:
    return mc.p_adjusted is not None and mc.p_adjusted < alpha


def _summary(result: CompareResult, comp: Comparison, alpha: float) -> str:
    """How many metrics changed significantly each way."""
    worse = better = 0
    for mc in comp.metrics.values():
        if _significant(mc, alpha):
            worse += mc.change() == "worse"
            better += mc.change() == "better"
    rest = len(comp.metrics) - worse - better
    test = "p" if result.correction == "none" else f"{result.correction}-corrected p"
    return md_text(
        f"Metrics: {worse} significantly worse, {better} significantly better, {rest} without a "
        f"significant change ({test} < {alpha:g})."
    )


def _metric_table(result: CompareResult, comp: Comparison, alpha: float) -> Table:
    corrected = result.correction != "none"
    columns = [Column("metric", "text"), Column("n"), Column("base"), Column("new")]
    columns += [Column("diff"), Column(ci_label(result.options.confidence))]
    columns += [Column(f"p ({result.correction})" if corrected else "p"), Column("change", "text")]
    rows = []
    for name, mc in comp.metrics.items():
        flag = "*" if mc.corpus or mc.signature_differs else ""
        change: str = mc.change() or MISSING
        if mc.change() in ("better", "worse") and _significant(mc, alpha):
            change += " (significant)"
        row = [name + flag, str(mc.n), num(mc.base_mean), num(mc.new_mean), num(mc.diff, "+.4f")]
        row += [interval(mc.ci_low, mc.ci_high, "+.4f"), p_value(mc.p_adjusted), change]
        rows.append(row)
    # compare's own notes: the pairing, corpus aggregates, options that differ, units
    notes = comparison_table(result, comp).notes
    return Table("metrics", columns, rows, notes)


def _gate_table(gates: GateResult) -> Table:
    """Failed gates first, each with its message."""
    checks = sorted(gates.checked, key=lambda c: c.passed)
    columns = [Column("result", "text"), Column("gate", "text"), Column("message", "text")]
    rows = [["PASS" if c.passed else "FAIL", testcase_name(c), c.message] for c in checks]
    return Table("gates", columns, rows)


def _regressions(base: Report, new: Report, comp: Comparison, top: int) -> list[str]:
    """A table of the most regressed samples for each metric that got worse, the metrics with
    the smallest corrected p first (the clearest regressions)."""
    # A normalised twin (faithfulness_norm) regresses on the same samples as its metric.
    worse = [
        (m, mc)
        for m, mc in comp.metrics.items()
        if mc.change() == "worse" and (m not in new.summary or new.summary[m].normalises is None)
    ]
    if not worse or top < 1:
        return []
    worse.sort(key=lambda pair: math.inf if pair[1].p_adjusted is None else pair[1].p_adjusted)
    lines = ["### Most regressed samples", ""]
    for name, mc in worse[:MAX_REGRESSED_METRICS]:
        found = regressed_samples(base, new, name, mc.direction, top)
        if not found:
            continue
        lines += [f"{md_code(name)} ({mc.direction.value} is better)", ""]
        lines += [markdown_table(_sample_table(found)), ""]
    more = [name for name, _ in worse[MAX_REGRESSED_METRICS:]]
    if more:
        lines += [md_text(f"Also worse: {', '.join(more)}."), ""]
    return lines


def _sample_table(found: Sequence[Regressed]) -> Table:
    columns = [Column("sample", "text"), Column("base"), Column("new"), Column("diff")]
    rows = [[_cut(r.id), num(r.base), num(r.new), num(r.new - r.base, "+.4f")] for r in found]
    return Table("samples", columns, rows)


def _cut(sample_id: str) -> str:
    return sample_id if len(sample_id) <= MAX_ID_CHARS else sample_id[: MAX_ID_CHARS - 1] + "…"
