"""Retrieval metrics over samples: the list order of ``contexts`` is the ranking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, field_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.metrics.retrieval import MetricSpec, Rankings, compute, parse_metric

__all__ = ["RetrievalEvaluator", "retrieval_signature"]

DEFAULT_METRICS = ("precision@5", "recall@5", "hit_rate@5", "mrr", "map", "ndcg@5", "ndcg_exp@5")


def retrieval_signature(spec: MetricSpec, threshold: float, ordering: str) -> str:
    """sacrebleu-style signature: every option that changes the number."""
    parts = [spec.name, f"k:{spec.k if spec.k is not None else 'all'}"]
    if spec.family in {"dcg", "idcg", "ndcg", "ndcg_exp"}:
        parts += [f"gain:{'exp2' if spec.family == 'ndcg_exp' else 'linear'}", "ideal:judged"]
    else:
        parts.append(f"rel:>={threshold:g}")
    parts += [f"order:{ordering}", f"version:{__version__}"]
    return "|".join(parts)


class RetrievalEvaluator(Evaluator):
    """precision/recall/F1/hit rate@k, MRR, MAP, R-precision, DCG/IDCG/NDCG (linear, exp2)."""

    type: Literal["retrieval"] = "retrieval"
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

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        specs = [parse_metric(m) for m in self.metrics]
        signatures = {
            s.name: retrieval_signature(s, self.relevance_threshold, "list") for s in specs
        }
        result = EvaluatorResult.empty(len(samples), self.metrics, signatures)
        usable: list[int] = []
        for i, sample in enumerate(samples):
            problem = _problem(sample)
            if problem:
                result.fail(i, problem)
            else:
                usable.append(i)
        if not usable:
            return result
        batch = Rankings.from_lists(
            [samples[i].ranked_grades() for i in usable],
            [samples[i].ideal_grades() for i in usable],
        )
        for name, values in compute(batch, specs, self.relevance_threshold).items():
            column = result.scores[name]
            for i, value in zip(usable, values.tolist()):
                column[i] = value
        return result


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
