"""The options of ``rag-judge run --sequential`` and the call they make (docs/sequential.md)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from rag_judge.config import ExperimentConfig
from rag_judge.errors import ConfigError
from rag_judge.pipeline.sequential import SequentialRun, run_sequential
from rag_judge.report.model import Report

__all__ = ["add_sequential", "args_sequential", "sequential_run"]


def add_sequential(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sequential gates (docs/sequential.md)")
    group.add_argument(
        "--sequential", action="store_true",
        help="judge seeded random chunks and stop as soon as every gate is decided by an "
        "anytime-valid confidence sequence; the report covers the samples judged",
    )  # fmt: skip
    group.add_argument("--chunk", type=int, metavar="N",
                       help="samples per chunk (default: 5%% of the dataset)")  # fmt: skip
    group.add_argument("--alpha", type=float, default=0.05,
                       help="error rate of each gate's sequence (default 0.05)")  # fmt: skip
    group.add_argument("--baseline", type=Path, metavar="REPORT",
                       help="with --sequential: a paired drop gate per --metric against "
                       "this report.json")  # fmt: skip
    group.add_argument("--max-drop", type=float, default=0.0, metavar="X",
                       help="the drop allowed against --baseline (default 0)")  # fmt: skip
    group.add_argument(
        "--metric",
        action="append",
        metavar="M",
        help="a metric of the drop gate (repeatable; default: the gated ones)",
    )


def args_sequential(args: argparse.Namespace) -> bool:
    """Whether the run is sequential; its options without --sequential are an error."""
    on = bool(getattr(args, "sequential", False))
    if not on and (getattr(args, "baseline", None) or getattr(args, "chunk", None)):
        raise ConfigError("--baseline and --chunk go with --sequential")
    return on


def sequential_run(
    args: argparse.Namespace, config: ExperimentConfig, extra_gates: Mapping[str, str | float]
) -> SequentialRun:
    if args.chunk is not None and args.chunk < 1:
        raise ConfigError(f"--chunk must be at least 1, got {args.chunk}")
    if not 0.0 < args.alpha < 1.0:
        raise ConfigError(f"--alpha must be between 0 and 1, got {args.alpha}")
    baseline = Report.load(args.baseline) if args.baseline else None
    return run_sequential(
        config, chunk=args.chunk, alpha=args.alpha, extra_gates=extra_gates,
        baseline=baseline, max_drop=args.max_drop, metrics=args.metric,
    )  # fmt: skip
