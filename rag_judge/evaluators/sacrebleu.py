"""The sacrebleu families (BLEU, chrF, TER) of each sample's ``answer`` against its
``references``: per sample sacrebleu's sentence score, in the summary its corpus score over
summed per-sample statistics, which the report's bootstrap resamples.

Each family implements the ``statistics`` hook; the base class fills the sentence scores,
hands the rows to the report and signs the metric. sacrebleu's signature counts the references
of one call, so a run whose chunks or shards counted differently says ``nrefs:var``
(:func:`merged_nrefs`), as one call over every sample would.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import field_validator, model_validator

from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, Statistics, pick
from rag_judge.metrics.sacrebleu import (
    BLEU_ORDER,
    SMOOTH_METHODS,
    bleu_statistics,
    check_bleu_options,
    check_bleu_tokenizer,
    check_chrf_options,
    chrf_statistics,
    corpus_bleu_from_sums,
    corpus_chrf_from_sums,
    corpus_ter_from_rows,
    ter_statistics,
)
from rag_judge.report.model import Direction, MetricInfo, MetricKind, Signature
from rag_judge.stats.bootstrap import SumStatistic

__all__ = [
    "BLEU_AGGREGATE",
    "CHRF_AGGREGATE",
    "TER_AGGREGATE",
    "BleuEvaluator",
    "ChrfEvaluator",
    "TerEvaluator",
    "merged_nrefs",
]

BLEU_AGGREGATE = "corpus BLEU (per-sample: sentence BLEU)"
CHRF_AGGREGATE = "corpus chrF (per-sample: sentence chrF)"
TER_AGGREGATE = "corpus TER (per-sample: sentence TER)"

_NREFS = re.compile(r"nrefs:\d+")  # sacrebleu's reference count in its signature


def merged_nrefs(signatures: Sequence[Signature]) -> Signature:
    """One signature from those of a run's chunks or Ray shards that scored: equal ones are
    kept; parts whose reference counts differ say ``nrefs:var``, as sacrebleu says of one call
    over every sample (the merge of :meth:`Evaluator.merge_signature` for this family)."""
    first = signatures[0]
    if len({tuple(s.options.items()) for s in signatures}) <= 1:
        return first
    options = {k: _NREFS.sub("nrefs:var", v) for k, v in first.options.items()}
    return Signature(name=first.name, options=options)


def _pairs(samples: Sequence[Sample]) -> tuple[list[str], list[Sequence[str]]]:
    return [s.answer or "" for s in samples], [s.references for s in samples]


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

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        return merged_nrefs(signatures)

    def statistics(self, samples: Sequence[Sample]) -> Statistics:
        stats = bleu_statistics(
            *_pairs(samples),
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
        score = SumStatistic(
            functools.partial(
                corpus_bleu_from_sums,
                smooth_method=self.smooth_method,
                smooth_value=self.smooth_value,
                effective_order=bool(self.effective_order),
            )
        )
        return Statistics(
            rows=stats.rows,
            sentence=stats.sentence,
            score=score,
            options=options,
            description=BLEU_AGGREGATE,
        )


class ChrfEvaluator(Evaluator):
    """chrF through sacrebleu (``CHRF``), on [0, 1]; ``word_order: 2`` is chrF++.

    The metric is ``chrf`` followed by one ``+`` per word n-gram order, as sacrebleu names
    its score (``chrf``, ``chrf+``, ``chrf++``), so chrF and chrF++ can sit in one config.
    sacrebleu's signature omits beta; ours adds it.
    """

    type: Literal["chrf"] = "chrf"
    kind: ClassVar[MetricKind] = MetricKind.LEXICAL
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
    char_order: int = 6
    word_order: int = 0
    beta: int = 2
    lowercase: bool = False
    whitespace: bool = False
    eps_smoothing: bool = False

    @model_validator(mode="after")
    def _some_order(self) -> ChrfEvaluator:
        # Bounds checked here, not by Field(ge=...), so the message names the value given.
        check_chrf_options(self.char_order, self.word_order, self.beta)
        return self

    def metric_names(self) -> list[str]:
        return ["chrf" + "+" * self.word_order]

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        return merged_nrefs(signatures)

    def statistics(self, samples: Sequence[Sample]) -> Statistics:
        stats = chrf_statistics(
            *_pairs(samples),
            char_order=self.char_order,
            word_order=self.word_order,
            beta=self.beta,
            lowercase=self.lowercase,
            whitespace=self.whitespace,
            eps_smoothing=self.eps_smoothing,
        )
        return Statistics(
            rows=stats.rows,
            sentence=stats.sentence,
            score=SumStatistic(
                functools.partial(
                    corpus_chrf_from_sums, beta=self.beta, eps_smoothing=self.eps_smoothing
                )
            ),
            options={"corpus": f"[{stats.signature}]", "beta": str(self.beta)},
            description=CHRF_AGGREGATE,
        )


class TerEvaluator(Evaluator):
    """TER through sacrebleu (``TER``): edits over reference words, sacrebleu's divided by
    100. An error rate: 0 is best, and it exceeds 1 when the answer needs more edits than
    the reference has words. sacrebleu's TER ignores case unless ``case_sensitive``."""

    type: Literal["ter"] = "ter"
    kind: ClassVar[MetricKind] = MetricKind.LEXICAL
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
    normalized: bool = False
    no_punct: bool = False
    asian_support: bool = False
    case_sensitive: bool = False

    def metric_names(self) -> list[str]:
        return ["ter"]

    def metric_info(self, metric: str) -> MetricInfo:
        return MetricInfo(kind=self.kind, scale=(0.0, None), direction=Direction.LOWER)  # errors

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        return merged_nrefs(signatures)

    def statistics(self, samples: Sequence[Sample]) -> Statistics:
        stats = ter_statistics(
            *_pairs(samples),
            normalized=self.normalized,
            no_punct=self.no_punct,
            asian_support=self.asian_support,
            case_sensitive=self.case_sensitive,
        )
        return Statistics(
            rows=stats.rows,
            sentence=stats.sentence,
            score=corpus_ter_from_rows,
            options={"corpus": f"[{stats.signature}]"},
            description=TER_AGGREGATE,
        )
