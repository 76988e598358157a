"""The sacrebleu families (BLEU, chrF, TER): per sample sacrebleu's sentence score, in the
summary its corpus score over summed per-sample statistics, which the report's bootstrap
resamples. ``BleuEvaluator`` lives in :mod:`rag_judge.evaluators.lexical`."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import CorpusStatistic, Evaluator, EvaluatorResult
from rag_judge.metrics.sacre import (
    check_chrf_options,
    chrf_statistics,
    corpus_chrf_from_rows,
    corpus_ter_from_rows,
    ter_statistics,
)
from rag_judge.report.model import Direction, MetricInfo, MetricKind, Signature

__all__ = [
    "ChrfEvaluator",
    "Scored",
    "TerEvaluator",
    "evaluate_scored",
    "evaluate_scored_chunks",
    "merged_nrefs",
]

_NREFS = re.compile(r"nrefs:\d+")  # sacrebleu's reference count in its signature

CHRF_AGGREGATE = "corpus chrF (per-sample: sentence chrF)"
TER_AGGREGATE = "corpus TER (per-sample: sentence TER)"


@dataclass(frozen=True)
class Scored:
    """What a family computes for a batch: statistics rows, sentence scores, the signature's
    options (sacrebleu's strings and what they omit), and the score of a set of rows."""

    rows: NDArray[np.float64]
    sentence: NDArray[np.float64]
    options: dict[str, str]
    score: Callable[[NDArray[np.float64]], float]


Statistics = Callable[[list[str], list[Sequence[str]]], Scored]


def evaluate_scored(
    evaluator: Evaluator, samples: Sequence[Sample], statistics: Statistics, aggregate: str
) -> EvaluatorResult:
    """``evaluator``'s one metric over ``samples`` from ``statistics`` (a family's sacrebleu
    call): per sample the sentence score, the rows as the corpus statistic, the signature."""
    metric = evaluator.metric_names()[0]
    result = EvaluatorResult.empty(len(samples), {metric: Signature(name=metric)})
    usable = result.require(samples, evaluator.missing)
    scored = statistics(
        [samples[i].answer or "" for i in usable], [samples[i].references for i in usable]
    )
    options = {**scored.options, "version": __version__}
    result.signatures[metric] = Signature(name=metric, options=options)
    result.fill(metric, usable, scored.sentence)
    # The report indexes rows by sample, so failed samples get zero rows it never reads.
    full = np.zeros((len(samples), scored.rows.shape[1]), dtype=np.float64)
    full[usable] = scored.rows
    result.corpus[metric] = CorpusStatistic(rows=full, score=scored.score, description=aggregate)
    return result


def evaluate_scored_chunks(
    evaluator: Evaluator,
    chunks: Iterable[Sequence[Sample]],
    emit: Callable[[EvaluatorResult], None],
) -> EvaluatorResult | None:
    """Per chunk as ``evaluator.evaluate``; sacrebleu's signature counts each chunk's
    references, so chunks with different counts make the run's signature say ``nrefs:var``,
    as one call over every sample would."""
    metric = evaluator.metric_names()[0]
    seen: list[Signature] = []
    for chunk in chunks:
        result = evaluator.evaluate(chunk)
        if any(v is not None for v in result.scores[metric]):
            seen.append(result.signatures[metric])
        emit(result)
    if len({tuple(s.options.items()) for s in seen}) <= 1:
        return None
    return EvaluatorResult.empty(0, {metric: merged_nrefs(seen)})


def merged_nrefs(signatures: Sequence[Signature]) -> Signature:
    """One signature from those of a run's chunks or Ray shards that scored: equal ones are
    kept; parts whose reference counts differ say ``nrefs:var``, as sacrebleu says of one call
    over every sample (the merge of :meth:`Evaluator.merge_signature` for this family)."""
    first = signatures[0]
    if len({tuple(s.options.items()) for s in signatures}) <= 1:
        return first
    options = {k: _NREFS.sub("nrefs:var", v) for k, v in first.options.items()}
    return Signature(name=first.name, options=options)


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

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        return evaluate_scored(self, samples, self.statistics, CHRF_AGGREGATE)

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> EvaluatorResult | None:
        return evaluate_scored_chunks(self, chunks, emit)

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        return merged_nrefs(signatures)

    def statistics(self, hypotheses: list[str], references: list[Sequence[str]]) -> Scored:
        stats = chrf_statistics(
            hypotheses,
            references,
            char_order=self.char_order,
            word_order=self.word_order,
            beta=self.beta,
            lowercase=self.lowercase,
            whitespace=self.whitespace,
            eps_smoothing=self.eps_smoothing,
        )
        return Scored(
            rows=stats.rows,
            sentence=stats.sentence,
            options={"corpus": f"[{stats.signature}]", "beta": str(self.beta)},
            score=functools.partial(
                corpus_chrf_from_rows, beta=self.beta, eps_smoothing=self.eps_smoothing
            ),
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

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        return evaluate_scored(self, samples, self.statistics, TER_AGGREGATE)

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> EvaluatorResult | None:
        return evaluate_scored_chunks(self, chunks, emit)

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        return merged_nrefs(signatures)

    def metric_info(self, metric: str) -> MetricInfo:
        return MetricInfo(kind=self.kind, scale=(0.0, None), direction=Direction.LOWER)  # errors

    def statistics(self, hypotheses: list[str], references: list[Sequence[str]]) -> Scored:
        stats = ter_statistics(
            hypotheses,
            references,
            normalized=self.normalized,
            no_punct=self.no_punct,
            asian_support=self.asian_support,
            case_sensitive=self.case_sensitive,
        )
        return Scored(
            rows=stats.rows,
            sentence=stats.sentence,
            options={"corpus": f"[{stats.signature}]"},
            score=corpus_ter_from_rows,
        )
