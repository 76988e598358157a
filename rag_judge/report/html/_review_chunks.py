"""The data of the review mode's chunk grades: people grade the top-k chunks of each query 0-3,
for the retrieval metrics computed from judge grades (``relevance_from``) and corrected by PPI++
(``analysis/retrieval_ppi.py``, docs/judge-estimates.md).

The mode is offered when the run recorded ``report.chunk_grading`` (a retrieval evaluator with
``relevance_from`` whose metrics have a cut-off) and some sample the page holds has the judge's
grade on every retrieved chunk. k, the rubric and the people's grades the run read (which
pre-fill the page) are the run's, in that record. The card shows the top k chunks, or every
retrieved chunk when a corrected metric reads the whole list (``whole``: R@k, NDCG@k).

The queue is a seeded random order, drawn here and not in the page: the ids of the report's
samples with judge grades, in report order, shuffled by ``random.Random(seed).shuffle`` with
the run's seed. Every prefix of a random permutation is a random subset, so grading the first m
gives PPI its random slice. A page that holds only some samples queues those, in that order.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence

from rag_judge.data.sample import Sample
from rag_judge.report.model import PerContextJudgment, Report, SampleResult

__all__ = ["CHUNK_CHARS", "MODE", "chunk_json", "chunk_note", "chunk_review"]

MODE = "#chunks"  # the rubric selector's value for the mode: no rubric name has a "#"
CHUNK_CHARS = 4_000  # a chunk's text is cut there (the page stays light; people read it)
_KEY = "relevance"  # the label file's reserved key (analysis/relevance_labels.py)


def _judge_grades(result: SampleResult, rubric: str) -> list[int] | None:
    """The judge's 0-3 grade of each of the sample's ranked chunks, or None when the sample
    is graded by its own judgments or the judge did not grade every chunk (as the retrieval
    evaluator reads them: ``judge/relevance.py``)."""
    sample, judgment = result.sample, result.judgments.get(rubric)
    if sample is None or sample.has_judgments() or not isinstance(judgment, PerContextJudgment):
        return None
    grades = judgment.grades()
    return grades if grades is not None and len(grades) == len(sample.contexts) else None


def chunk_review(report: Report, indices: Sequence[int]) -> dict[str, object] | None:
    """The chunk mode's data for the samples at ``indices`` (those the page holds), or None
    when the report offers no chunk grading."""
    grading = report.chunk_grading
    if grading is None:
        return None
    rubric, depth = grading.rubric, grading.k
    eligible: list[str] = []
    for result in report.samples:
        if _judge_grades(result, rubric) is not None:
            eligible.append(result.id)
    items: list[dict[str, object]] = []
    at: dict[str, int] = {}
    for i in indices:
        result = report.samples[i]
        grades = _judge_grades(result, rubric)
        if grades is None or result.sample is None or result.id in at:
            continue
        at[result.id] = len(items)
        # Every retrieved chunk when a corrected metric reads the whole list (R@k, NDCG@k).
        items.append(_item(result.id, result.sample, grades if grading.whole else grades[:depth]))
    if not items:
        return None
    seed = grading.seed
    order = list(eligible)
    random.Random(seed).shuffle(order)
    prefill: dict[str, list[int | None]] = {}
    for sid, human in grading.human.items():
        if sid in at:  # by rank, an ungraded chunk (beyond the grading) None
            shown = len(items[at[sid]]["chunks"])  # type: ignore[arg-type]
            prefill[sid] = [*human[:shown], *[None] * (shown - len(human))]
    return {
        "mode": MODE,
        "rubric": rubric,
        "k": depth,
        "whole": grading.whole,
        "seed": seed,
        "items": items,
        "queue": [at[sid] for sid in order if sid in at],
        "labels": {sid: {_KEY: grades} for sid, grades in prefill.items()},
        "total": len(eligible),
    }


def chunk_note(data: Mapping[str, object]) -> str:
    """The page's one line on the chunk queue: how it was drawn and why grade from the top."""
    queue, total = data["queue"], data["total"]
    assert isinstance(queue, list) and isinstance(total, int)
    held = "" if len(queue) == total else f" (the {len(queue):,} of {total:,} this page holds)"
    which = "retrieved chunk" if data.get("whole") else f"of the top {data['k']} chunks"
    return (
        f"Chunk grades: the queue is the samples with the judge's chunk grades{held} in a "
        f"seeded random order (random.Random({data['seed']}).shuffle of their ids, the run's "
        f"seed), so the first m graded are a random slice for the corrected retrieval metrics; "
        f"grade from the top, every {which} of each. Keys: j or ↓ "
        "next chunk, k or ↑ previous, 0–3 grade it (then on to the next), Backspace clears, "
        "n or → next query, b or ← back."
    )


def chunk_json(data: Mapping[str, object]) -> str:
    """The data as JSON safe inside a ``<script type=application/json>`` block."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c")


def _item(sid: str, sample: Sample, judge: list[int]) -> dict[str, object]:
    chunks = [
        {"id": ctx.id, "text": _cut(ctx.text), "judge": g}
        for ctx, g in zip(sample.contexts, judge, strict=False)
    ]
    ids = [c["id"] for c in chunks]
    # The export grades by context id only when every chunk has one, each its own.
    by_id = all(isinstance(c, str) for c in ids) and len(set(ids)) == len(ids)
    return {
        "id": sid,
        "question": _cut(sample.question or ""),
        "answer": _cut(sample.answer or ""),
        "chunks": chunks,
        "by_id": by_id,
    }


def _cut(text: str) -> str:
    return text if len(text) <= CHUNK_CHARS else text[: CHUNK_CHARS - 1] + "…"
