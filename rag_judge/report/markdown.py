"""report.md and the terminal's summary table, rendered from the Report model."""

from __future__ import annotations

from rag_judge.report._format import ci_label, interval, markdown_table, num
from rag_judge.report._judge_tables import judge_tables
from rag_judge.report.model import Report

__all__ = ["render_markdown", "summary_table"]

_MAX_ERRORS = 50


def render_markdown(report: Report) -> str:
    name = report.config.get("name", "rag-judge report")
    lines = [
        f"# {name}",
        "",
        f"{len(report.samples)} samples · rag-judge {report.rag_judge_version} · {report.created}",
        "",
        summary_table(report),
        "",
    ]
    if report.warnings:
        lines += ["## Warnings", ""]
        lines += [f"- **{w.metric}**: {w.message}" for w in report.warnings]
        lines.append("")
    index = report.index()
    failed = [(index.ids[i], m, f.text()) for i, m, f in index.failures]
    if failed:
        lines += ["## Errors", "", f"{len(failed)} metric values could not be computed:", ""]
        lines += [f"- `{sid}` · {metric}: {msg}" for sid, metric, msg in failed[:_MAX_ERRORS]]
        if len(failed) > _MAX_ERRORS:
            lines.append(f"- … and {len(failed) - _MAX_ERRORS} more (see report.json)")
        lines.append("")
    for table in judge_tables(report):
        lines += [f"## {table.title}", "", table.note, ""]
        cells = [[_cell(c) for c in row] for row in table.rows]
        lines += [markdown_table(table.head, cells, {0, *table.text}), ""]
    lines += ["## Signatures", "", "| metric | signature |", "|---|---|"]
    lines += [f"| {m} | `{_cell(s.render())}` |" for m, s in report.signatures.items()]
    return "\n".join(lines) + "\n"


def summary_table(report: Report) -> str:
    """The summary as a Markdown table: ``n`` scored samples, ``errors`` failed (``unscored``
    of them verdicts that could not be read), ``n/a`` samples the metric does not apply to."""
    ci = ci_label(report.confidence)
    head = f"| metric | mean | {ci} | n | errors | unscored | n/a | aggregate |"
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|---|"]
    for metric, s in report.summary.items():
        cells = [metric, num(s.mean), interval(s.ci_low, s.ci_high), s.n, s.errors, s.unscored]
        rows.append("| " + " | ".join(map(str, [*cells, s.not_applicable, s.aggregate])) + " |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    """Escape a pipe, and flatten a line break, so the text stays inside its table cell."""
    return " ".join(text.replace("|", "\\|").splitlines())
