"""``rag-judge synth CORPUS --out dataset.jsonl``: a test set from a corpus, with graded
relevance over a pool of chunks, and its manifest (``synth.json`` beside the dataset).

Exit 0 with the dataset written; 2 on bad input; 3 when the judge wrote no question at all
(every call failed), as ``rag-judge run`` exits 3 when an evaluator produced no value."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rag_judge.cli._exits import EXIT_JUDGE_FAILED
from rag_judge.report.format import Column, Table, num, text_table
from rag_judge.synth.estimate import estimate
from rag_judge.synth.generate import manifest, synthesise, write_dataset, write_manifest
from rag_judge.synth.settings import SynthConfig, load_synth_config, synth_config

__all__ = ["add_parser", "run_synth"]

MANIFEST = "synth.json"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "synth", help="synthesise a test set from a corpus, with graded relevance over a pool"
    )
    p.add_argument(
        "corpus", type=Path,
        help="a folder of .txt/.md files, a JSONL of {id, text} documents, or a JSONL of chunks "
        "{doc_id, start, end, text}",
    )  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="the dataset to write (JSON Lines)")
    p.add_argument("--questions", type=int, help="how many questions to write (default 20)")
    p.add_argument("--seed", type=int, help="seed of the draw and the requests (default 0)")
    p.add_argument("--config", type=Path, help="synth settings (YAML; docs/synth.md)")
    p.add_argument(
        "--dry-run", action="store_true",
        help="print the requests, tokens and cost each stage would take; call nothing",
    )  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run_synth)


def run_synth(args: argparse.Namespace) -> int:
    overrides = {"questions": args.questions, "seed": args.seed}
    if args.config is not None:
        config = load_synth_config(args.config, **overrides)
    else:
        config = synth_config({}, overrides)
    if args.dry_run:
        print(_estimate_table(args.corpus, config))
        return 0
    run = synthesise(args.corpus, config)
    write_dataset(run.samples, args.out)
    data = manifest(run, config, args.corpus)
    written = args.out.with_name(MANIFEST)
    write_manifest(data, written)
    kinds = ", ".join(f"{k} {v['written']}" for k, v in data["kinds"].items() if v["written"])
    print(f"wrote {args.out} ({len(run.samples)} questions: {kinds or 'none'}) and {written}")
    rejected = {name: f["rejected"] for name, f in data["filters"].items() if f["rejected"]}
    if rejected:
        print("rejected: " + ", ".join(f"{name} {n}" for name, n in rejected.items()))
    if len(run.samples) < config.questions:
        print(
            f"rag-judge: {len(run.samples)} of the {config.questions} questions asked for passed "
            "the filters (raise oversample, or see synth.json)",
            file=sys.stderr,
        )
    if data["failed"] == len(run.items):
        print(f"rag-judge: the judge wrote none of {len(run.items)} questions", file=sys.stderr)
        return EXIT_JUDGE_FAILED
    return 0


def _estimate_table(corpus: Path, config: SynthConfig) -> str:
    rows = [
        [
            s.stage + ("" if s.exact else " (estimate)"),
            str(s.requests),
            str(s.cache_hits),
            str(s.prompt_tokens_estimate),
            str(s.completion_tokens_max),
            "–" if s.cost_estimate is None else num(s.cost_estimate, ".4f"),
        ]
        for s in estimate(corpus, config)
    ]
    columns = [
        Column("stage", "text"),
        Column("requests"),
        Column("cached"),
        Column("prompt tokens"),
        Column("completion tokens (max)"),
        Column("cost"),
    ]
    notes = [
        "Questions are rendered exactly. Grades and closed-book answers are estimated with a "
        "stand-in question and a full pool: an upper bound of what the run asks."
    ]
    return text_table(Table("rag-judge synth --dry-run", columns, rows, notes))
