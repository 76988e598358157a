"""``rag-judge pairwise A B``: which of two variants answers each question better.

Exit 0 with the result; 2 on bad input; 3 when the judge scored no pair at all (every call
failed or was unreadable: a dead server, a wrong model name), as ``rag-judge run`` exits 3 when
an evaluator produced no value. The result is printed in every case."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from pydantic import ValidationError

from rag_judge.cli._exits import EXIT_JUDGE_FAILED
from rag_judge.data.jsonl import read_jsonl
from rag_judge.judge.pairwise import PairwiseJudge
from rag_judge.judge.settings import Judge
from rag_judge.llm import ClientConfig
from rag_judge.llm.providers import PROVIDERS
from rag_judge.messages import cli_error

__all__ = ["EXIT_JUDGE_FAILED", "add_parser", "run_pairwise"]

MAX_REASONS = 3  # distinct reasons shown on stderr


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "pairwise", help="LLM-judge which of two variants answers each question better"
    )
    p.add_argument("a", type=Path, help="dataset JSONL with variant A's answers")
    p.add_argument("b", type=Path, help="dataset JSONL with variant B's answers (same ids)")
    p.add_argument("--rubric", default="correctness", help="built-in rubric or .yaml file")
    # The registered providers when the parser is built (a plugin imported earlier counts).
    p.add_argument("--provider", choices=sorted(PROVIDERS), default="stub")
    p.add_argument("--model", help="judge model (required for openai)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache", type=_cache, default="default",
        help="SQLite cache of judge replies (default: the judge cache every config shares, so "
        "an interrupted comparison resumes)",
    )  # fmt: skip
    cache.add_argument(
        "--no-cache", dest="cache", action="store_const", const=None,
        help="cache nothing: every verdict is asked again",
    )  # fmt: skip
    p.add_argument(
        "--level", choices=["conversation", "turn"], default="conversation",
        help="turn: judge each turn of a conversation on its own, paired by conversation id and "
        "turn index (the interval resamples conversations)",
    )  # fmt: skip
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="seed of the judge and the bootstrap")
    p.add_argument("--format", choices=["table", "md", "json"], default="table")
    p.add_argument(
        "--quiet", action="store_true",
        help="no progress on stderr (default: a live line on a terminal, else a line per step)",
    )  # fmt: skip
    p.set_defaults(handler=run_pairwise)


def _cache(text: str) -> Path | str:
    # "default" names the shared judge cache, as in a config; anything else is a file.
    return text if text == "default" else Path(text)


def run_pairwise(args: argparse.Namespace) -> int:
    a, b = read_jsonl(args.a), read_jsonl(args.b)
    try:
        client = ClientConfig(provider=args.provider, model=args.model, base_url=args.base_url)
        judge = PairwiseJudge(
            rubric=args.rubric,
            judge=Judge(client=client, cache=args.cache),
            resamples=args.resamples,
            seed=args.seed,
            level=args.level,
        )
    except ValidationError as exc:
        raise cli_error(exc) from None
    result = judge.compare(list(a), list(b), labels=(str(args.a), str(args.b)))
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    elif args.format == "md":
        print(result.to_markdown(), end="")
    else:
        print(result.to_table())
    if not result.pairs or result.counts["n"]:
        return 0
    # Total failure: no verdict to count, so no win rate; say why, as `run` does.
    reasons = Counter(p.reason or "unscored" for p in result.pairs)
    print(f"rag-judge: the judge scored none of {len(result.pairs)} pairs", file=sys.stderr)
    for reason, n in reasons.most_common(MAX_REASONS):
        print(f"  ×{n}: {reason}", file=sys.stderr)
    return EXIT_JUDGE_FAILED
