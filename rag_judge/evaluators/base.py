"""The evaluator contract: a small config class with one ``evaluate`` method.

An evaluator's fields are its configuration (validated by pydantic at construction); its
``evaluate`` turns a batch of samples into per-sample scores, per-sample errors and one
signature per metric. Aggregation (means, confidence intervals) is the report's job, except for
corpus-level metrics, which hand the report their per-sample sufficient statistics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from rag_judge.data.sample import Sample

__all__ = [
    "CorpusStatistic",
    "Evaluator",
    "EvaluatorResult",
    "pick",
    "with_answer_and_references",
]


@dataclass(frozen=True)
class CorpusStatistic:
    """Per-sample sufficient statistics (rows) and the function that scores a set of rows.

    The report applies ``score`` to all rows for the headline number and to resampled rows for
    its bootstrap interval, so the interval resamples statistics, not text.
    """

    rows: NDArray[np.float64]
    score: Callable[[NDArray[np.float64]], float]
    description: str = "corpus-level"


@dataclass
class EvaluatorResult:
    """What one evaluator produced for a batch, index-aligned with the samples."""

    scores: dict[str, list[float | None]]
    errors: list[dict[str, str]]
    signatures: dict[str, str]
    corpus: dict[str, CorpusStatistic] = field(default_factory=dict)
    judgments: list[dict[str, dict[str, Any]]] = field(default_factory=list)
    # Model-call accounting (requests, cache_hits, retries, failures, tokens, cost), summed
    # over evaluators into the report's usage.
    usage: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def empty(cls, n: int, metrics: Sequence[str], signatures: dict[str, str]) -> EvaluatorResult:
        return cls(
            scores={m: [None] * n for m in metrics},
            errors=[{} for _ in range(n)],
            signatures=signatures,
        )

    def fail(self, index: int, message: str) -> None:
        """Record one failure against every metric of one sample."""
        for metric, values in self.scores.items():
            values[index] = None
            self.errors[index][metric] = message


class Evaluator(BaseModel):
    """Base of every evaluator: pydantic fields are the config; subclasses set ``type``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """Make the file paths in a raw config mapping relative to the config's folder.

        Evaluators with file options (templates, rubric files) override this.
        """
        return raw

    def metric_names(self) -> list[str]:
        raise NotImplementedError

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        raise NotImplementedError


def with_answer_and_references(samples: Sequence[Sample], result: EvaluatorResult) -> list[int]:
    """Indices of samples with an answer and a reference; the others get a per-sample error.

    An empty or blank answer is a valid input that the libraries score (as 0)."""
    usable = []
    for i, sample in enumerate(samples):
        missing = []
        if sample.answer is None:
            missing.append("field 'answer' is missing")
        if not sample.references:
            missing.append("field 'references' is missing or empty")
        if missing:
            result.fail(i, "; ".join(missing))
        else:
            usable.append(i)
    return usable


def pick(kind: str, values: tuple[str, ...], legal: tuple[str, ...]) -> tuple[str, ...]:
    """Validate a non-empty, duplicate-free selection; the error names the value and the set."""
    for value in values:
        if value not in legal:
            raise ValueError(f"unknown {kind} {value!r}; choose from: {', '.join(legal)}")
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise ValueError(f"{kind} listed twice: {', '.join(dup)}")
    return values
