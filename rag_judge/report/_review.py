"""The data of report.html's review mode: the samples a person labels one at a time (those the
page holds: their details are what the review card shows), the judge's scores, and per rubric
the queue the page walks, the most uncertain verdicts first.

A verdict's uncertainty is the disagreement the run measured: the spread of a jury's or of n
sampled verdicts, else the entropy (bits) of the judge's distribution over "1".."5" (logprobs,
or a label-scoring local model). A verdict with neither comes after every uncertain one, in
report order. The data goes into the page as JSON inside a ``<script type=application/json>``
block, which the browser never runs (the page's CSP stays as it is); ``<`` is escaped in it so
no text can close the block.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from rag_judge.report.model import Judgment, MetricKind, Report

__all__ = ["review_data", "review_json", "review_rubrics", "uncertainty"]


def review_rubrics(report: Report) -> list[str]:
    """The judge rubrics a person can label 1-5: judge metrics on the (1, 5) scale."""
    out = []
    for m, s in report.summary.items():
        sig = report.signatures.get(m)
        restated = sig is not None and "given" in sig.options  # <rubric>_answered: a subset
        rubric = s.kind is MetricKind.JUDGE and s.normalises is None and not restated
        if rubric and tuple(s.scale) == (1.0, 5.0):
            out.append(m)
    return out


def uncertainty(judgment: Judgment | None) -> float | None:
    """How uncertain a verdict is (higher: more), or None when the run measured nothing."""
    if judgment is None or judgment.score is None:
        return None
    if judgment.spread is not None:
        return judgment.spread if judgment.spread > 0 else None
    if judgment.probs:
        total = sum(judgment.probs.values())
        if total <= 0:
            return None
        entropy = -sum(p / total * math.log2(p / total) for p in judgment.probs.values() if p > 0)
        return entropy if entropy > 0 else None
    return None


def review_data(report: Report, indices: Sequence[int]) -> dict[str, object]:
    """What the review mode needs beyond the page's sample details (which it shows): the
    storage key, the rubrics, per sample (of those at ``indices``, the samples the page holds)
    its id and the judge's scores, per rubric the queue, and the report's own labels."""
    rubrics = review_rubrics(report)
    items: list[dict[str, object]] = []
    keys: dict[str, list[float | None]] = {m: [] for m in rubrics}
    for i in indices:
        r = report.samples[i]
        items.append({"id": r.id, "scores": {m: r.scores.get(m) for m in rubrics}})
        for m in rubrics:
            keys[m].append(uncertainty(r.judgments.get(m)))
    name = str(report.config.get("name") or "report")
    return {
        "key": f"rag-judge-review:{name}:{report.created}",
        "rubrics": rubrics,
        "items": items,
        "uncertainty": keys,
        "queues": {m: _queue(keys[m]) for m in rubrics},
        "labels": report.labels,
        "total": len(report.samples),
    }


def _queue(keys: list[float | None]) -> list[int]:
    """Indices, the most uncertain first, then those with no measure in their order."""
    return sorted(range(len(keys)), key=lambda i: (keys[i] is None, -(keys[i] or 0.0), i))


def review_json(report: Report, indices: Sequence[int]) -> str:
    """:func:`review_data` as JSON safe inside a ``<script type=application/json>`` block."""
    data = review_data(report, indices)
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    return text.replace("<", "\\u003c")
