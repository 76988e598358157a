"""Command line: every subcommand is one module of this package with an ``add_parser`` that
registers it and a handler it sets as ``handler`` (``rag-judge run``, ``retrieval``,
``compare``, ``gate``, ``calibrate``, ``pairwise``, ``audit``, ``synth``, ``ingest``,
``comment``, ``plan``, ``bridge``, ``label-plan``).

Progress goes to stderr while a command runs (a live line on a terminal, one line per step
otherwise, nothing with ``--quiet``). Ctrl-C stops a command at once: calls in flight are
cancelled, finished ones stay in the caches, and it says where things stood and exits 130
(a second Ctrl-C while it cleans up exits at once).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from rag_judge import _progress as progress
from rag_judge._version import __version__
from rag_judge.errors import RagJudgeError

__all__ = ["EXIT_INTERRUPTED", "entry", "main"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`)
RESUME = (
    "finished judge calls and BERTScore embeddings are kept in their caches (where the "
    "config enables them): rerunning the same command resumes from there; the interrupted "
    "experiment wrote no report"
)


COMMANDS = (
    "run",
    "retrieval",
    "compare",
    "gate",
    "calibrate",
    "pairwise",
    "audit",
    "synth",
    "ingest",
    "comment",
    "plan",
    "bridge",
    "label-plan",
)


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, with ``only``, that subcommand's module alone imported and
    the others registered by name: ``rag-judge retrieval`` then never imports pydantic, the
    judge or the report (a third of its run time on a large run)."""
    parser = argparse.ArgumentParser(prog="rag-judge", description="Evaluate RAG pipelines.")
    parser.add_argument("--version", action="version", version=f"rag-judge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        if only in (None, command):
            importlib.import_module(f"rag_judge.cli.{_module(command)}").add_parser(sub)
        else:  # never parsed: the command line names another one
            sub.add_parser(command)
    return parser


def _module(command: str) -> str:
    """The module of a command: ``label-plan`` lives in ``label_plan``."""
    return command.replace("-", "_")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _more_open_files()
    # Top-level options take no value, so a command comes first or the parser stops before it.
    args = _parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    display = progress.Display(progress.auto_mode(sys.stderr, quiet=getattr(args, "quiet", False)))
    with progress.showing(display):
        try:
            return int(args.handler(args))
        except RagJudgeError as exc:
            display.clear_line()
            print(f"rag-judge: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return _interrupted(display, args.command)
        except BrokenPipeError:
            # Python's recipe: point stdout at devnull so the exit's flush does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_BROKEN_PIPE


def _more_open_files() -> None:
    """The soft limit on open files raised to the hard one: a run past 8,192 samples keeps
    its per-sample arrays in open temporary files (about two a metric, ``data.column``), and a
    matrix keeps every variant's report until the comparison (macOS allows 256 by default)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    top = 65_536 if hard == resource.RLIM_INFINITY else min(hard, 65_536)
    # macOS refuses a soft limit above OPEN_MAX (10,240) even under an infinite hard one
    for want in (top, 24_576, 10_240, 4_096):
        if want <= soft or want > top:
            continue
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            return
        except (ValueError, OSError):
            continue


def _interrupted(display: progress.Display, command: str) -> int:
    """Say where things stood; a second Ctrl-C meanwhile exits at once."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _exit_now) if main_thread else None
    try:
        display.clear_line()
        print(f"\nrag-judge: interrupted: {display.status()}", file=sys.stderr)
        if command in ("run", "pairwise"):
            print(f"rag-judge: {RESUME}", file=sys.stderr)
        sys.stderr.flush()
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
    return EXIT_INTERRUPTED


def _exit_now(*_: object) -> None:
    os._exit(EXIT_INTERRUPTED)


def entry() -> None:
    """The ``rag-judge`` executable: ``main``, then exit. After Ctrl-C it exits without
    waiting for worker threads that cannot be cancelled (a target's own calls)."""
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
