"""``rag-judge comment BASE NEW``: one Markdown pull-request comment of NEW against BASE.

The comment (``rag_judge.analysis.comment``) starts with a hidden marker, so a CI step can
update its own comment in place. It reports and never gates: the exit status is 0 whatever the
gates say (``rag-judge run`` and ``rag-judge gate`` exit 1 on a failed gate), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from rag_judge.analysis.comment import render_comment
from rag_judge.analysis.compare import CompareOptions, compare_all
from rag_judge.analysis.gates import RegressionRule, check_gates
from rag_judge.cli._args import positive_int
from rag_judge.cli.gate import thresholds_from_cli
from rag_judge.errors import ConfigError
from rag_judge.report.model import Report
from rag_judge.report.thresholds import parse_threshold
from rag_judge.stats import CORRECTIONS

__all__ = ["add_parser", "read_gates", "run_comment"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "comment",
        help="a Markdown pull-request comment of a run against a baseline run",
        description="Render one Markdown comment: per metric the paired difference NEW - BASE "
        "with its bootstrap CI and corrected p, the gate verdicts and the most regressed "
        "samples. It starts with the hidden marker <!-- rag-judge-comment --> so that a CI "
        "step can update its comment in place. Exit 0 whatever the gates say (2 on bad input).",
    )
    p.add_argument("base", type=Path, help="baseline report.json (or its run folder)")
    p.add_argument("new", type=Path, help="report.json of the run to comment on")
    p.add_argument(
        "--gates", type=Path, metavar="FILE",
        help="YAML of threshold gates on NEW: {METRIC: 'OP VALUE'}, or an experiment config "
        "(its gates: are read)",
    )  # fmt: skip
    p.add_argument(
        "--fail-under", action="append", default=[], metavar="METRIC=VALUE",
        help="gate on NEW: METRIC's mean must be at least VALUE (repeatable), e.g. ndcg@10=0.6",
    )  # fmt: skip
    p.add_argument(
        "--threshold", action="append", default=[], metavar="EXPR",
        help="'METRIC OP VALUE' gate on NEW (repeatable), as rag-judge gate takes it",
    )  # fmt: skip
    p.add_argument(
        "--max-drop", type=float, metavar="DROP",
        help="add a regression gate per metric: NEW may fall at most this far below BASE",
    )  # fmt: skip
    p.add_argument(
        "--significant-only", action="store_true",
        help="with --max-drop: fail a drop only if the paired bootstrap finds it significant",
    )  # fmt: skip
    p.add_argument(
        "-m", "--metric", action="append", dest="metrics",
        help="metric to compare, repeatable (default: every metric in both)",
    )  # fmt: skip
    p.add_argument(
        "--correction", choices=CORRECTIONS, default="holm",
        help="multiple-comparison correction of the p-values (default holm)",
    )  # fmt: skip
    p.add_argument(
        "--top",
        type=positive_int,
        default=3,
        metavar="N",
        help="regressed samples per metric (default 3)",
    )
    p.add_argument("--resamples", type=positive_int, default=10_000, help="bootstrap resamples")
    p.add_argument(
        "--permutations", type=positive_int, default=10_000,
        help="random sign flips when n > 16 (smaller n is enumerated exactly)",
    )  # fmt: skip
    p.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the test")
    p.add_argument(
        "--out", type=Path, metavar="FILE", help="write the comment here (default: stdout)"
    )
    p.set_defaults(handler=run_comment)


def read_gates(path: Path) -> dict[str, str | float]:
    """Threshold gates from a YAML file: a mapping of metric to threshold, or an experiment
    config whose ``gates:`` mapping is read (the same gates the run checked)."""
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--gates: file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--gates {path}: not YAML ({exc})") from None
    if isinstance(data, dict) and "gates" in data:
        data = data["gates"] or {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"--gates {path}: expected a mapping of metric to threshold (ndcg@5: '>= 0.55'), "
            "or a config with gates:"
        )
    gates: dict[str, str | float] = {}
    for metric, expr in data.items():
        if isinstance(expr, bool) or not isinstance(expr, (str, int, float)):
            raise ConfigError(f"--gates {path}: {metric}: expected a threshold, got {expr!r}")
        try:
            parse_threshold(expr, metric=str(metric))
        except ConfigError as exc:
            raise ConfigError(f"--gates {path}: {exc}") from None
        gates[str(metric)] = expr
    return gates


def run_comment(args: argparse.Namespace) -> int:
    if args.significant_only and args.max_drop is None:
        raise ConfigError("--significant-only needs --max-drop")
    thresholds = read_gates(args.gates) if args.gates is not None else {}
    thresholds.update(thresholds_from_cli(args.fail_under, args.threshold))
    options = CompareOptions(args.resamples, args.confidence, args.permutations, args.seed)
    base, new = Report.load(args.base), Report.load(args.new)
    result = compare_all(
        base,
        [(str(args.new), new)],
        options,
        metrics=args.metrics,
        correction=args.correction,
        base_label=str(args.base),
        allow_judge_change=True,  # a report, not a gate: a judge change is flagged (*)
    )
    rule = None
    if args.max_drop is not None:
        rule = RegressionRule(
            base,
            max_drop=args.max_drop,
            significant_only=args.significant_only,
            metrics=args.metrics,
            seed=args.seed,
            resamples=args.resamples,
            confidence=args.confidence,
            allow_judge_change=True,
        )
    gates = check_gates(new, thresholds, rule) if thresholds or rule is not None else None
    text = render_comment(result, base, new, gates, top=args.top)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0
