"""TER as sacrebleu computes it, from per-sample statistics a report can bootstrap.

Each pair's statistics are those of sacrebleu's ``TER._extract_corpus_statistics``: its
tokenizer, then the edit count of :func:`~rag_judge.metrics.sacrebleu.ter_port.ter_edits` (a
faster port of sacrebleu's shift search, same numbers). Scores are sacrebleu's divided by
100: an error rate, 0 at best and unbounded above.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.metrics.optional import require
from rag_judge.metrics.sacrebleu.rows import SacreStatistics, check_pairs, reference_count
from rag_judge.metrics.sacrebleu.ter_port import ter_edits

__all__ = ["corpus_ter_from_rows", "sentence_ter_from_rows", "ter_statistics"]


@functools.lru_cache(maxsize=1)
def _ter_scorer() -> Any:
    """A TER object for ``_compute_score_from_stats``, which reads only the statistics."""
    return require("sacrebleu.metrics.ter").TER()


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
    ter = require("sacrebleu.metrics.ter")
    metric = ter.TER(
        normalized=normalized,
        no_punct=no_punct,
        asian_support=asian_support,
        case_sensitive=case_sensitive,
    )
    check_pairs(hypotheses, references)
    metric.num_refs = reference_count(references)  # for the signature, as sacrebleu counts
    split = metric.tokenizer  # sacrebleu's _preprocess_segment is tokenizer(sent.rstrip())
    stats: list[list[float]] = []
    for hyp, refs in zip(hypotheses, references):
        words = split(hyp.rstrip()).split()
        ref_words = [split(ref.rstrip()).split() for ref in refs]
        # Fewest edits over the references, over their mean length (sacrebleu's statistics).
        edits = min(ter_edits(words, ref) for ref in ref_words)
        stats.append([edits, sum(map(len, ref_words)) / len(ref_words)])
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
