"""ROUGE and BLEU of each sample's ``answer`` against its ``references`` (chrF and TER, the other
sacrebleu families, are in :mod:`rag_judge.evaluators.sacre`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, EvaluatorResult, pick
from rag_judge.evaluators.sacre import (
    Scored,
    evaluate_scored,
    evaluate_scored_chunks,
    merged_nrefs,
)
from rag_judge.metrics.lexical import (
    BLEU_ORDER,
    ROUGE_MEASURES,
    ROUGE_TOKENIZERS,
    ROUGE_TYPES,
    SMOOTH_METHODS,
    bleu_statistics,
    check_bleu_options,
    check_bleu_tokenizer,
    corpus_bleu_from_rows,
    rouge_scores,
)
from rag_judge.metrics.rouge import FOLLOWS as ROUGE_SCORE_FOLLOWED
from rag_judge.report.model import MetricKind, Signature

__all__ = ["BleuEvaluator", "RougeEvaluator"]

BLEU_AGGREGATE = "corpus BLEU (per-sample: sentence BLEU)"


class RougeEvaluator(Evaluator):
    """ROUGE-1/2/L/Lsum precision, recall and F1, bit for bit rouge-score 0.1.2's (a port
    that does not import nltk, ``metrics/rouge.py``).

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
        options["rouge_score"] = ROUGE_SCORE_FOLLOWED  # the port's numbers are this release's
        return Signature(name=rouge_type, options={**options, "version": __version__})

    def score(self, samples: Sequence[Sample]) -> Mapping[str, NDArray[np.float64]]:
        return rouge_scores(
            [s.answer or "" for s in samples],
            [s.references for s in samples],
            rouge_types=self.rouge_types,
            use_stemmer=self.use_stemmer,
            tokenizer=self.tokenizer,
        )


class BleuEvaluator(Evaluator):
    """BLEU through sacrebleu: per sample smoothed sentence BLEU, in the summary corpus BLEU.

    Both come from one pass of sacrebleu's sufficient statistics; the report's bootstrap
    interval for ``bleu`` resamples those per-sample statistics, not the text. Scores are on
    [0, 1] (sacrebleu's divided by 100). Options are ``sacrebleu.BLEU``'s and apply to both
    levels, except ``effective_order``: None (the default) keeps sacrebleu's two defaults, on
    for sentence BLEU and off for corpus BLEU; True or False sets both. sacrebleu's signature
    omits the n-gram order and rounds the smoothing value to 2 decimals, so ours adds
    ``max_ngram_order`` when it is not 4 and ``smooth_value`` when rounding changes it.
    """

    type: Literal["bleu"] = "bleu"
    kind: ClassVar[MetricKind] = MetricKind.LEXICAL
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
    tokenizer: str = "13a"
    lowercase: bool = False
    smooth_method: str = "exp"
    smooth_value: float | None = None
    max_ngram_order: int = BLEU_ORDER
    effective_order: bool | None = None

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        return check_bleu_tokenizer(value)

    @field_validator("smooth_method")
    @classmethod
    def _known_smoothing(cls, value: str) -> str:
        return pick("smooth_method", (value,), SMOOTH_METHODS)[0]

    @model_validator(mode="after")
    def _value_needs_method(self) -> BleuEvaluator:
        # Bounds checked here, not by Field(ge=...), so the message names the value given.
        check_bleu_options(self.smooth_method, self.smooth_value, self.max_ngram_order)
        # sacrebleu ignores the value for 'exp' and 'none'; silently ignoring config misleads.
        if self.smooth_value is not None and self.smooth_method not in {"floor", "add-k"}:
            raise ValueError(
                f"smooth_value applies only to smooth_method 'floor' or 'add-k', "
                f"not {self.smooth_method!r}"
            )
        return self

    def metric_names(self) -> list[str]:
        return ["bleu"]

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        return evaluate_scored(self, samples, self.statistics, BLEU_AGGREGATE)

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> EvaluatorResult | None:
        return evaluate_scored_chunks(self, chunks, emit)

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        return merged_nrefs(signatures)

    def statistics(self, hypotheses: list[str], references: list[Sequence[str]]) -> Scored:
        stats = bleu_statistics(
            hypotheses,
            references,
            tokenizer=self.tokenizer,
            lowercase=self.lowercase,
            smooth_method=self.smooth_method,
            smooth_value=self.smooth_value,
            max_ngram_order=self.max_ngram_order,
            effective_order=self.effective_order,
        )
        options = {
            "corpus": f"[{stats.corpus_signature}]",
            "sentence": f"[{stats.sentence_signature}]",
        }
        if self.max_ngram_order != BLEU_ORDER:
            options["max_ngram_order"] = str(self.max_ngram_order)
        value = self.smooth_value
        if value is not None and float(f"{value:.2f}") != value:
            options["smooth_value"] = repr(value)
        score = functools.partial(
            corpus_bleu_from_rows,
            smooth_method=self.smooth_method,
            smooth_value=self.smooth_value,
            effective_order=bool(self.effective_order),
        )
        return Scored(rows=stats.rows, sentence=stats.sentence, options=options, score=score)
