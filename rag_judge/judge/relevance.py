"""Graded relevance from the judge's per-context ``context_relevance`` judgments.

The rubric judges each retrieved context on its own (1-5); these helpers turn those grades into
the 0-3 relevance grades the retrieval metrics read, so a dataset without human relevance
judgments can still be scored with nDCG and friends (``relevance_from: context_relevance``).
"""

from __future__ import annotations

import math

from rag_judge.data.chunks import Graded
from rag_judge.data.sample import Sample
from rag_judge.report.model import Judgment, PerContextJudgment

__all__ = ["graded_by_judge", "relevance_grade"]


def relevance_grade(score: float) -> int:
    """A 1–5 context_relevance score as a 0–3 relevance grade: 1→0, 2→0, 3→1, 4→2, 5→3.

    Levels 1 (unrelated) and 2 (on topic, but no help) are both "not relevant"; from 3 up each
    level is one grade. A weighted (non-integer) score is rounded half up first.
    """
    return max(0, math.floor(score + 0.5) - 2)


def graded_by_judge(sample: Sample, judgment: Judgment | None) -> Graded | None:
    """The sample's retrieved contexts, in order, graded by the judge's per-context verdicts
    (the ideal ranking is theirs alone); None unless the judge graded every context, since a
    partial grading would rank the rest as irrelevant."""
    if not isinstance(judgment, PerContextJudgment):
        return None
    scores = [j.score for j in judgment.contexts]
    if len(scores) != len(sample.contexts) or any(s is None for s in scores):
        return None
    grades = [float(relevance_grade(s)) for s in scores if s is not None]
    return Graded(grades, [True] * len(grades), list(grades))
