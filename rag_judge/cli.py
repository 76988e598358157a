"""Command line: ``rag-judge run CONFIG``, ``rag-judge retrieval QRELS RUN -m METRIC`` and
``rag-judge compare BASE NEW``. Modules with a subcommand of their own register it through an
``add_parser(subparsers)`` that sets ``handler``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_judge import __version__, calibration, compare, gates, pairwise, run_command
from rag_judge.errors import RagJudgeError
from rag_judge.metrics.retrieval import compute, parse_metric
from rag_judge.trec import rankings_for, read_qrels, read_run

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-judge", description="Evaluate RAG pipelines.")
    parser.add_argument("--version", action="version", version=f"rag-judge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run_command.add_parser(sub)

    ret = sub.add_parser("retrieval", help="trec_eval-style metrics of a run against qrels")
    ret.add_argument("qrels", type=Path, help="TREC qrels: qid iter docid grade")
    ret.add_argument("run", type=Path, help="TREC run: qid Q0 docid rank score tag")
    ret.add_argument(
        "-m",
        "--metric",
        action="append",
        required=True,
        dest="metrics",
        help="metric name, repeatable: ndcg@10, map, mrr, precision@5, ...",
    )
    ret.add_argument("--per-query", action="store_true", help="also print per-query values")
    ret.add_argument("--format", choices=["table", "json"], default="table")
    ret.add_argument(
        "--threshold",
        type=float,
        default=1.0,
        help="minimum grade that counts as relevant (default 1)",
    )
    ret.add_argument(
        "-c",
        "--zero-missing",
        action="store_true",
        help="count qrels queries missing from the run as zeros (trec_eval -c)",
    )
    compare.add_parser(sub)
    gates.add_parser(sub)
    calibration.add_parser(sub)
    pairwise.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if hasattr(args, "handler"):
            return int(args.handler(args))
        return _retrieval(args)
    except RagJudgeError as exc:
        print(f"rag-judge: error: {exc}", file=sys.stderr)
        return 2


def _retrieval(args: argparse.Namespace) -> int:
    specs = [parse_metric(m) for m in args.metrics]
    qrels, run = read_qrels(args.qrels), read_run(args.run)
    qids, rankings = rankings_for(qrels, run, zero_missing=args.zero_missing)
    if not qids:
        raise RagJudgeError(f"no query of {args.run} is judged in {args.qrels}")
    values = compute(rankings, specs, args.threshold)
    means = {name: float(np.mean(v)) for name, v in values.items()}
    if args.format == "json":
        out: dict[str, object] = {"metrics": means}
        if args.per_query:
            out["per_query"] = {
                q: {name: float(v[i]) for name, v in values.items()} for i, q in enumerate(qids)
            }
        print(json.dumps(out, indent=2))
        return 0
    # trec_eval's layout: measure, query (or "all"), value.
    width = max(len(s.name) for s in specs)
    if args.per_query:
        for i, q in enumerate(qids):
            for name, v in values.items():
                print(f"{name:<{width}}\t{q}\t{v[i]:.4f}")
    print(f"{'num_q':<{width}}\tall\t{len(qids)}")
    for name, mean in means.items():
        print(f"{name:<{width}}\tall\t{mean:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
