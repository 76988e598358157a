"""chrF, chrF++ and TER as sacrebleu computes them, from per-sample statistics a report can
bootstrap.

Each pair's sufficient statistics are sacrebleu's own (``_extract_corpus_statistics``, called
through :func:`~rag_judge.metrics.lexical.sacrebleu_rows`); a sentence score is sacrebleu's
score of one row, a corpus score sacrebleu's score of the summed rows, so both equal
``sentence_score`` and ``corpus_score`` with the same options. Scores are sacrebleu's divided
by 100: chrF on [0, 1]; TER is an error rate, 0 at best and unbounded above.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics.lexical import _require, sacrebleu_rows

__all__ = [
    "SacreStatistics",
    "check_chrf_options",
    "chrf_statistics",
    "corpus_chrf_from_rows",
    "corpus_ter_from_rows",
    "sentence_chrf_from_rows",
    "sentence_ter_from_rows",
    "ter_statistics",
]


@dataclass(frozen=True)
class SacreStatistics:
    """Per-sample statistics rows, the sentence score of each, and sacrebleu's signature.

    chrF rows are ``[hyp, ref, match]`` counts per n-gram order (character orders first, then
    word orders), of the reference with the best sentence chrF; TER rows are ``[edits,
    reference length]`` (fewest edits over the references, mean reference length).
    """

    rows: NDArray[np.float64]
    sentence: NDArray[np.float64]
    signature: str


# ---------------------------------------------------------------------------------------------
# chrF


def check_chrf_options(char_order: int, word_order: int, beta: int) -> None:
    """ConfigError for orders or a beta sacrebleu would divide by zero with or misread."""
    for name, value in (("char_order", char_order), ("word_order", word_order), ("beta", beta)):
        if value < 0:
            raise ConfigError(f"chrF {name} must be an integer >= 0, got {value!r}")
    if char_order + word_order < 1:
        raise ConfigError(
            "chrF needs at least one n-gram order (char_order + word_order >= 1), "
            f"got char_order={char_order!r}, word_order={word_order!r}"
        )


@functools.lru_cache(maxsize=16)
def _chrf_scorer(order: int, beta: int, eps_smoothing: bool) -> Any:
    """A CHRF object for ``_compute_f_score``, which reads only the total order, beta and
    eps_smoothing (never the references or their cache)."""
    chrf = _require("sacrebleu.metrics.chrf")
    return chrf.CHRF(char_order=order, word_order=0, beta=beta, eps_smoothing=eps_smoothing)


def _chrf(stats: Sequence[float], beta: int, eps_smoothing: bool) -> float:
    scorer = _chrf_scorer(len(stats) // 3, beta, eps_smoothing)
    # Integer counts, as sacrebleu sums them; the F of exact ones never passes 1 by rounding,
    # but a cap keeps the [0, 1] scale a promise.
    return min(float(scorer._compute_f_score([int(x) for x in stats])) / 100.0, 1.0)


def chrf_statistics(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    char_order: int = 6,
    word_order: int = 0,
    beta: int = 2,
    lowercase: bool = False,
    whitespace: bool = False,
    eps_smoothing: bool = False,
) -> SacreStatistics:
    """sacrebleu's ``CHRF`` statistics and sentence chrF of each pair (``word_order: 2`` is
    chrF++). References may vary in number per pair; every pair needs at least one."""
    check_chrf_options(char_order, word_order, beta)
    chrf = _require("sacrebleu.metrics.chrf")
    metric = chrf.CHRF(
        char_order=char_order,
        word_order=word_order,
        beta=beta,
        lowercase=lowercase,
        whitespace=whitespace,
        eps_smoothing=eps_smoothing,
    )
    stats = sacrebleu_rows(metric, hypotheses, references)
    rows = np.array(stats, dtype=np.float64).reshape(len(stats), 3 * (char_order + word_order))
    return SacreStatistics(
        rows=rows,
        sentence=sentence_chrf_from_rows(rows, beta, eps_smoothing),
        signature=metric.get_signature().format(),
    )


def sentence_chrf_from_rows(
    rows: NDArray[np.float64], beta: int = 2, eps_smoothing: bool = False
) -> NDArray[np.float64]:
    """Sentence chrF of each row on [0, 1] (the n-gram orders read from the rows' width)."""
    return np.array([_chrf(r.tolist(), beta, eps_smoothing) for r in rows], dtype=np.float64)


def corpus_chrf_from_rows(
    rows: NDArray[np.float64], beta: int = 2, eps_smoothing: bool = False
) -> float:
    """Corpus chrF on [0, 1] of a set of rows: ``CHRF(...).corpus_score(...).score / 100``.

    Counts are integers well below 2**53, so the float sums are exact. Bind the options with
    ``functools.partial`` (it pickles, for executor: ray).
    """
    if len(rows) == 0:
        return math.nan
    return _chrf(np.asarray(rows).sum(axis=0).tolist(), beta, eps_smoothing)


# ---------------------------------------------------------------------------------------------
# TER


@functools.lru_cache(maxsize=1)
def _ter_scorer() -> Any:
    """A TER object for ``_compute_score_from_stats``, which reads only the statistics."""
    return _require("sacrebleu.metrics.ter").TER()


def _ter(edits: float, ref_length: float) -> float:
    # Edits are integers; sacrebleu keeps them int, which its division treats the same.
    return float(_ter_scorer()._compute_score_from_stats([int(edits), ref_length]).score) / 100.0


def ter_statistics(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    normalized: bool = False,
    no_punct: bool = False,
    asian_support: bool = False,
    case_sensitive: bool = False,
) -> SacreStatistics:
    """sacrebleu's ``TER`` statistics and sentence TER of each pair. sacrebleu's TER ignores
    case unless ``case_sensitive``. References may vary in number per pair; every pair needs
    at least one."""
    ter = _require("sacrebleu.metrics.ter")
    metric = ter.TER(
        normalized=normalized,
        no_punct=no_punct,
        asian_support=asian_support,
        case_sensitive=case_sensitive,
    )
    stats = sacrebleu_rows(metric, hypotheses, references)
    rows = np.array(stats, dtype=np.float64).reshape(len(stats), 2)
    return SacreStatistics(
        rows=rows,
        sentence=sentence_ter_from_rows(rows),
        signature=metric.get_signature().format(),
    )


def sentence_ter_from_rows(rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """Sentence TER of each row (sacrebleu's divided by 100; may exceed 1)."""
    return np.array([_ter(e, r) for e, r in rows.tolist()], dtype=np.float64)


def corpus_ter_from_rows(rows: NDArray[np.float64]) -> float:
    """Corpus TER of a set of rows: ``TER(...).corpus_score(...).score / 100`` bit for bit.

    Reference lengths are means over a pair's references (fractions), and sacrebleu adds them
    one row after another: ``cumsum`` adds in that order, where ``sum`` would add pairwise.
    """
    if len(rows) == 0:
        return math.nan
    edits, ref_length = np.cumsum(np.asarray(rows), axis=0)[-1].tolist()
    return _ter(edits, ref_length)
