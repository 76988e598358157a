"""``rag-judge calibrate REPORT LABELS``: judge scores against human labels, and the
renderings of the agreement (a terminal table, Markdown, JSON)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from rag_judge.analysis.calibration import (
    CalibrationResult,
    calibrate,
    labels_from_dataset,
    load_labels,
)
from rag_judge.report._format import num
from rag_judge.report.model import Report

__all__ = ["add_parser", "render_markdown", "render_table", "run_calibrate"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cal = subparsers.add_parser(
        "calibrate", help="agreement of the judge's scores with human labels (ρ, κ, α)"
    )
    cal.add_argument("report", type=Path, help="report.json with judge rubric scores")
    cal.add_argument("labels", type=Path, help="human labels: .jsonl or .csv (id + rubric columns)")
    cal.add_argument(
        "--column", metavar="NAME",
        help="LABELS is the dataset itself; read each sample's labels from metadata.NAME",
    )  # fmt: skip
    cal.add_argument("--format", choices=["table", "md", "json"], default="table")
    cal.set_defaults(handler=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    labels = (
        labels_from_dataset(args.labels, args.column) if args.column else load_labels(args.labels)
    )
    report = Report.load(args.report)
    ids = set(report.ids())
    if not ids & labels.keys():
        print(
            f"rag-judge calibrate: warning: no sample id is in both {args.report} "
            f"({len(ids)} sample ids) and {args.labels} ({len(labels)} labelled ids); "
            "nothing to calibrate (do the two files describe the same dataset?)",
            file=sys.stderr,
        )
        return 1
    results = calibrate(report, labels)
    if args.format == "json":
        print(json.dumps({k: asdict(v) for k, v in results.items()}, indent=2, ensure_ascii=False))
    elif args.format == "md":
        print(render_markdown(results))
    else:
        print(render_table(results))
    return 0


# ---- rendering ----------------------------------------------------------------------------

_HEADER = ["rubric", "n", "Spearman ρ", "QWK κ", "Krippendorff α", "exact", "within ±1", "unpaired"]


def _cells(r: CalibrationResult) -> list[str]:
    stats = (r.spearman, r.kappa, r.alpha, r.exact, r.within_one)
    return [r.rubric, str(r.n), *(num(v, ".3f") for v in stats), str(r.unpaired)]


def render_markdown(results: Mapping[str, CalibrationResult]) -> str:
    lines = ["| " + " | ".join(_HEADER) + " |", "|---|" + "---:|" * (len(_HEADER) - 1)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in results.values()]
    return "\n".join(lines)


def render_table(results: Mapping[str, CalibrationResult]) -> str:
    rows = [_HEADER, *(_cells(r) for r in results.values())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    )
