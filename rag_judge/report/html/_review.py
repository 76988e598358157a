"""The data of report.html's review mode: the samples a person labels one at a time (those the
page holds: their details are what the review card shows), the judge's scores, and per rubric
the queue the page walks, the most uncertain verdicts first.

A verdict's uncertainty is the disagreement the run measured: the spread (standard deviation)
of a jury's or of n sampled verdicts, else the entropy (bits) of the judge's distribution over
"1".."5" (logprobs, or a label-scoring local model); both run from 0 to about 2 on a 1-5 scale.
A verdict with neither (or with no disagreement) comes after every uncertain one, in report
order. Only verdicts that exist are offered: a rubric's queue holds the samples its judge scored
(not those whose call failed or whose reply had no verdict to read), and a rubric the judge
scored nowhere is not offered at all (a judge that failed completely has nothing to review; the
report's warning says so). A label is one of the rubric's scale, 1-5.

The data goes into the page as JSON inside a ``<script type=application/json>`` block,
which the browser never runs (the page's CSP stays as it is); ``<`` is escaped in it so no text
can close the block.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from rag_judge.report.model import Judgment, Report

__all__ = ["review_data", "review_json", "review_note", "review_rubrics", "uncertainty"]

_LABELS = range(1, 6)  # what a person can give a 1-5 rubric


def review_rubrics(report: Report, indices: Sequence[int] | None = None) -> list[str]:
    """The judge rubrics a person can label 1-5 (:meth:`Report.graded_rubrics`) that have a
    verdict to review: scored on at least one sample (of those at ``indices``, when given: the
    samples a page holds)."""
    rubrics = [m for m in report.graded_rubrics() if report.summary[m].n > 0]
    if indices is None:
        return rubrics
    index = report.index()
    return [m for m in rubrics if any(_finite(index.value(m, i)) is not None for i in indices)]


def uncertainty(judgment: Judgment | None) -> float | None:
    """How uncertain a verdict is (higher: more), or None when the run measured nothing."""
    return None if judgment is None else judgment.uncertainty()


def review_data(report: Report, indices: Sequence[int]) -> dict[str, object]:
    """What the review mode needs beyond the page's sample details (which it shows): the
    storage key, the rubrics, per sample (of those at ``indices``, the samples the page holds)
    its id and the judge's scores, per rubric the queue, and the report's own labels of those
    rubrics (the page starts from them)."""
    rubrics = review_rubrics(report, indices)
    items: list[dict[str, object]] = []
    keys: dict[str, list[float | None]] = {m: [] for m in rubrics}
    scored: dict[str, list[bool]] = {m: [] for m in rubrics}
    for i in indices:
        r = report.samples[i]
        scores = {m: _finite(r.scores.get(m)) for m in rubrics}
        items.append({"id": r.id, "scores": scores})
        for m in rubrics:
            keys[m].append(uncertainty(r.judgments.get(m)))
            scored[m].append(scores[m] is not None)
    name = str(report.config.get("name") or "report")
    return {
        "key": f"rag-judge-review:{name}:{report.created}",
        "rubrics": rubrics,
        "items": items,
        "uncertainty": keys,
        "queues": {m: _queue(keys[m], scored[m]) for m in rubrics},
        "labels": _labels(report.labels, rubrics),
        "total": len(report.samples),
    }


def review_note(report: Report, shown: int) -> str:
    """What a page that cannot hold every sample lets a person review: only the samples it
    holds (the rest have no details on the page to show); empty when it holds them all."""
    total = len(report.samples)
    if shown >= total:
        return ""
    return (
        f"Only the {shown:,} samples this page holds can be reviewed here (the report has "
        f"{total:,}; report.json holds every one), most uncertain first among them."
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _labels(
    labels: Mapping[str, Mapping[str, float]], rubrics: Sequence[str]
) -> dict[str, dict[str, int]]:
    """The report's labels a reviewer can change: the review rubrics' whole 1-5 labels (what
    the export writes and ``load_labels`` reads back; other metrics' labels stay in report.json)."""
    out: dict[str, dict[str, int]] = {}
    for sid, row in labels.items():
        kept = {m: int(row[m]) for m in rubrics if m in row and row[m] in _LABELS}
        if kept:
            out[sid] = kept
    return out


def _queue(keys: list[float | None], scored: list[bool]) -> list[int]:
    """Indices of the samples with a verdict (a score), the most uncertain first, then those
    with no measure in their order."""
    have = [i for i, s in enumerate(scored) if s]
    return sorted(have, key=lambda i: (keys[i] is None, -(keys[i] or 0.0), i))


def review_json(report: Report, indices: Sequence[int]) -> str:
    """:func:`review_data` as JSON safe inside a ``<script type=application/json>`` block."""
    data = review_data(report, indices)
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    return text.replace("<", "\\u003c")
