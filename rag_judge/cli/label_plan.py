"""``rag-judge label-plan REPORT --target-halfwidth H``: which samples to label, in which order,
for a rubric's human-scale mean to reach ±H (``analysis/label_plan.py``); with ``--labels``, the
estimate and its confidence sequence after the labels so far; with ``--html``, a review page
that follows the plan and says "stop: ±H reached" once it is."""

from __future__ import annotations

import argparse
from pathlib import Path

from rag_judge.analysis.calibration import load_labels
from rag_judge.analysis.label_plan import (
    LabelPlan,
    estimate_plan,
    make_plan,
    page_plan,
    report_key,
)
from rag_judge.errors import ConfigError
from rag_judge.report.html import write_html
from rag_judge.report.model import Report

__all__ = ["add_parser", "run_label_plan"]

_SHOWN = 10  # queued ids printed; plan.json holds them all


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "label-plan",
        help="plan which samples to label for a rubric's mean to reach ±H with few labels, "
        "and the estimate from the labels so far",
    )
    p.add_argument("report", type=Path, help="report.json with judge rubric scores")
    p.add_argument(
        "--target-halfwidth", type=float, metavar="H",
        help="the interval's half-width to reach, on the rubric's 1-5 scale (needed unless "
        "--plan gives the plan)",
    )  # fmt: skip
    p.add_argument("--rubric", help="the 1-5 rubric (default: the report's first)")
    p.add_argument("--seed", type=int, help="seed of the order and draws (default 0)")
    p.add_argument(
        "--confidence", type=float, metavar="LEVEL",
        help="level of the confidence sequence (default: the report's)",
    )  # fmt: skip
    p.add_argument(
        "--rate", type=float,
        help="share of the samples to queue (default: planned from the judge's uncertainty)",
    )  # fmt: skip
    p.add_argument(
        "--out", type=Path, help="where to write the plan (default: plan.json beside REPORT)"
    )
    p.add_argument("--plan", type=Path, help="use this plan.json instead of making one")
    p.add_argument("--labels", type=Path, help="labels so far (.jsonl or .csv): print the estimate")
    p.add_argument(
        "--html", type=Path, nargs="?", const=True, metavar="PATH",
        help="write a review page that follows the plan (default: review.html beside REPORT)",
    )  # fmt: skip
    p.set_defaults(handler=run_label_plan)


def run_label_plan(args: argparse.Namespace) -> int:
    report = Report.load(args.report)
    folder = args.report if args.report.is_dir() else args.report.parent
    if args.plan is not None:
        _plan_options_unused(args)
        plan = LabelPlan.load(args.plan)
        if plan.report != report_key(report):
            raise ConfigError(f"{args.plan} is a plan for report {plan.report!r}, not this one")
    else:
        if args.target_halfwidth is None:
            raise ConfigError("label-plan needs --target-halfwidth H (or --plan PLAN)")
        plan = make_plan(
            report,
            args.target_halfwidth,
            rubric=args.rubric,
            seed=0 if args.seed is None else args.seed,
            confidence=args.confidence,
            rate=args.rate,
        )
        out = args.out or folder / "plan.json"
        _write(out, plan.model_dump_json(indent=2) + "\n")
        queue = plan.queue()
        shown = ", ".join(queue[:_SHOWN]) + (", ..." if len(queue) > _SHOWN else "")
        print(
            f"{plan.rubric}: {len(queue)} of {len(plan.stream)} samples queued "
            f"(rate {plan.rate:g}, pi by {plan.rule}) for ±{plan.target_halfwidth:g} at "
            f"{plan.confidence:.0%}; plan written to {out}\nlabel in this order: {shown}"
        )
        if args.rate is None and plan.rate >= 1.0:
            print(
                f"the projection does not reach ±{plan.target_halfwidth:g} below rate 1: every "
                "sample is queued, and ±H may be out of reach even with every label"
            )
    if args.html is not None:
        page = folder / "review.html" if args.html is True else args.html
        _folder_of(page)
        write_html(report, page, plan=page_plan(plan))
        print(f"review page following the plan: {page}")
    if args.labels is not None:
        result = estimate_plan(plan, load_labels(args.labels))
        print(result.status(plan.target_halfwidth))
        if result.outside:
            print(
                f"{result.outside} labelled samples are not in the plan's queue: not used "
                "(a label the plan did not ask for would bias the estimate)"
            )
    return 0


def _plan_options_unused(args: argparse.Namespace) -> None:
    """With --plan, the options that make a plan would be silently ignored: refuse them."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("target_halfwidth", "rubric", "seed", "confidence", "rate")
        if getattr(args, name) is not None
    ]
    if given:
        raise ConfigError(
            f"{', '.join(given)}: the plan given by --plan fixes them; make a new plan to change "
            "them (a plan changed after seeing labels biases the estimate)"
        )


def _folder_of(path: Path) -> None:
    """An error naming ``path`` when its folder does not exist (before anything is written)."""
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: folder {path.parent} does not exist")


def _write(path: Path, text: str) -> None:
    _folder_of(path)
    path.write_text(text, encoding="utf-8")
