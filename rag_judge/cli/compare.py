"""``rag-judge compare BASE NEW...``: paired comparison of run reports, and its renderings
(a terminal table, Markdown for comparison.md, JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_judge.analysis.bridge import Bridge
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
from rag_judge.errors import ConfigError
from rag_judge.report.format import markdown_table, md_code, text_table
from rag_judge.report.result import LEVELS
from rag_judge.stats import CORRECTIONS

__all__ = ["add_judge_change", "add_parser", "render_markdown", "render_table", "run_compare"]


def add_judge_change(parser: argparse.ArgumentParser) -> None:
    """``--allow-judge-change`` and ``--bridge``, shared by ``compare`` and ``gate``."""
    parser.add_argument(
        "--allow-judge-change", action="store_true",
        help="compare judge metrics whose judge changed (model, template, scoring...) as they "
        "are, flagged; without it (or --bridge) such a comparison is refused (exit 2)",
    )  # fmt: skip
    parser.add_argument(
        "--bridge", type=Path, metavar="BRIDGE.json",
        help="compare judge metrics whose judge changed through this bridge (rag-judge "
        "bridge): the base translated to the new judge's scale, the interval widened",
    )  # fmt: skip


def load_bridge(args: argparse.Namespace) -> Bridge | None:
    return None if args.bridge is None else Bridge.load(args.bridge)


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
    add_judge_change(p)
    add_group_by(p, "each segment tested, corrected across segments and metrics")
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    options = CompareOptions(args.resamples, args.confidence, args.permutations, args.seed)
    if getattr(args, "group_by", None):  # segments: docs/segments.md
        if args.bridge is not None:
            raise ConfigError("--bridge does not apply to --group-by (compare the whole runs)")
        return compare_by_segment(args, options)
    result = compare_runs(
        args.base,
        list(args.new),
        options,
        metrics=args.metrics,
        correction=args.correction,
        level=args.level,
        allow_judge_change=args.allow_judge_change,
        bridge=load_bridge(args),
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
