"""report.md and the terminal's summary table, rendered from the Report model.

Every string from data (the run's name, sample ids, metric names, messages, table cells,
signatures) goes through ``md_text`` or ``md_code``: a sample id with a blank line, a ``#`` or
``<img onerror=...>`` renders as that text, not as a heading, a table or HTML, wherever the
file is shown (a PR comment renders it).
"""

from __future__ import annotations

from rag_judge.report._format import ci_label, interval, markdown_table, md_code, md_text, num
from rag_judge.report._judge_tables import judge_tables
from rag_judge.report.model import Report

__all__ = ["render_markdown", "summary_table"]

_MAX_ERRORS = 50


def render_markdown(report: Report) -> str:
    name = str(report.config.get("name") or "rag-judge report")
    about = f"rag-judge {report.rag_judge_version} · {report.created}"
    lines = [
        f"# {md_text(name)}",
        "",
        f"{len(report.samples)} samples · {md_text(about)}",
        "",
        summary_table(report),
        "",
    ]
    if report.warnings:
        lines += ["## Warnings", ""]
        lines += [f"- **{md_text(w.metric)}**: {md_text(w.message)}" for w in report.warnings]
        lines.append("")
    index = report.index()
    failed = [(index.ids[i], m, f.text()) for i, m, f in index.failures]
    if failed:
        lines += ["## Errors", "", f"{len(failed)} metric values could not be computed:", ""]
        lines += [
            f"- {md_code(sid)} · {md_text(metric)}: {md_text(msg)}"
            for sid, metric, msg in failed[:_MAX_ERRORS]
        ]
        if len(failed) > _MAX_ERRORS:
            lines.append(f"- … and {len(failed) - _MAX_ERRORS} more (see report.json)")
        lines.append("")
    for table in judge_tables(report):
        lines += [f"## {table.title}", "", table.note, ""]
        cells = [[md_text(c) for c in row] for row in table.rows]
        lines += [markdown_table(table.head, cells, {0, *table.text}), ""]
    lines += ["## Signatures", "", "| metric | signature |", "|---|---|"]
    lines += [
        f"| {md_text(m)} | {md_code(s.render(), in_table=True)} |"
        for m, s in report.signatures.items()
    ]
    return "\n".join(lines) + "\n"


def summary_table(report: Report) -> str:
    """The summary as a Markdown table: ``n`` scored samples, ``errors`` failed (``unscored``
    of them verdicts that could not be read), ``n/a`` samples the metric does not apply to."""
    ci = ci_label(report.confidence)
    head = f"| metric | mean | {ci} | n | errors | unscored | n/a | aggregate |"
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|---|"]
    for metric, s in report.summary.items():
        cells = [md_text(metric), num(s.mean), interval(s.ci_low, s.ci_high), s.n, s.errors]
        cells += [s.unscored, s.not_applicable, md_text(s.aggregate)]
        rows.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(rows)
