"""Output: the Report model (``model.py``, pure data) and its renderers (``markdown.py``, and
the ``html`` package: the page, its templates and chart geometry), which import the model and
never the reverse. Every renderer formats numbers and tables through ``format.py``; the judge
analyses' tables are built once, in ``judge_tables.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from rag_judge.report.html import write_html
from rag_judge.report.markdown import render_markdown, summary_table
from rag_judge.report.model import (
    SAMPLES_FILE,
    Failure,
    FailureKind,
    Judgment,
    MetricInfo,
    MetricKind,
    MetricSummary,
    Report,
    SampleFile,
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
    "write_json",
    "write_report",
]


def write_report(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.md and report.html into ``out_dir`` (and samples.jsonl, when
    the report's samples live in a file); returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md"}
    if isinstance(report.samples, SampleFile):
        paths["samples"] = out / SAMPLES_FILE
        report.samples.copy_to(paths["samples"])
    else:  # an earlier, larger run's file must not sit beside a report that does not name it
        (out / SAMPLES_FILE).unlink(missing_ok=True)
    write_json(report, paths["json"])
    _atomic_write(paths["md"], render_markdown(report))
    paths["html"] = write_html(report, out / "report.html")
    return paths


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_json(report: Report, path: Path) -> None:
    """``report.to_json()`` and a newline into ``path``, byte for byte, written one sample at a
    time: the whole report is never one dict or one string (at 10,000 samples those were
    most of a run's peak memory). Samples kept in a file are not repeated: report.json names
    the file beside it (``"samples_file": "samples.jsonl"``) where the list would be."""
    head = report.model_dump(mode="json", exclude={"samples"})
    in_file = isinstance(report.samples, SampleFile)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write("{")
        # A field left out of the dump when empty (segments) is left out here too.
        keys = [k for k in Report.model_fields if k == "samples" or k in head]
        for i, key in enumerate(keys):
            f.write(",\n  " if i else "\n  ")
            if key == "samples" and in_file:
                f.write(f'"samples_file": {json.dumps(SAMPLES_FILE)}')
            elif key == "samples":
                f.write('"samples": ')
                _write_samples(f, report)
            else:
                f.write(f"{json.dumps(key)}: " + _dumps(head[key], 2))
        f.write("\n}\n")
    tmp.replace(path)


def _write_samples(f: TextIO, report: Report) -> None:
    if not report.samples:
        f.write("[]")
        return
    f.write("[")
    for i, sample in enumerate(report.samples):
        f.write(("," if i else "") + "\n    " + _dumps(sample.model_dump(mode="json"), 4))
    f.write("\n  ]")


def _dumps(value: object, depth: int) -> str:
    """``value`` as ``json.dumps(..., indent=2)`` lays it out ``depth`` spaces in (strings
    never hold a raw newline, so every newline is layout)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return text.replace("\n", "\n" + " " * depth)
