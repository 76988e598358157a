"""chrF and chrF++ as sacrebleu computes them, from per-sample statistics a report can
bootstrap.

Each pair's statistics are sacrebleu's own (``CHRF._extract_corpus_statistics``, through
:func:`~rag_judge.metrics.sacrebleu.rows.sacrebleu_rows`); a sentence score is sacrebleu's
score of one row, a corpus score its score of the summed rows, so both equal
``sentence_score`` and ``corpus_score`` with the same options. Scores are on [0, 1].
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics.optional import require
from rag_judge.metrics.sacrebleu.rows import SacreStatistics, sacrebleu_rows

__all__ = [
    "check_chrf_options",
    "chrf_statistics",
    "corpus_chrf_from_rows",
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


@functools.lru_cache(maxsize=16)
def _chrf_scorer(order: int, beta: int, eps_smoothing: bool) -> Any:
    """A CHRF object for ``_compute_f_score``, which reads only the total order, beta and
    eps_smoothing (never the references or their cache)."""
    chrf = require("sacrebleu.metrics.chrf")
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
    chrf = require("sacrebleu.metrics.chrf")
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
