"""chrF and chrF++ as sacrebleu computes them, from per-sample statistics a report can
bootstrap.

Each pair's statistics are the integers of sacrebleu's ``CHRF._extract_corpus_statistics``,
counted by :mod:`~rag_judge.metrics.sacrebleu.chrf_port`; a sentence score is sacrebleu's
score of one row, a corpus score its score of the summed rows, so both equal
``sentence_score`` and ``corpus_score`` with the same options. Scores are on [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics.optional import require
from rag_judge.metrics.sacrebleu.chrf_port import chrf_rows, f_score, f_scores
from rag_judge.metrics.sacrebleu.rows import SacreStatistics, check_pairs, reference_count

__all__ = [
    "check_chrf_options",
    "chrf_statistics",
    "corpus_chrf_from_rows",
    "corpus_chrf_from_sums",
    "sentence_chrf_from_rows",
]


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


def _chrf(stats: Sequence[float], beta: int, eps_smoothing: bool) -> float:
    # Integer counts, as sacrebleu sums them; the F of exact ones never passes 1 by rounding,
    # but a cap keeps the [0, 1] scale a promise.
    counts = [int(x) for x in stats]
    return min(f_score(counts, len(counts) // 3, beta, eps_smoothing) / 100.0, 1.0)


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
    chrf = require("sacrebleu.metrics.chrf")
    metric = chrf.CHRF(
        char_order=char_order,
        word_order=word_order,
        beta=beta,
        lowercase=lowercase,
        whitespace=whitespace,
        eps_smoothing=eps_smoothing,
    )
    check_pairs(hypotheses, references)
    metric.num_refs = reference_count(references)  # for the signature, as sacrebleu counts
    stats = chrf_rows(
        hypotheses,
        references,
        char_order=char_order,
        word_order=word_order,
        beta=beta,
        lowercase=lowercase,
        whitespace=whitespace,
        eps_smoothing=eps_smoothing,
    )
    rows = stats.astype(np.float64)
    return SacreStatistics(
        rows=rows,
        sentence=sentence_chrf_from_rows(rows, beta, eps_smoothing),
        signature=metric.get_signature().format(),
    )


def sentence_chrf_from_rows(
    rows: NDArray[np.float64], beta: int = 2, eps_smoothing: bool = False
) -> NDArray[np.float64]:
    """Sentence chrF of each row on [0, 1] (the n-gram orders read from the rows' width)."""
    counts = np.asarray(rows).astype(np.int64)
    f = f_scores(counts, counts.shape[1] // 3, beta, eps_smoothing) / 100.0
    return np.minimum(f, 1.0)  # the cap of _chrf


def corpus_chrf_from_rows(
    rows: NDArray[np.float64], beta: int = 2, eps_smoothing: bool = False
) -> float:
    """Corpus chrF on [0, 1] of a set of rows: ``CHRF(...).corpus_score(...).score / 100``.

    Counts are integers well below 2**53, so the float sums are exact. Bind the options with
    ``functools.partial`` (it pickles, for executor: ray).
    """
    if len(rows) == 0:
        return math.nan
    return corpus_chrf_from_sums(np.asarray(rows).sum(axis=0).tolist(), beta, eps_smoothing)


def corpus_chrf_from_sums(sums: list[float], beta: int = 2, eps_smoothing: bool = False) -> float:
    """Corpus chrF of the column sums of a set of rows (:func:`corpus_chrf_from_rows`, whose
    sums these are)."""
    return _chrf(sums, beta, eps_smoothing)
