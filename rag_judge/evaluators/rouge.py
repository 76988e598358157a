"""ROUGE of each sample's ``answer`` against its ``references``, as rouge-score computes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, pick
from rag_judge.metrics.rouge import (
    FOLLOWS,
    ROUGE_MEASURES,
    ROUGE_TOKENIZERS,
    ROUGE_TYPES,
    rouge_scores,
)
from rag_judge.report.model import MetricKind, Signature

__all__ = ["RougeEvaluator"]


class RougeEvaluator(Evaluator):
    """ROUGE-1/2/L/Lsum precision, recall and F1, bit for bit rouge-score 0.1.2's (a port
    that does not import nltk, ``metrics/rouge/port.py``).

    Metric names are ``{type}_{measure}``, e.g. ``rougeL_f1``. With several references a sample
    scores against the one with the best F, per type (rouge-score's ``score_multi``).
    ``tokenizer: unicode`` keeps non-ASCII letters that rouge-score's default deletes.
    """

    type: Literal["rouge"] = "rouge"
    kind: ClassVar[MetricKind] = MetricKind.LEXICAL
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
    rouge_types: tuple[str, ...] = Field(default=ROUGE_TYPES, min_length=1)
    measures: tuple[str, ...] = Field(default=ROUGE_MEASURES, min_length=1)
    use_stemmer: bool = False
    tokenizer: str = "default"

    @field_validator("rouge_types")
    @classmethod
    def _known_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return pick("ROUGE type", value, ROUGE_TYPES)

    @field_validator("measures")
    @classmethod
    def _known_measures(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return pick("ROUGE measure", value, ROUGE_MEASURES)

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        return pick("ROUGE tokenizer", (value,), ROUGE_TOKENIZERS)[0]

    def metric_names(self) -> list[str]:
        return [f"{t}_{m}" for t in self.rouge_types for m in self.measures]

    def signature(self, metric: str) -> Signature:
        rouge_type = metric.rpartition("_")[0]  # rougeL_f1 -> rougeL: the measure adds nothing
        options = {
            "tok": self.tokenizer,
            "stem": "yes" if self.use_stemmer else "no",
            "refs": "best-f",
        }
        if rouge_type == "rougeLsum":
            options["split"] = "newline"
        options["rouge_score"] = FOLLOWS  # the port's numbers are this release's
        return Signature(name=rouge_type, options={**options, "version": __version__})

    def score(self, samples: Sequence[Sample]) -> Mapping[str, NDArray[np.float64]]:
        return rouge_scores(
            [s.answer or "" for s in samples],
            [s.references for s in samples],
            rouge_types=self.rouge_types,
            use_stemmer=self.use_stemmer,
            tokenizer=self.tokenizer,
        )
