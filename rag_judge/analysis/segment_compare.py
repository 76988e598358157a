"""``compare --group-by``: each segment of each NEW against BASE, tested as one family.

A pair belongs to a segment when both reports put its sample there (the sample ids both
reports have in that segment). Each segment and per-sample metric is ``compare``'s paired
test (:func:`compare_pairs`: bootstrap CI and sign-flip p) over those pairs; a segment with
fewer than ``min_n`` pairs is reported with its n and not tested. Every p-value of every NEW,
segment and metric is adjusted as one family (``holm`` when the comparison asked for no
correction: a segment split multiplies the tests, and uncorrected it would flag noise). A
segment is regressed when some metric there got worse (in its direction) with an adjusted p
below 1 − confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rag_judge.analysis.compare import CompareOptions, MetricComparison, compare_pairs
from rag_judge.analysis.segments import MIN_SEGMENT_N, members, segment_metrics
from rag_judge.errors import ConfigError
from rag_judge.report.format import MISSING, Column, Table, ci_label, interval, num, p_value
from rag_judge.report.model import Report
from rag_judge.report.segments import key_name
from rag_judge.stats import CORRECTIONS, adjust_pvalues

__all__ = ["SegmentComparison", "SegmentResult", "compare_segments", "segment_table"]


@dataclass
class SegmentComparison:
    """One segment of one NEW against BASE: per metric, the paired comparison (None where
    fewer than ``min_n`` pairs: too few to test)."""

    new: str
    key: str
    value: str
    n: int  # sample ids both reports have in the segment
    metrics: dict[str, MetricComparison | None] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{key_name(self.key)}={self.value}"


@dataclass
class SegmentResult:
    """Every segment of every NEW, with the family's correction and the regressed ones."""

    segments: list[SegmentComparison]
    correction: str
    min_n: int
    confidence: float

    def regressed(self) -> list[tuple[str, str, str]]:
        """(NEW, segment, metric) significantly worse after the correction."""
        alpha = 1.0 - self.confidence
        return [
            (s.new, s.name, m)
            for s in self.segments
            for m, mc in s.metrics.items()
            if mc is not None
            and mc.p_adjusted is not None
            and mc.p_adjusted < alpha
            and mc.change() == "worse"
        ]

    def to_dict(self) -> dict[str, Any]:
        """The ``segments`` part of ``compare --format json``."""
        return {
            "correction": self.correction,
            "min_segment_n": self.min_n,
            "segments": [asdict(s) for s in self.segments],
            "regressed": [{"new": n, "segment": s, "metric": m} for n, s, m in self.regressed()],
        }


def compare_segments(
    base: Report,
    news: Sequence[tuple[str, Report]],
    keys: Sequence[str],
    options: CompareOptions | None = None,
    *,
    metrics: list[str] | None = None,
    correction: str = "none",
    min_n: int = MIN_SEGMENT_N,
) -> SegmentResult:
    """Each segment of ``keys`` in each NEW against ``base`` (see the module's docstring)."""
    if correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")
    options = options or CompareOptions()
    family = "holm" if correction == "none" else correction
    base_members = members(base, keys)
    out: list[SegmentComparison] = []
    for label, new in news:
        new_members = members(new, keys)
        shared = [m for m in segment_metrics(base) if m in new.summary]
        if metrics:
            shared = [m for m in shared if m in metrics]
        before = {m: base.column(m) for m in shared}
        after = {m: new.column(m) for m in shared}
        for key in keys:
            for value, ids in base_members[key].items():
                theirs = set(new_members[key].get(value, ()))
                both = [i for i in ids if i in theirs]
                seg = SegmentComparison(label, key, value, len(both))
                for m in shared:
                    mc = _paired(before[m], after[m], both, options, min_n)
                    if mc is not None:
                        mc.direction = new.summary[m].direction
                    seg.metrics[m] = mc
                out.append(seg)
    cells = [mc for s in out for mc in s.metrics.values() if mc and mc.p_value is not None]
    adjusted = adjust_pvalues(np.array([mc.p_value for mc in cells], dtype=np.float64), family)
    for mc, p in zip(cells, adjusted):
        mc.p_adjusted = float(p)
    return SegmentResult(out, family, min_n, options.confidence)


def _paired(
    before: dict[str, float | None],
    after: dict[str, float | None],
    ids: list[str],
    options: CompareOptions,
    min_n: int,
) -> MetricComparison | None:
    pairs = [(before.get(i), after.get(i)) for i in ids]
    kept = [(b, a) for b, a in pairs if _finite(b) and _finite(a)]
    if len(kept) < min_n:
        return None
    arr = np.array(kept, dtype=np.float64).reshape(-1, 2)
    return compare_pairs(arr[:, 0], arr[:, 1], options, len(pairs) - len(kept))


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def segment_table(result: SegmentResult) -> Table:
    """A row per NEW, segment and metric; a segment too small to test says so."""
    ci = ci_label(result.confidence)
    columns = [Column("new", "text"), Column("segment", "text"), Column("metric", "text")]
    columns += [Column("n"), Column("diff"), Column(ci), Column("p")]
    columns += [Column(f"p ({result.correction})"), Column("verdict", "text")]
    regressed = set(result.regressed())
    rows = []
    for s in result.segments:
        for m, mc in s.metrics.items():
            if mc is None:
                rows.append([s.new, s.name, m, str(s.n), MISSING, MISSING, MISSING, MISSING])
                rows[-1].append(f"too few (n < {result.min_n}), not tested")
                continue
            verdict = "regressed" if (s.new, s.name, m) in regressed else "not regressed"
            rows.append([s.new, s.name, m, str(mc.n), num(mc.diff, "+.4f")])
            rows[-1] += [interval(mc.ci_low, mc.ci_high, "+.4f"), p_value(mc.p_value)]
            rows[-1] += [p_value(mc.p_adjusted), verdict]
    named = sorted({f"{n}: {s} ({m})" for n, s, m in regressed})
    notes = [
        "paired over the sample ids both reports have in the segment; p adjusted "
        f"({result.correction}) across every segment, metric and run; regressed: worse with "
        f"p ({result.correction}) < {1 - result.confidence:g}",
        f"regressed segments: {', '.join(named) if named else 'none'}",
    ]
    return Table("Segments", columns, rows, notes, "segments")
