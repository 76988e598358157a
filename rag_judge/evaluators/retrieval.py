"""Retrieval metrics over samples: the list order of ``contexts`` is the ranking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator
from rag_judge.metrics.retrieval import MetricSpec, Rankings, compute, parse_metric
from rag_judge.report.model import MetricKind, Signature

__all__ = ["RetrievalEvaluator", "retrieval_signature"]

DEFAULT_METRICS = ("precision@5", "recall@5", "hit_rate@5", "mrr", "map", "ndcg@5", "ndcg_exp@5")


def retrieval_signature(spec: MetricSpec, threshold: float, ordering: str) -> Signature:
    """sacrebleu-style signature: every option that changes the number."""
    options = {"k": str(spec.k) if spec.k is not None else "all"}
    if spec.family in {"dcg", "idcg", "ndcg", "ndcg_exp"}:
        options |= {"gain": "exp2" if spec.family == "ndcg_exp" else "linear", "ideal": "judged"}
    else:
        options["rel"] = f">={threshold:g}"
    options |= {"order": ordering, "version": __version__}
    return Signature(name=spec.name, options=options)


class RetrievalEvaluator(Evaluator):
    """precision/recall/F1/hit rate@k, MRR, MAP, R-precision, DCG/IDCG/NDCG (linear, exp2)."""

    type: Literal["retrieval"] = "retrieval"
    kind: ClassVar[MetricKind] = MetricKind.RETRIEVAL
    metrics: tuple[str, ...] = Field(default=DEFAULT_METRICS, min_length=1)
    relevance_threshold: float = Field(default=1.0, gt=0)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics: tuple[str, ...]) -> tuple[str, ...]:
        names = tuple(parse_metric(m).name for m in metrics)  # raises, listing the valid names
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"metric listed twice: {', '.join(sorted(dup))}")
        return names

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def signature(self, metric: str) -> Signature:
        return retrieval_signature(parse_metric(metric), self.relevance_threshold, "list")

    def missing(self, sample: Sample) -> list[str]:
        problem = _problem(sample)
        return [problem] if problem else []

    def score(self, samples: Sequence[Sample]) -> dict[str, NDArray[np.float64]]:
        batch = Rankings.from_lists(
            [s.ranked_grades() for s in samples], [s.ideal_grades() for s in samples]
        )
        specs = [parse_metric(m) for m in self.metrics]
        return compute(batch, specs, self.relevance_threshold)


def _problem(sample: Sample) -> str | None:
    if sample.judged_grades() is None:
        return (
            "no relevance judgments: the sample has no 'relevance' field "
            "and none of its contexts carries one"
        )
    for rank, ctx in enumerate(sample.contexts):
        if ctx.id is None and ctx.relevance is None:
            return f"field 'contexts[{rank}]': needs an 'id' or its own 'relevance' to be graded"
    return None
