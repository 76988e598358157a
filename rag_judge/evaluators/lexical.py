"""ROUGE and BLEU of each sample's ``answer`` against its ``references``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import CorpusStatistic, Evaluator, EvaluatorResult, pick
from rag_judge.metrics.lexical import (
    ROUGE_MEASURES,
    ROUGE_TOKENIZERS,
    ROUGE_TYPES,
    SMOOTH_METHODS,
    bleu_statistics,
    check_bleu_tokenizer,
    corpus_bleu_from_rows,
    rouge_scores,
)
from rag_judge.metrics.rouge import FOLLOWS as ROUGE_SCORE_FOLLOWED
from rag_judge.report.model import MetricKind, Signature

_NREFS = re.compile(r"nrefs:\d+")  # sacrebleu's reference count in its signature

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
    [0, 1] (sacrebleu's divided by 100).
    """

    type: Literal["bleu"] = "bleu"
    kind: ClassVar[MetricKind] = MetricKind.LEXICAL
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
    tokenizer: str = "13a"
    lowercase: bool = False
    smooth_method: str = "exp"
    smooth_value: float | None = Field(default=None, gt=0)

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
        # sacrebleu ignores the value for 'exp' and 'none'; silently ignoring config misleads.
        if self.smooth_value is not None and self.smooth_method not in {"floor", "add-k"}:
            raise ValueError(
                f"smooth_value applies only to smooth_method 'floor' or 'add-k', "
                f"not {self.smooth_method!r}"
            )
        return self

    def metric_names(self) -> list[str]:
        return ["bleu"]

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> EvaluatorResult | None:
        """Per chunk as ``evaluate``; sacrebleu's signature counts each chunk's references, so
        chunks with different counts make the run's signature say ``nrefs:var``, as one call
        over every sample would."""
        seen: list[Signature] = []
        for chunk in chunks:
            result = self.evaluate(chunk)
            if any(v is not None for v in result.scores["bleu"]):
                seen.append(result.signatures["bleu"])
            emit(result)
        if len({s.options["corpus"] for s in seen}) <= 1:
            return None
        options = {k: _NREFS.sub("nrefs:var", v) for k, v in seen[0].options.items()}
        return EvaluatorResult.empty(0, {"bleu": Signature(name="bleu", options=options)})

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        result = EvaluatorResult.empty(len(samples), {"bleu": Signature(name="bleu")})
        usable = result.require(samples, self.missing)
        stats = bleu_statistics(
            [samples[i].answer or "" for i in usable],
            [samples[i].references for i in usable],
            tokenizer=self.tokenizer,
            lowercase=self.lowercase,
            smooth_method=self.smooth_method,
            smooth_value=self.smooth_value,
        )
        result.signatures["bleu"] = Signature.of(
            "bleu",
            corpus=f"[{stats.corpus_signature}]",
            sentence=f"[{stats.sentence_signature}]",
            version=__version__,
        )
        result.fill("bleu", usable, stats.sentence)
        # The report indexes rows by sample, so failed samples get zero rows it never reads.
        full = np.zeros((len(samples), stats.rows.shape[1]), dtype=np.float64)
        full[usable] = stats.rows
        result.corpus["bleu"] = CorpusStatistic(
            rows=full, score=corpus_bleu_from_rows, description=BLEU_AGGREGATE
        )
        return result
