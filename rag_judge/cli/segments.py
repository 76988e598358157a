"""The segment options that ``run`` and ``compare`` share: ``--group-by KEY`` (repeatable) and
``--min-segment-n N``, and the check of a segment gate's key (docs/segments.md)."""

from __future__ import annotations

import argparse

from rag_judge.cli._args import positive_int
from rag_judge.config import ExperimentConfig
from rag_judge.errors import ConfigError
from rag_judge.report.segments import check_group_by, key_name, parse_segment_gate

__all__ = ["add_group_by", "checked_keys", "group_by_overrides", "segment_problem"]


def add_group_by(parser: argparse.ArgumentParser, what: str) -> None:
    """``--group-by metadata.KEY`` (repeatable; each key its own segments) and
    ``--min-segment-n N``; ``what`` says how they meet a config's."""
    parser.add_argument(
        "--group-by", action="append", metavar="KEY", dest="group_by",
        help="per-segment n, mean and CI of every metric, a segment per value of the sample's "
        f"metadata at KEY (e.g. metadata.topic); repeatable, each key apart; {what}",
    )  # fmt: skip
    parser.add_argument(
        "--min-segment-n", type=positive_int, metavar="N", dest="min_segment_n",
        help="a segment with fewer values gets no CI, no test and fails its gates (default 10)",
    )  # fmt: skip


def checked_keys(keys: list[str] | None) -> list[str]:
    """The ``--group-by`` keys, or a ConfigError that names the option."""
    try:
        return check_group_by(keys or [])
    except ValueError as exc:
        raise ConfigError(f"--{exc}".replace("--group_by", "--group-by", 1)) from None


def group_by_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The config keys that ``--group-by`` and ``--min-segment-n`` replace."""
    out: dict[str, object] = {}
    if getattr(args, "group_by", None):
        out["group_by"] = checked_keys(args.group_by)
    if getattr(args, "min_segment_n", None) is not None:
        out["min_segment_n"] = args.min_segment_n
    return out


def segment_problem(gate: str, config: ExperimentConfig) -> str | None:
    """Why a segment gate (``ndcg@10[topic=billing]``) cannot hold in a run of ``config``:
    its key is not one the run groups by. None for any other gate."""
    segment = parse_segment_gate(gate)
    if segment is None or f"metadata.{key_name(segment.key)}" in config.group_by:
        return None
    grouped = ", ".join(config.group_by) or "none"
    return f"a segment of {segment.key!r}, which the run does not group by (group_by: {grouped})"
