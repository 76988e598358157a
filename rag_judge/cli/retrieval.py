"""``rag-judge retrieval QRELS RUN -m METRIC``: trec_eval-style metrics of a run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_judge.data.ranking import rankings_for
from rag_judge.data.trec import read_qrels, read_run
from rag_judge.errors import RagJudgeError
from rag_judge.metrics.retrieval import (
    MIN_JUDGED,
    MetricSpec,
    aggregate,
    compute,
    is_count,
    parse_metric,
)

__all__ = ["add_parser", "run_retrieval"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ret = subparsers.add_parser("retrieval", help="trec_eval-style metrics of a run against qrels")
    ret.add_argument("qrels", type=Path, help="TREC qrels: qid iter docid grade")
    ret.add_argument("run", type=Path, help="TREC run: qid Q0 docid rank score tag")
    ret.add_argument(
        "-m",
        "--metric",
        action="append",
        required=True,
        dest="metrics",
        help="metric name, repeatable: ndcg@10, map, mrr, precision@5, bpref, iprec@0.1, ...",
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
    ret.add_argument(
        "-M",
        "--max-docs",
        type=int,
        default=None,
        help="evaluate only the top N documents of each ranking (trec_eval -M)",
    )
    ret.set_defaults(handler=run_retrieval)


def run_retrieval(args: argparse.Namespace) -> int:
    specs = [parse_metric(m) for m in args.metrics]
    qrels, run = read_qrels(args.qrels), read_run(args.run)
    qids, rankings = rankings_for(qrels, run, zero_missing=args.zero_missing)
    if not qids:
        raise RagJudgeError(f"no query of {args.run} is judged in {args.qrels}")
    coverage = _coverage(specs)  # judged@k, for the stale-qrels warning
    values = compute(rankings, [*specs, coverage], args.threshold, max_docs=args.max_docs)
    answered = set(run.query_ids) | set(run.empty)
    missing = {i for i, q in enumerate(qids) if q not in answered}  # only with -c
    _warn_if_missing(len(missing), len(qids))
    # judged@k of the rankings the run gave: a missing query is no sign of stale qrels
    shown = [i for i in range(len(qids)) if i not in missing]
    if shown:
        _warn_if_unjudged(coverage, aggregate(coverage, values[coverage.name][shown]))
    values = {spec.name: values[spec.name] for spec in specs}
    counts = {spec.name for spec in specs if is_count(spec)}  # trec_eval prints them as integers
    alls = {spec.name: aggregate(spec, values[spec.name]) for spec in specs}
    if args.format == "json":
        out: dict[str, object] = {"metrics": {n: _number(n in counts, v) for n, v in alls.items()}}
        if args.per_query:
            out["per_query"] = {
                q: {name: _number(name in counts, float(v[i])) for name, v in values.items()}
                for i, q in enumerate(qids)
            }
        print(json.dumps(out, indent=2))
        return 0
    # trec_eval's layout: measure, query (or "all"), value.
    width = max(len(s.name) for s in specs)
    if args.per_query:
        for i, q in enumerate(qids):
            for name, v in values.items():
                print(f"{name:<{width}}\t{q}\t{_text(name in counts, float(v[i]))}")
    print(f"{'num_q':<{width}}\tall\t{len(qids)}")
    for name, value in alls.items():
        print(f"{name:<{width}}\tall\t{_text(name in counts, value)}")
    return 0


def _number(count: bool, value: float) -> float | int:
    return int(value) if count else value


def _text(count: bool, value: float) -> str:
    return str(int(value)) if count else f"{value:.4f}"


def _coverage(specs: list[MetricSpec]) -> MetricSpec:
    """judged@k at the deepest cut-off asked for, else 10."""
    return MetricSpec("judged", max((s.k for s in specs if isinstance(s.k, int)), default=10))


def _warn_if_missing(missing: int, judged: int) -> None:
    """On stderr, when ``-c`` added judged queries the run does not answer: each scores 0 in
    every metric (and has no documents to be judged), which is what pulls the numbers down."""
    if missing:
        print(
            f"rag-judge: warning: {missing} of the {judged} judged queries are missing from the "
            "run; -c counts them as zeros in every metric",
            file=sys.stderr,
        )


def _warn_if_unjudged(coverage: MetricSpec, judged: float) -> None:
    """On stderr, when the judgments cover under ``MIN_JUDGED`` of the top k of the rankings
    the run gave: the run's unjudged documents count as irrelevant, so stale qrels would read
    as a worse run."""
    if judged < MIN_JUDGED:
        k = coverage.k
        print(
            f"rag-judge: warning: {coverage.name} is {judged:.3f}: only {judged:.0%} of the top "
            f"{k} documents are in the qrels, and the rest count as irrelevant; stale qrels (an "
            "index rebuilt since they were made) read as a worse run",
            file=sys.stderr,
        )
