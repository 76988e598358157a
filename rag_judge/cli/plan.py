"""``rag-judge plan --baseline REPORT --mde 0.02``: the paired samples a comparison needs to
detect a drop of that size, per metric, before the run (docs/power.md); a terminal table,
Markdown or JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_judge.analysis.power import DEFAULT_RHO, PlanOptions, PlanResult, plan_runs, plan_table
from rag_judge.errors import ConfigError
from rag_judge.report.format import markdown_table, md_code, text_table

__all__ = ["add_parser", "render_markdown", "render_table", "run_plan"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "plan", help="samples needed to detect a paired drop, from a baseline report"
    )
    p.add_argument(
        "--baseline",
        type=Path,
        required=True,
        metavar="REPORT",
        help="baseline report.json (or its run folder)",
    )
    p.add_argument(
        "--mde", type=float, required=True, help="the drop to detect, in the metric's units"
    )
    p.add_argument(
        "-m",
        "--metric",
        action="append",
        dest="metrics",
        metavar="M",
        help="metric to plan, repeatable (default: every per-sample metric)",
    )
    p.add_argument("--power", type=float, default=0.8, help="power (default 0.8)")
    p.add_argument("--alpha", type=float, default=0.05, help="the test's level (default 0.05)")
    p.add_argument("--sides", choices=["two", "one"], default="two", help="default: two")
    p.add_argument(
        "--new",
        type=Path,
        metavar="REPORT",
        help="a second report of the same samples: the sd of the actual paired differences",
    )
    p.add_argument(
        "--rho",
        type=float,
        help=f"assumed correlation of two runs' per-sample scores, without --new "
        f"(default {DEFAULT_RHO})",
    )
    p.add_argument("--format", choices=["table", "md", "json"], default="table")
    p.set_defaults(handler=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    if args.rho is not None and args.new is not None:
        raise ConfigError("--rho is assumed for a baseline alone; --new measures the variance")
    options = PlanOptions(
        mde=args.mde,
        power=args.power,
        alpha=args.alpha,
        sides=args.sides,
        rho=DEFAULT_RHO if args.rho is None else args.rho,
    )
    result = plan_runs(args.baseline, options, new=args.new, metrics=args.metrics)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    elif args.format == "md":
        print(render_markdown(result), end="")
    else:
        print(render_table(result))
    return 0


def render_table(result: PlanResult) -> str:
    table = plan_table(result)
    return "\n".join([table.title, text_table(table)])


def render_markdown(result: PlanResult) -> str:
    # paths from data: md_code keeps them text; the table escapes its own cells
    return f"# Plan for {md_code(result.baseline)}\n\n{markdown_table(plan_table(result))}\n"
