"""``rag-judge ingest TRACES... --out dataset.jsonl``: OpenTelemetry traces (OTLP-JSON exports)
as a rag-judge dataset, one sample per trace and one conversation per session
(docs/traces.md, "Traces in").

Exit 0 with the dataset written; 2 on bad input (the error names the file, span and
attribute)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rag_judge.data.jsonl import write_jsonl
from rag_judge.data.otel import read_otlp
from rag_judge.data.sample import Sample

__all__ = ["add_parser", "run_ingest"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="turn OpenTelemetry traces (OTLP-JSON) into a dataset",
        description="Read OTLP-JSON trace exports (OpenInference or OTel GenAI spans) and write "
        "one sample per trace, one conversation per session id. Exit 0 when written, 2 on bad "
        "input.",
    )
    p.add_argument(
        "traces", type=Path, nargs="+",
        help="OTLP-JSON files: one export request per file, or one per line (the collector's "
        "file exporter)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="the dataset to write (JSON Lines)")
    p.add_argument(
        "--skip-invalid", action="store_true",
        help="skip a trace that cannot be read, with a warning, instead of stopping",
    )  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")
    p.set_defaults(handler=run_ingest)


def run_ingest(args: argparse.Namespace) -> int:
    dataset = read_otlp(args.traces, skip_invalid=args.skip_invalid)
    write_jsonl(dataset.samples, args.out)
    if not args.quiet:
        print(f"wrote {args.out} ({_summary(dataset.samples)})")
    return 0


def _summary(samples: tuple[Sample, ...]) -> str:
    """``3 samples from 4 traces: 1 single-turn, 1 with steps, 1 conversation``."""
    conversations = sum("session_id" in s.metadata for s in samples)
    stepped = sum(s.is_conversation() for s in samples) - conversations
    single = len(samples) - conversations - stepped
    traces = single + stepped + sum(len(s.conversation_turns()) for s in samples
                                    if "session_id" in s.metadata)  # fmt: skip
    kinds = [(single, "single-turn"), (stepped, "with steps"), (conversations, "conversation")]
    parts = [f"{n} {kind}" + ("s" if kind == "conversation" and n != 1 else "")
             for n, kind in kinds if n]  # fmt: skip
    plural = "" if len(samples) == 1 else "s"
    return f"{len(samples)} sample{plural} from {traces} trace{'' if traces == 1 else 's'}: " + (
        ", ".join(parts)
    )
