"""ROUGE for a batch of pairs, as rouge-score computes it, with a tokenizer for every script.

The numbers come from :mod:`rag_judge.metrics.rouge.port`, rouge-score's ``RougeScorer``
ported bit for bit without nltk. What this module adds is batching, the choice of tokenizer
and :class:`UnicodeTokenizer`, which keeps the letters rouge-score's default deletes.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics.optional import require
from rag_judge.metrics.rouge import port

__all__ = [
    "ROUGE_BATCH",
    "ROUGE_MEASURES",
    "ROUGE_TOKENIZERS",
    "ROUGE_TYPES",
    "UnicodeTokenizer",
    "rouge_scores",
    "rouge_tokenizer",
]

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
ROUGE_MEASURES = ("precision", "recall", "f1")
ROUGE_TOKENIZERS = ("default", "unicode")
ROUGE_BATCH = 20_000  # pairs scored at a time: bounds the batch's arrays


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
            porter = require("nltk.stem.porter")
            self._stem = functools.lru_cache(maxsize=2**16)(porter.PorterStemmer().stem)

    def tokenize(self, text: str) -> list[str]:
        return self._stemmed(self._pattern.findall(unicodedata.normalize("NFC", text).lower()))

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        words = port.ascii_words(texts)  # ASCII text: this tokenizer is the default's
        if words is None:
            return [self.tokenize(t) for t in texts]
        return words if self._stem is None else [self._stemmed(w) for w in words]

    def _stemmed(self, tokens: list[str]) -> list[str]:
        if self._stem is not None:
            tokens = [self._stem(t) if len(t) > 3 and t.isascii() else t for t in tokens]
        return [t for t in tokens if t]


def rouge_tokenizer(name: str, use_stemmer: bool) -> port.Tokenizer:
    """The tokenizer a config names: ``default`` (rouge-score's) or ``unicode``."""
    if name == "default":
        if use_stemmer:
            require("nltk.stem.porter")  # our hint if nltk is missing
        return port.DefaultTokenizer(use_stemmer)
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
    scorer = port.RougeScorer(rouge_types, tokenizer=rouge_tokenizer(tokenizer, use_stemmer))
    n = len(predictions)
    out = {f"{t}_{m}": np.zeros(n, dtype=np.float64) for t in rouge_types for m in ROUGE_MEASURES}
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"pair {i} has no reference")
    # In chunks: the batch's arrays stay small (and the scores are per pair, so exact).
    for start in range(0, n, ROUGE_BATCH):
        stop = min(start + ROUGE_BATCH, n)
        best = scorer.score_batch(predictions[start:stop], references[start:stop])
        for rtype, scores in best.items():
            out[f"{rtype}_precision"][start:stop] = scores.precision
            out[f"{rtype}_recall"][start:stop] = scores.recall
            out[f"{rtype}_f1"][start:stop] = scores.fmeasure
    return out
