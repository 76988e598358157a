"""A run's segments as data: per value of a ``group_by`` key, each metric's n, mean and interval.

``Report.segments`` holds them (left out of report.json when the run asked for none), and
:func:`segment_tables` draws them as one :class:`Table` per key for every renderer. The
numbers come from ``rag_judge.analysis.segments``; docs/segments.md says how.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from rag_judge.report.format import MISSING, Column, Table, ci_label, interval, num

__all__ = [
    "MISSING_VALUE",
    "Segment",
    "SegmentGate",
    "SegmentMetric",
    "check_group_by",
    "key_name",
    "parse_segment_gate",
    "segment_tables",
]

MISSING_VALUE = "(missing)"  # the segment of the samples that lack the key
_KEY = re.compile(r"metadata(\.[^.\s\[\]=]+)+")
_GATE = re.compile(r"(?P<metric>.+?)\[(?P<key>[^=\[\]]+)=(?P<value>[^\[\]]*)\]")


def key_name(key: str) -> str:
    """How a key is written in a segment's name: ``metadata.topic`` -> ``topic``."""
    return key.removeprefix("metadata.")


def check_group_by(keys: Iterable[str]) -> list[str]:
    """The keys, or a ValueError naming the first that is not ``metadata.<name>[.<name>...]``
    or that repeats a segment name (``metadata.topic`` twice)."""
    out: list[str] = []
    for key in keys:
        if not _KEY.fullmatch(key):
            raise ValueError(
                f"group_by {key!r}: a key is a path into a sample's metadata, "
                "'metadata.<name>' (e.g. metadata.topic, metadata.user.tier)"
            )
        if key_name(key) in {key_name(k) for k in out}:
            raise ValueError(f"group_by {key!r}: given twice")
        out.append(key)
    return out


@dataclass(frozen=True)
class SegmentGate:
    """``ndcg@10[topic=billing]``: a metric's mean over one segment."""

    metric: str
    key: str  # as written: topic (or metadata.topic)
    value: str

    @property
    def name(self) -> str:
        return f"{key_name(self.key)}={self.value}"


def parse_segment_gate(name: str) -> SegmentGate | None:
    """The parts of a gate name of the form ``METRIC[KEY=VALUE]``, or None for any other."""
    match = _GATE.fullmatch(name)
    if match is None:
        return None
    return SegmentGate(match["metric"], match["key"].strip(), match["value"].strip())


class SegmentMetric(BaseModel):
    """One metric over one segment's samples: ``n`` scored, their mean, and the bootstrap
    interval, which is None when ``n`` is under the segment's ``min_n``."""

    model_config = ConfigDict(extra="forbid")

    n: int
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class Segment(BaseModel):
    """The samples whose value at ``key`` is ``value`` (``(missing)``: those that lack it)."""

    model_config = ConfigDict(extra="forbid")

    key: str  # the path, metadata.topic
    value: str
    n: int  # samples in the segment
    min_n: int = Field(ge=1)  # fewer scored values than this: no interval, no gate verdict
    metrics: dict[str, SegmentMetric] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        """``topic=billing``: the form a gate names it by (``ndcg@10[topic=billing]``)."""
        return f"{key_name(self.key)}={self.value}"

    def too_few(self, metric: str | None = None) -> bool:
        """Whether the segment (or ``metric`` in it) has fewer scored values than ``min_n``."""
        n = self.n if metric is None else self.metrics[metric].n
        return n < self.min_n


def segment_tables(segments: list[Segment], confidence: float) -> list[Table]:
    """A table per key: a row per segment and metric, with a note under any segment too small
    for an interval. Empty when there are no segments."""
    keys = list(dict.fromkeys(s.key for s in segments))
    columns = [Column("segment", "text"), Column("metric", "text"), Column("n")]
    columns += [Column("mean"), Column(ci_label(confidence)), Column("note", "text")]
    tables = []
    for key in keys:
        rows: list[list[str]] = []
        few: list[str] = []
        for seg in (s for s in segments if s.key == key):
            for metric, m in seg.metrics.items():
                note = f"too few (n < {seg.min_n})" if seg.too_few(metric) else ""
                rows.append([seg.value, metric, str(m.n), num(m.mean)])
                rows[-1] += [interval(m.ci_low, m.ci_high), note or MISSING]
            if seg.too_few():
                few.append(f"{seg.value} ({seg.n})")
        notes = [
            f"a segment is the samples with one value of {key}, and {MISSING_VALUE} those that "
            "lack it; the CI is a bootstrap over the segment's values with the run's seed"
        ]
        if few:
            minimum = segments[0].min_n
            notes.append(
                f"too few samples for an interval or a gate verdict (min_segment_n {minimum}): "
                f"{', '.join(few)}; a gate on such a segment fails"
            )
        title = f"Segments by {key_name(key)}"
        anchor = f"segments-{key_name(key)}"
        tables.append(Table(title, columns, rows, notes, anchor))
    return tables
