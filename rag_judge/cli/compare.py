"""``rag-judge compare BASE NEW...``: paired comparison of run reports, and its renderings
(a terminal table, Markdown for comparison.md, JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_judge.analysis.compare import (
    CompareOptions,
    CompareResult,
    compare_runs,
    comparison_table,
    footer,
)
from rag_judge.cli._args import positive_int
from rag_judge.cli._compare_segments import compare_by_segment
from rag_judge.cli.segments import add_group_by
from rag_judge.report.format import markdown_table, md_code, text_table
from rag_judge.report.result import LEVELS
from rag_judge.stats import CORRECTIONS

__all__ = ["add_parser", "render_markdown", "render_table", "run_compare"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare", help="paired significance tests of one or more runs against a base run"
    )
    p.add_argument("base", type=Path, help="base report.json (or its run folder)")
    p.add_argument("new", type=Path, nargs="+", help="report(s) to compare with the base")
    p.add_argument(
        "-m",
        "--metric",
        action="append",
        dest="metrics",
        help="metric to compare, repeatable (default: every metric in both)",
    )
    p.add_argument(
        "--level",
        choices=LEVELS,
        help="compare only the metrics of this level: conversation (a sample's), turn "
        "(turn.X, paired by conversation id and turn index) or step (default: every level)",
    )
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="none",
        help="multiple-comparison correction across all metrics and runs",
    )
    p.add_argument("--format", choices=["table", "md", "json"], default="table")
    p.add_argument("--resamples", type=positive_int, default=10_000, help="bootstrap resamples")
    p.add_argument(
        "--permutations",
        type=positive_int,
        default=10_000,
        help="random sign flips when n > 16 (smaller n is enumerated exactly)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the test")
    add_group_by(p, "each segment tested, corrected across segments and metrics")
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    options = CompareOptions(args.resamples, args.confidence, args.permutations, args.seed)
    if getattr(args, "group_by", None):  # segments: docs/segments.md
        return compare_by_segment(args, options)
    result = compare_runs(
        args.base,
        list(args.new),
        options,
        metrics=args.metrics,
        correction=args.correction,
        level=args.level,
    )
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    elif args.format == "md":
        print(render_markdown(result), end="")
    else:
        print(render_table(result))
    return 0


# ---- rendering ----------------------------------------------------------------------------


def render_table(result: CompareResult) -> str:
    out: list[str] = []
    for comp in result.comparisons:
        table = comparison_table(result, comp)
        out += [table.title, text_table(table), ""]
    out.append(footer(result))
    return "\n".join(out)


def render_markdown(result: CompareResult) -> str:
    # paths from data: md_code keeps them text; the tables escape their own cells
    out = [f"# Comparison with {md_code(result.base)}", ""]
    for comp in result.comparisons:
        out += [f"## {md_code(comp.new)}", "", markdown_table(comparison_table(result, comp)), ""]
    out.append(footer(result))
    return "\n".join(out) + "\n"
