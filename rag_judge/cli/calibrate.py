"""``rag-judge calibrate REPORT LABELS``: judge scores against human labels, and the
renderings (a terminal table, Markdown, JSON) of the agreement and of the bias-corrected
(PPI++) estimates. The estimates' table is report.md's own (``report/judge_tables.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rag_judge.analysis.calibration import (
    CalibrationResult,
    agreement_table,
    calibrate,
    labels_from_dataset,
    load_labels,
)
from rag_judge.analysis.ppi import few_labels_warnings, ppi_estimates, settings
from rag_judge.analysis.relevance_labels import load_relevance, relevance_from_dataset
from rag_judge.analysis.retrieval_ppi import (
    RetrievalCorrection,
    judge_graded,
    retrieval_corrections,
)
from rag_judge.cli._exits import EXIT_JUDGE_FAILED
from rag_judge.pipeline.rejudge import report_config
from rag_judge.report.format import markdown_table, text_table
from rag_judge.report.judge_tables import confusion_table, ppi_table
from rag_judge.report.model import PPIEstimate, Report
from rag_judge.stats.ppi import PPIMethod, as_method

__all__ = [
    "add_parser",
    "render_markdown",
    "render_ppi_markdown",
    "render_ppi_table",
    "render_table",
    "run_calibrate",
    "to_json",
]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cal = subparsers.add_parser(
        "calibrate",
        help="agreement of the judge's scores with human labels (ρ, κ, α) and the "
        "bias-corrected (PPI++) means",
    )
    cal.add_argument("report", type=Path, help="report.json with judge rubric scores")
    cal.add_argument("labels", type=Path, help="human labels: .jsonl or .csv (id + rubric columns)")
    cal.add_argument(
        "--column", metavar="NAME",
        help="LABELS is the dataset itself; read each sample's labels from metadata.NAME",
    )  # fmt: skip
    cal.add_argument("--format", choices=["table", "md", "json"], default="table")
    # Every setting of the estimates defaults to the report's run, so that calibrate with the
    # run's labels reproduces the report's numbers.
    cal.add_argument(
        "--pass-score", type=float, metavar="SCORE",
        help="a 1-5 rubric passes at a score >= SCORE, for the corrected pass rate "
        "(default: the report's labels.pass_score, else 4)",
    )  # fmt: skip
    cal.add_argument(
        "--confidence", type=float, metavar="LEVEL",
        help="interval level of the estimates (default: the report's, e.g. 0.95)",
    )  # fmt: skip
    cal.add_argument(
        "--seed", type=int,
        help="seed of the pass rate's bootstrap (default: the report's seed, else 0)",
    )  # fmt: skip
    cal.add_argument(
        "--method", choices=[m.value for m in PPIMethod],
        help="interval method of the estimates: t (small-sample) or ppi_py (the reference "
        "package's normal interval) (default: the report's labels.method, else t)",
    )  # fmt: skip
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
    estimates = ppi_estimates(
        report,
        labels,
        confidence=args.confidence,
        pass_score=args.pass_score,
        seed=args.seed,
        method=args.method,
    )
    estimates = dict(sorted(estimates.items()))  # in the agreement table's order
    # Retrieval metrics from judge grades, corrected by the chunk grades (``relevance``).
    retrieval = _retrieval(args, report)
    estimates |= retrieval.estimates
    rows = {sid: {**labels.get(sid, {}), **retrieval.labels.get(sid, {})} for sid in labels}
    warnings = [*retrieval.warnings, *few_labels_warnings(report, estimates, rows)]
    for warning in warnings:
        print(f"rag-judge calibrate: warning: {warning.message}", file=sys.stderr)
    confusion = retrieval.confusion
    if args.format == "json":
        out: dict[str, Any] = to_json(results, estimates)
        if confusion is not None:
            out["grade_confusion"] = confusion.model_dump(mode="json")
        print(json.dumps(out, indent=2, ensure_ascii=False))
    elif args.format == "md":
        parts = _parts(results, estimates, render_markdown, render_ppi_markdown)
        extra = [] if confusion is None else [markdown_table(confusion_table(confusion))]
        print("\n\n".join(parts + extra))
    else:
        parts = _parts(results, estimates, render_table, render_ppi_table)
        extra = [] if confusion is None else [text_table(confusion_table(confusion))]
        print("\n\n".join(parts + extra))
    if report.judge_scored_nothing():
        print("rag-judge calibrate: the report's judge scored no value", file=sys.stderr)
        return EXIT_JUDGE_FAILED
    return 0


def _retrieval(args: argparse.Namespace, report: Report) -> RetrievalCorrection:
    """The report's retrieval metrics from judge grades corrected by the label file's chunk
    grades, with the estimates' settings (by default the report's run's)."""
    if args.column:
        relevance = relevance_from_dataset(args.labels, args.column)
    else:
        relevance = load_relevance(args.labels)
    if not relevance or not report.config:
        return RetrievalCorrection()
    evaluators = judge_graded(report_config(report).evaluators)
    run = settings(report)
    return retrieval_corrections(
        report,
        evaluators,
        relevance,
        confidence=run.confidence if args.confidence is None else args.confidence,
        method=run.method if args.method is None else as_method(args.method),
    )


def to_json(
    results: Mapping[str, CalibrationResult], estimates: Mapping[str, PPIEstimate]
) -> dict[str, dict[str, Any]]:
    """``{rubric: {agreement fields..., "ppi": {estimate} | null}}``; a labelled metric without
    agreement statistics (a 0/1 rate) has ``ppi`` alone."""
    out: dict[str, dict[str, Any]] = {}
    for name, result in results.items():
        estimate = estimates.get(name)
        ppi = None if estimate is None else estimate.model_dump(mode="json")
        out[name] = {**asdict(result), "ppi": ppi}
    for name, estimate in estimates.items():
        out.setdefault(name, {"ppi": estimate.model_dump(mode="json")})
    return out


def _parts(
    results: Mapping[str, CalibrationResult],
    estimates: Mapping[str, PPIEstimate],
    agreement: Callable[[Mapping[str, CalibrationResult]], str],
    ppi: Callable[[Mapping[str, PPIEstimate]], str],
) -> list[str]:
    """The agreement table and the estimates' table, each where it has a row."""
    return ([agreement(results)] if results else []) + ([ppi(estimates)] if estimates else [])


# ---- rendering: the agreement's table and the estimates' (report.md's own) -------------------


def render_markdown(results: Mapping[str, CalibrationResult]) -> str:
    return markdown_table(agreement_table(results))


def render_table(results: Mapping[str, CalibrationResult]) -> str:
    return text_table(agreement_table(results))


def render_ppi_markdown(estimates: Mapping[str, PPIEstimate]) -> str:
    return markdown_table(ppi_table(estimates))


def render_ppi_table(estimates: Mapping[str, PPIEstimate]) -> str:
    return text_table(ppi_table(estimates))
