"""Graded relevance from the judge's per-context ``context_relevance`` judgments.

The rubric judges each retrieved context on its own (1-5); these helpers turn those grades into
the 0-3 relevance grades the retrieval metrics read, so a dataset without human relevance
judgments can still be scored with nDCG and friends. They take the per-sample judgments
(``EvaluatorResult.judgments`` or a report's ``SampleResult.judgments``), index-aligned with
the samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rag_judge.data.sample import Sample
from rag_judge.report.model import Judgment

__all__ = ["judged_relevance", "relevance_grade", "with_judged_relevance"]

Judgments = Sequence[Mapping[str, Judgment]]


def relevance_grade(score: float) -> int:
    """A 1–5 context_relevance score as a 0–3 relevance grade: 1→0, 2→0, 3→1, 4→2, 5→3.

    Levels 1 (unrelated) and 2 (on topic, but no help) are both "not relevant"; from 3 up each
    level is one grade. A weighted (non-integer) score is rounded half up first.
    """
    return max(0, math.floor(score + 0.5) - 2)


def _graded(judged: Mapping[str, Judgment], rubric: str) -> list[Judgment] | None:
    """The per-context judgments of ``rubric``, or None unless every context was graded."""
    entry = judged.get(rubric)
    if entry is None or entry.score is None or entry.contexts is None:
        return None
    return entry.contexts


def judged_relevance(
    samples: Sequence[Sample], judgments: Judgments, rubric: str = "context_relevance"
) -> list[dict[str, int] | None]:
    """Per sample, {context id: grade 0–3} from the judge's per-context grades; None for a
    sample whose contexts were not all graded (a partial table would rank the rest as 0).
    Contexts without an id are left out (``with_judged_relevance`` grades them in place)."""
    out: list[dict[str, int] | None] = []
    for sample, judged in zip(samples, judgments, strict=True):
        graded = _graded(judged, rubric)
        if graded is None:
            out.append(None)
            continue
        out.append(
            {
                c.id: relevance_grade(g.score)
                for c, g in zip(sample.contexts, graded)
                if c.id is not None and g.score is not None
            }
        )
    return out


def with_judged_relevance(
    samples: Sequence[Sample], judgments: Judgments, rubric: str = "context_relevance"
) -> list[Sample]:
    """Samples with the judge's grades as each context's ``relevance``, for samples that carry
    no judgments of their own (human judgments always win). Feed them to the retrieval metrics."""
    out = []
    for sample, judged in zip(samples, judgments, strict=True):
        graded = _graded(judged, rubric)
        if sample.judged_grades() is not None or graded is None:
            out.append(sample)
            continue
        contexts = tuple(
            c.model_copy(update={"relevance": float(relevance_grade(g.score))})
            if g.score is not None
            else c
            for c, g in zip(sample.contexts, graded)
        )
        out.append(sample.model_copy(update={"contexts": contexts}))
    return out
