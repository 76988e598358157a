"""Segments of a run: its samples grouped by the value at a metadata key (``group_by``).

Each key is taken on its own: ``group_by: [metadata.topic, metadata.lang]`` gives the topic
segments and, apart, the language segments, not their combinations (which would split the
samples into cells too small to say anything). A segment's samples are those whose value at
the key equals the segment's value; samples that lack the key form the ``(missing)`` segment.
Per segment and per-sample metric: n, the exact mean, and a percentile bootstrap interval
over the segment's values with the run's seed and resamples. A metric with fewer than
``min_n`` values in a segment is reported with its n and no interval, never hidden.

A gate can name a segment, ``ndcg@10[topic=billing]``; a segment with too few values fails
it (a verdict on four samples is not one). docs/segments.md has a worked example.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rag_judge.report.model import Report
from rag_judge.report.result import level_of
from rag_judge.report.segments import (
    MISSING_VALUE,
    Segment,
    SegmentGate,
    SegmentMetric,
    check_group_by,
    parse_segment_gate,
)
from rag_judge.stats import bootstrap_ci

__all__ = [
    "MIN_SEGMENT_N",
    "SegmentGate",
    "check_group_by",
    "members",
    "parse_segment_gate",
    "resolve_segment_gate",
    "segment_metrics",
    "summarize_segments",
    "value_at",
]

MIN_SEGMENT_N = 10


def value_at(metadata: dict[str, Any], key: str) -> str:
    """The segment value of a sample's ``metadata`` at ``key``: a string as it is, any other
    value as JSON (``3``, ``true``), and :data:`MISSING_VALUE` where the path is absent."""
    node: Any = {"metadata": metadata}
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING_VALUE
        node = node[part]
    return node if isinstance(node, str) else json.dumps(node, sort_keys=True)


def members(report: Report, keys: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    """key -> segment value -> the sample ids in it, values sorted and ``(missing)`` last.
    One pass over the samples (a report whose samples are in a file reads each row once)."""
    found: dict[str, dict[str, list[str]]] = {k: {} for k in keys}
    for result in report.samples:
        metadata = result.sample.metadata if result.sample is not None else {}
        for key in keys:
            found[key].setdefault(value_at(metadata, key), []).append(result.id)
    return {k: dict(sorted(v.items(), key=_order)) for k, v in found.items()}


def _order(item: tuple[str, list[str]]) -> tuple[bool, str]:
    return item[0] == MISSING_VALUE, item[0]


def segment_metrics(report: Report) -> list[str]:
    """The metrics a segment summarises: those scored per sample (not per turn or step)."""
    return [m for m in report.summary if level_of(m) == "conversation"]


def summarize_segments(
    report: Report,
    keys: Sequence[str],
    *,
    min_n: int = MIN_SEGMENT_N,
    resamples: int,
    confidence: float,
    seed: int,
) -> list[Segment]:
    """Every segment of every key, each metric's n, mean and interval over its values."""
    columns = {m: report.column(m) for m in segment_metrics(report)}
    out = []
    for key, segments in members(report, keys).items():
        for value, ids in segments.items():
            metrics = {}
            for metric, column in columns.items():
                scored = [v for v in (column[i] for i in ids) if v is not None and math.isfinite(v)]
                metrics[metric] = _summary(scored, min_n, resamples, confidence, seed)
            out.append(Segment(key=key, value=value, n=len(ids), min_n=min_n, metrics=metrics))
    return out


def _summary(
    values: list[float], min_n: int, resamples: int, confidence: float, seed: int
) -> SegmentMetric:
    if not values:
        return SegmentMetric(n=0)
    mean = math.fsum(values) / len(values)
    if len(values) < min_n:  # too few for an interval anyone should act on
        return SegmentMetric(n=len(values), mean=mean)
    arr = np.array(values, dtype=np.float64)
    low, high = bootstrap_ci(arr, resamples=resamples, confidence=confidence, seed=seed)
    return SegmentMetric(n=len(values), mean=mean, ci_low=low, ci_high=high)


# ---- gates on a segment -----------------------------------------------------------------------


def resolve_segment_gate(report: Report, gate: SegmentGate) -> tuple[float | None, str | None]:
    """The segment's mean of the gate's metric, or why there is none: no such segment, the
    metric is not summarised there, or fewer values than the segment's ``min_n`` (the gate
    then fails: a verdict on a handful of samples is not one)."""
    if not report.segments:
        return None, "the report has no segments (set group_by in the config, or --group-by)"
    names = [s.name for s in report.segments]
    found = next((s for s in report.segments if s.name == gate.name), None)
    if found is None:
        return None, f"no segment {gate.name!r} in the report (its segments: {', '.join(names)})"
    if gate.metric not in found.metrics:
        return None, f"{gate.metric!r} is not summarised per segment"
    m = found.metrics[gate.metric]
    if found.too_few(gate.metric):
        return None, (
            f"too few samples in the segment for a verdict: n={m.n} < min_segment_n "
            f"{found.min_n}; the gate fails closed"
        )
    if m.mean is None:
        return None, "no value in the segment"
    return m.mean, None
