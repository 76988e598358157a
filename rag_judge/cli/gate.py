"""``rag-judge gate REPORT``: check a report against thresholds and a baseline."""

from __future__ import annotations

import argparse
from pathlib import Path

from rag_judge.analysis.compare import CompareOptions
from rag_judge.analysis.gates import RegressionRule, check_gates
from rag_judge.analysis.junit import JUnitSuite, write_junit
from rag_judge.cli._args import positive_int
from rag_judge.cli.compare import add_judge_change, load_bridge
from rag_judge.errors import ConfigError
from rag_judge.report.model import Report
from rag_judge.report.result import LEVELS
from rag_judge.report.thresholds import NAMED_THRESHOLD, OPERATORS, parse_threshold

__all__ = ["add_fail_under", "add_junit", "add_parser", "run_gate", "thresholds_from_cli"]


def add_fail_under(parser: argparse.ArgumentParser) -> None:
    """``--fail-under METRIC=VALUE``, shared by ``gate`` and ``run``."""
    parser.add_argument(
        "--fail-under", action="append", default=[], metavar="METRIC=VALUE",
        help="fail (exit 1) if METRIC's mean is below VALUE (repeatable), e.g. ndcg@10=0.6",
    )  # fmt: skip


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gate = subparsers.add_parser(
        "gate",
        help="check a report against thresholds and a baseline (exit 1 if a gate fails)",
        description="Exit 0 when every gate passes, 1 when one fails, 2 on bad input (a gate "
        "that names no metric of the report included).",
    )
    gate.add_argument("report", type=Path, help="report.json of the run to check")
    add_fail_under(gate)
    gate.add_argument(
        "--threshold", action="append", default=[], metavar="EXPR",
        help="'METRIC OP VALUE', OP one of >= > <= < == (repeatable), e.g. 'unscored_rate<=0.02'; "
        "METRIC_ppi (and METRIC_ppi.ci_low/.ci_high) is a judge metric's bias-corrected mean "
        "from the report's human labels",
    )  # fmt: skip
    gate.add_argument("--baseline", type=Path, help="report.json to compare against")
    gate.add_argument("--max-drop", type=float, help="largest allowed drop of a metric's mean")
    gate.add_argument(
        "--significant-only", action="store_true",
        help="fail a drop only if the paired bootstrap finds it significant",
    )  # fmt: skip
    gate.add_argument(
        "--metric", action="append", dest="metrics", metavar="METRIC",
        help="compare only these metrics with the baseline (repeatable; default: all shared)",
    )  # fmt: skip
    gate.add_argument(
        "--level", choices=LEVELS,
        help="compare only the metrics of this level with the baseline: conversation, turn "
        "(turn.X, paired by conversation id and turn index) or step (default: every level)",
    )  # fmt: skip
    gate.add_argument(
        "--lower-is-better", action="append", default=[], metavar="METRIC",
        help="read METRIC as lower-is-better, whatever it declares (repeatable; every metric "
        "declares its direction: docs/metric-direction.md)",
    )  # fmt: skip
    gate.add_argument(
        "--resamples", type=positive_int, default=CompareOptions.resamples,
        help=f"bootstrap resamples of --significant-only (default {CompareOptions.resamples}, "
        "as compare)",
    )  # fmt: skip
    gate.add_argument(
        "--confidence", type=float, default=CompareOptions.confidence,
        help="CI level of --significant-only (default 0.95)",
    )  # fmt: skip
    gate.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    add_judge_change(gate)
    gate.add_argument("-v", "--verbose", action="store_true", help="print passing gates too")
    add_junit(gate)
    gate.set_defaults(handler=run_gate)


def add_junit(parser: argparse.ArgumentParser) -> None:
    """``--junit FILE``, shared by ``gate`` and ``run``: the gates as JUnit XML."""
    parser.add_argument(
        "--junit", type=Path, metavar="FILE",
        help="also write the gate verdicts as JUnit XML: a testcase per gate (CI test reports)",
    )  # fmt: skip


def thresholds_from_cli(
    fail_under: list[str], threshold: list[str] | None = None
) -> dict[str, str | float]:
    """Gates from ``--fail-under METRIC=VALUE`` and ``--threshold 'METRIC OP VALUE'``."""
    thresholds: dict[str, str | float] = {}
    for item in fail_under:
        metric, sep, value = item.rpartition("=")
        if not sep or not metric.strip():
            raise ConfigError(f"--fail-under {item!r}: expected METRIC=VALUE, e.g. ndcg@10=0.6")
        thresholds[metric.strip()] = f">= {value}"
    for item in threshold or []:
        match = NAMED_THRESHOLD.match(item)
        if match is None:
            raise ConfigError(
                f"--threshold {item!r}: expected METRIC OP VALUE with OP one of "
                f"{', '.join(OPERATORS)}, e.g. 'ndcg@10>=0.6'"
            )
        thresholds[match["metric"]] = f"{match['op']} {match['value']}"
    for metric, expr in thresholds.items():
        parse_threshold(expr, metric=metric)
    return thresholds


def run_gate(args: argparse.Namespace) -> int:
    thresholds = thresholds_from_cli(args.fail_under, args.threshold)
    if args.baseline is None and args.max_drop is not None:
        raise ConfigError("--max-drop needs --baseline")
    if not thresholds and args.baseline is None:
        raise ConfigError("nothing to check: give --fail-under, --threshold or --baseline")
    report = Report.load(args.report)
    rule = None
    if args.baseline is not None:
        rule = RegressionRule(
            Report.load(args.baseline),
            max_drop=0.0 if args.max_drop is None else args.max_drop,  # no drop allowed
            significant_only=args.significant_only,
            lower_is_better=args.lower_is_better,
            metrics=args.metrics,
            level=args.level,
            seed=args.seed,
            resamples=args.resamples,
            confidence=args.confidence,
            allow_judge_change=args.allow_judge_change,
            bridge=load_bridge(args),
            baseline_label=str(args.baseline),
            report_label=str(args.report),
        )
    elif args.bridge is not None or args.allow_judge_change:
        raise ConfigError("--bridge and --allow-judge-change need --baseline")
    result = check_gates(report, thresholds, rule)
    print(result.render(verbose=args.verbose))
    if args.junit is not None:
        write_junit(args.junit, [JUnitSuite(str(args.report), result)])  # named by its path
    return 0 if result.passed else 1
