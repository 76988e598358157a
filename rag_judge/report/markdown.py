"""report.md and the terminal's summary table, rendered from the Report model.

Every string from data (the run's name, sample ids, metric names, messages, table cells,
signatures) goes through ``md_text`` or ``md_code``: a sample id with a blank line, a ``#`` or
``<img onerror=...>`` renders as that text, not as a heading, a table or HTML, wherever the
file is shown (a PR comment renders it).
"""

from __future__ import annotations

from rag_judge.report.costs import cost_table
from rag_judge.report.format import (
    Column,
    Table,
    ci_label,
    markdown_table,
    md_code,
    md_text,
)
from rag_judge.report.judge_tables import judge_tables
from rag_judge.report.levels import (
    LEVEL_BRIEF,
    LEVEL_TITLES,
    degradation_table,
    level_groups,
    level_note,
    summary_rows,
    unit_tables,
)
from rag_judge.report.model import Report
from rag_judge.report.segments import segment_tables

__all__ = ["level_sections", "render_markdown", "summary_table"]

_MAX_ERRORS = 50
_MAX_UNIT_ROWS = 200  # per level; report.json holds every unit


def render_markdown(report: Report) -> str:
    name = str(report.config.get("name") or "rag-judge report")
    about = f"rag-judge {report.rag_judge_version} · {report.created}"
    lines = [
        f"# {md_text(name)}",
        "",
        f"{len(report.samples)} samples · {md_text(about)}",
        "",
    ]
    # A report scored per turn or per step has a section per level; any other, one table.
    lines += level_sections(report, "## ") or [summary_table(report), ""]
    for table in segment_tables(report.segments, report.confidence):  # group_by: segments.md
        lines += [f"## {table.title}", "", markdown_table(table), ""]
    degraded = degradation_table(report)
    if degraded is not None:
        lines += [f"## {degraded.title}", "", markdown_table(degraded), ""]
    for table in unit_tables(report, _MAX_UNIT_ROWS):
        lines += [f"## {table.title}", "", markdown_table(table), ""]
    if report.warnings:
        lines += ["## Warnings", ""]
        lines += [f"- **{md_text(w.metric)}**: {md_text(w.message)}" for w in report.warnings]
        lines.append("")
    index = report.index()
    failed = index.failures
    if failed:
        lines += ["## Errors", "", f"{len(failed)} metric values could not be computed:", ""]
        lines += [
            f"- {md_code(index.ids[i])} · {md_text(metric)}: {md_text(f.text())}"
            for i, metric, f in failed[:_MAX_ERRORS]
        ]
        if len(failed) > _MAX_ERRORS:
            lines.append(f"- … and {len(failed) - _MAX_ERRORS} more (see report.json)")
        lines.append("")
    for table in judge_tables(report):
        lines += [f"## {table.title}", "", markdown_table(table), ""]
    cost = cost_table(report)  # when a cost is known (docs/prices.md)
    if cost is not None:
        lines += [f"## {cost.title}", "", markdown_table(cost), ""]
    lines += ["## Signatures", "", "| metric | signature |", "|---|---|"]
    lines += [
        f"| {md_text(m)} | {md_code(s.render(), in_table=True)} |"
        for m, s in report.signatures.items()
    ]
    return "\n".join(lines) + "\n"


def summary_table(report: Report) -> str:
    """The summary as a Markdown table: ``n`` scored samples, ``errors`` failed (``unscored``
    of them verdicts that could not be read), ``n/a`` samples the metric does not apply to."""
    return markdown_table(_summary(report, list(report.summary)))


def level_sections(report: Report, heading: str, *, brief: bool = False) -> list[str]:
    """The summary as a section per level (per conversation, per turn, per step), each a
    ``heading`` line, what its ``n`` and interval count, and its table; empty when the report
    has no metric scored per turn or per step. ``brief`` says it in the heading (a terminal)."""
    lines: list[str] = []
    for level, metrics in level_groups(report):
        table = markdown_table(_summary(report, metrics))
        if brief:
            lines += [f"{heading}{LEVEL_TITLES[level]} ({LEVEL_BRIEF[level]})", "", table, ""]
        else:
            note = level_note(level, report.confidence)
            lines += [f"{heading}{LEVEL_TITLES[level]}", "", note, "", table, ""]
    return lines


def _summary(report: Report, metrics: list[str]) -> Table:
    columns = [Column("metric", "text"), Column("mean"), Column(ci_label(report.confidence))]
    columns += [Column(name) for name in ("n", "errors", "unscored", "n/a")]
    columns.append(Column("aggregate", "text"))
    return Table("Summary", columns, summary_rows(report, metrics))
