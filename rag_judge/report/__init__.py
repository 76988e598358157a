"""Output: the Report model (``model.py``, pure data) and its renderers (``markdown.py``,
``html.py`` with its template and chart geometry), which import the model and never the
reverse; every renderer formats numbers through ``_format.py``."""

from __future__ import annotations

from pathlib import Path

from rag_judge.report.html import write_html
from rag_judge.report.markdown import render_markdown, summary_table
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Judgment,
    MetricInfo,
    MetricKind,
    MetricSummary,
    Report,
    SampleResult,
    Signature,
)

__all__ = [
    "Failure",
    "FailureKind",
    "Judgment",
    "MetricInfo",
    "MetricKind",
    "MetricSummary",
    "Report",
    "SampleResult",
    "Signature",
    "render_markdown",
    "summary_table",
    "write_report",
]


def write_report(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.md and report.html into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md"}
    _atomic_write(paths["json"], report.to_json() + "\n")
    _atomic_write(paths["md"], render_markdown(report))
    paths["html"] = write_html(report, out / "report.html")
    return paths


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
