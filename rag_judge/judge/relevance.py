"""Graded relevance from the judge's per-context ``context_relevance`` judgments.

The rubric judges each retrieved context on its own (1-5); these helpers turn those grades into
the 0-3 relevance grades the retrieval metrics read, so a dataset without human relevance
judgments can still be scored with nDCG and friends (``relevance_from: context_relevance``).
"""

from __future__ import annotations

from rag_judge.data.chunks import Graded
from rag_judge.data.sample import Sample
from rag_judge.report.judgments import relevance_grade
from rag_judge.report.model import Judgment, PerContextJudgment

__all__ = ["graded_by_judge", "relevance_grade"]


def graded_by_judge(sample: Sample, judgment: Judgment | None) -> Graded | None:
    """The sample's retrieved contexts, in order, graded by the judge's per-context verdicts
    (the ideal ranking is theirs alone); None unless the judge graded every context, since a
    partial grading would rank the rest as irrelevant."""
    if not isinstance(judgment, PerContextJudgment):
        return None
    found = judgment.grades()
    if found is None or len(found) != len(sample.contexts):
        return None
    grades = [float(g) for g in found]
    return Graded(grades, [True] * len(grades), list(grades))
