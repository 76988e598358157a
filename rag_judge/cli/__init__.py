"""Command line: every subcommand is one module of this package with an ``add_parser`` that
registers it and a handler it sets as ``handler`` (``rag-judge run``, ``retrieval``,
``compare``, ``gate``, ``calibrate``, ``pairwise``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rag_judge._version import __version__
from rag_judge.cli import calibrate, compare, gate, pairwise, retrieval, run
from rag_judge.errors import RagJudgeError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-judge", description="Evaluate RAG pipelines.")
    parser.add_argument("--version", action="version", version=f"rag-judge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (run, retrieval, compare, gate, calibrate, pairwise):
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except RagJudgeError as exc:
        print(f"rag-judge: error: {exc}", file=sys.stderr)
        return 2
