"""``rag-judge calibrate REPORT LABELS``: judge scores against human labels."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from rag_judge.analysis.calibration import (
    calibrate,
    labels_from_dataset,
    load_labels,
    render_markdown,
    render_table,
)
from rag_judge.report.model import Report

__all__ = ["add_parser", "run_calibrate"]


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
    results = calibrate(Report.load(args.report), labels)
    if args.format == "json":
        print(json.dumps({k: asdict(v) for k, v in results.items()}, indent=2, ensure_ascii=False))
    elif args.format == "md":
        print(render_markdown(results))
    else:
        print(render_table(results))
    return 0
