"""sacrebleu's BLEU sufficient statistics for a whole batch, in integer arrays, bit for bit.

sacrebleu (``BLEU._extract_corpus_statistics``) tokenizes each segment, counts its n-grams in a
``Counter`` of tuples, merges the references' counts by maximum and clips the hypothesis's
counts against them, all in Python loops. Here, for the same segments:

* the ``13a`` tokenizer (the default) runs once over the batch joined by ``"\\0"``: its
  replacements and regular expressions never match across that separator (it is neither in
  their character classes nor a digit, ``.``, ``,`` or ``-``), so every segment comes out as
  ``Tokenizer13a`` makes it (a test checks this against sacrebleu). Other tokenizers are
  sacrebleu's own objects, called per segment;
* n-gram counts, the reference maximum and the clipping are integer array operations
  (:mod:`rag_judge.metrics.ngrams`), and the closest reference length is sacrebleu's rule
  (smallest length difference, then the shorter reference) as one sort key.

Rows are ``[sys_len, ref_len, correct_1..N, total_1..N]``, sacrebleu's layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.metrics import ngrams

__all__ = ["bleu_rows", "tokenize_segments"]

_SEP = "\0"
_PUNCTUATION = r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"  # TokenizerRegexp's first rule


def _is_13a(tokenizer: Any) -> bool:
    return type(tokenizer).__name__ == "Tokenizer13a" and tokenizer.signature() == "13a"


def _tokenize_13a(tokenizer: Any, segments: list[str]) -> list[list[str]] | None:
    """``Tokenizer13a`` over all segments at once; None if a segment holds the separator."""
    joined = _SEP.join(segments)
    if joined.count(_SEP) != len(segments) - 1:
        return None
    # Tokenizer13a.__call__'s language-independent part, then TokenizerRegexp's rules, each
    # line padded with a space either side as Tokenizer13a pads it.
    joined = joined.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in joined:
        joined = joined.replace("&quot;", '"').replace("&amp;", "&")
        joined = joined.replace("&lt;", "<").replace("&gt;", ">")
    joined = " " + joined.replace(_SEP, f" {_SEP} ") + " "
    rules = list(tokenizer._post_tokenizer._re)
    if rules and rules[0][0].pattern == _PUNCTUATION and rules[0][1] == r" \1 ":
        # The first rule pads each of a set of ASCII characters with spaces, one character at
        # a time: a translation table does the same in C, without re's per-match template.
        first = rules.pop(0)[0]
        table = {c: f" {chr(c)} " for c in range(128) if first.fullmatch(chr(c))}
        joined = joined.translate(table)
    for pattern, repl in rules:
        joined = pattern.sub(repl, joined)
    return [part.split() for part in joined.split(_SEP)]


def tokenize_segments(tokenizer: Any, segments: Sequence[str], lowercase: bool) -> list[list[str]]:
    """Each segment's tokens as ``BLEU._preprocess_segment`` and then ``line.split()`` give
    them: lowercased if asked, right-stripped, tokenized."""
    lines = [s.lower().rstrip() for s in segments] if lowercase else [s.rstrip() for s in segments]
    if lines and _is_13a(tokenizer):
        tokens = _tokenize_13a(tokenizer, lines)
        if tokens is not None:
            return tokens
    return [tokenizer(line).split() for line in lines]


def bleu_rows(
    tokenizer: Any,
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    lowercase: bool,
    max_order: int,
) -> NDArray[np.int64]:
    """Per pair, sacrebleu's ``[sys_len, ref_len, correct_1..N, total_1..N]`` against all of
    its references (each pair needs one at least)."""
    n_hyp = len(hypotheses)
    per_pair = np.fromiter(map(len, references), np.int64, n_hyp)
    segments = [*hypotheses, *(r for refs in references for r in refs)]
    table = ngrams.encode(tokenize_segments(tokenizer, segments, lowercase))
    hyp_len, ref_lens = table.lengths[:n_hyp], table.lengths[n_hyp:]
    ref_pair = np.repeat(np.arange(n_hyp, dtype=np.int64), per_pair)
    rows = np.zeros((n_hyp, 2 + 2 * max_order), dtype=np.int64)
    rows[:, 0] = hyp_len
    rows[:, 1] = _closest_ref_len(hyp_len, ref_lens, ref_pair, per_pair)
    pairs = np.arange(n_hyp, dtype=np.int64)
    for n, (text, grams) in enumerate(ngrams.ngram_ids(table, max_order), start=1):
        width = int(grams.max()) + 1 if len(grams) else 1
        is_hyp = text < n_hyp
        hyp = ngrams.GramCounts.of(text[is_hyp], grams[is_hyp], n_hyp, width)
        each_ref = ngrams.GramCounts.of(text[~is_hyp] - n_hyp, grams[~is_hyp], len(ref_lens), width)
        # the references' counts merged by maximum, per pair (as _extract_reference_info)
        merged = ngrams.GramCounts.of(
            ref_pair[each_ref.rows()], each_ref.grams(), n_hyp, width, counts=each_ref.counts
        )
        rows[:, 1 + n] = ngrams.clipped_matches(hyp, pairs, merged, pairs)
        rows[:, 1 + max_order + n] = np.maximum(hyp_len - n + 1, 0)
    return rows


def _closest_ref_len(
    hyp_len: NDArray[np.int64],
    ref_lens: NDArray[np.int64],
    ref_pair: NDArray[np.int64],
    per_pair: NDArray[np.int64],
) -> NDArray[np.int64]:
    """``BLEU._get_closest_ref_len`` per pair: the least |hyp - ref|, then the shorter ref."""
    if not len(hyp_len):
        return np.zeros(0, dtype=np.int64)
    span = int(ref_lens.max()) + 1
    key = np.abs(hyp_len[ref_pair] - ref_lens) * span + ref_lens
    best: NDArray[np.int64] = np.minimum.reduceat(key, np.cumsum(per_pair) - per_pair) % span
    return best
