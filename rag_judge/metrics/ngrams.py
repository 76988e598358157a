"""N-gram counting for a whole batch of texts at once, in integer arrays (ROUGE-N, BLEU).

Tokens become dense integer ids (one dict pass), each order's n-grams become dense integer ids
(one sort per order: an n-gram is its (n-1)-gram's id and its last token's id), and counts per
(row, n-gram) come from one more sort. Clipped matches, the sum over n-grams of the smaller of
two counts, are then a binary search per n-gram. All counts are integers, so the scores built
on them are the reference libraries' to the last bit; only the Python loop per n-gram is gone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from numpy.typing import NDArray

__all__ = ["GramCounts", "Tokens", "best_of_groups", "clipped_matches", "encode", "ngram_ids"]

Ints = NDArray[np.int64]
_DENSE_ABOVE = 2**40  # n-gram ids at or above this are renumbered 0, 1, 2, ...
_NO_OVERFLOW = 2**62  # an (n-1)-gram id times the vocabulary stays below this


@dataclass(frozen=True)
class Tokens:
    """Texts as token ids in one flat array: text ``i`` is ``ids[starts[i]:starts[i] +
    lengths[i]]``; ``vocab`` is the number of distinct tokens."""

    ids: Ints
    starts: Ints
    lengths: Ints
    vocab: int


def encode(texts: Sequence[Sequence[Hashable]]) -> Tokens:
    """Dense ids, in order of first appearance, for the tokens of ``texts``."""
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    flat = list(chain.from_iterable(texts))
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(flat))}
    ids = np.fromiter(map(vocab.__getitem__, flat), np.int64, len(flat))
    return Tokens(ids, np.cumsum(lengths) - lengths, lengths, len(vocab))


def ngram_ids(tokens: Tokens, max_order: int) -> list[tuple[Ints, Ints]]:
    """Per order n = 1..``max_order``: (text index, n-gram id) of every n-gram, in text order.

    Equal ids mean equal n-grams across all texts (within an order). Ids stay below 2**40
    (renumbered densely when they would not), so ``row * (id + 1)`` fits in int64 for up to
    2**23 rows.
    """
    text = np.repeat(np.arange(len(tokens.lengths), dtype=np.int64), tokens.lengths)
    room = (tokens.starts + tokens.lengths)[text] - np.arange(len(tokens.ids))  # tokens left
    out = [(text, tokens.ids)]
    grams, prev = tokens.ids, np.arange(len(tokens.ids), dtype=np.int64)
    for n in range(2, max_order + 1):
        at = np.flatnonzero(room >= n)  # where an n-gram starts: its text has n tokens left
        # the (n-1)-gram starting there (prev lists where those start), then one more token
        grams = grams[np.searchsorted(prev, at)]
        if len(grams) and (int(grams.max()) + 1) * tokens.vocab >= _NO_OVERFLOW:
            grams = _dense(grams)  # a huge vocabulary: keep the product below int64's range
        grams = grams * tokens.vocab + tokens.ids[at + n - 1]
        if len(grams) and int(grams.max()) >= _DENSE_ABOVE:
            grams = _dense(grams)
        prev = at
        out.append((text[at], grams))
    return out


def _dense(ids: Ints) -> Ints:
    """The same equalities in ids 0, 1, 2, ... (a sort)."""
    return np.unique(ids, return_inverse=True)[1].astype(np.int64, copy=False)


@dataclass(frozen=True)
class GramCounts:
    """How often each n-gram occurs in each row: ``keys`` sorted ``row * width + gram``."""

    keys: Ints
    counts: Ints
    width: int
    row_starts: Ints  # row r's entries are keys[row_starts[r]:row_starts[r + 1]]

    @classmethod
    def of(
        cls, rows: Ints, grams: Ints, n_rows: int, width: int, counts: Ints | None = None
    ) -> GramCounts:
        """Counts of (row, gram) occurrences, grams below ``width``; with ``counts``, the
        largest count given for a (row, gram) instead (BLEU's merge of several references)."""
        combined = rows * width + grams
        if counts is None or not len(combined):
            keys, found = np.unique(combined, return_counts=True)
        else:
            order = np.argsort(combined, kind="stable")
            combined, counts = combined[order], counts[order]
            first = np.flatnonzero(np.r_[True, combined[1:] != combined[:-1]])
            keys, found = combined[first], np.maximum.reduceat(counts, first)
        starts = np.searchsorted(keys, np.arange(n_rows + 1, dtype=np.int64) * width)
        return cls(keys, found.astype(np.int64, copy=False), width, starts)

    def rows(self) -> Ints:
        return self.keys // self.width

    def grams(self) -> Ints:
        return self.keys % self.width


def _expand(starts: Ints, ends: Ints) -> tuple[Ints, Ints]:
    """The indices of all ranges [starts[k], ends[k]) concatenated, and each one's k."""
    sizes = ends - starts
    owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    offsets = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(sizes) - sizes, sizes
    )
    return starts[owner] + offsets, owner


def clipped_matches(a: GramCounts, a_rows: Ints, b: GramCounts, b_rows: Ints) -> Ints:
    """For each k, the sum over n-grams of min(count in row ``a_rows[k]`` of ``a``, count in row
    ``b_rows[k]`` of ``b``): ROUGE-N's overlap, BLEU's clipped correct n-grams. Both tables
    must share the n-gram ids (and so the width)."""
    if a.width != b.width:
        raise ValueError("clipped_matches needs two tables over the same n-gram ids")
    idx, owner = _expand(a.row_starts[a_rows], a.row_starts[a_rows + 1])
    wanted = b_rows[owner] * b.width + a.keys[idx] % a.width
    at = np.minimum(np.searchsorted(b.keys, wanted), max(len(b.keys) - 1, 0))
    hit = b.keys[at] == wanted if len(b.keys) else np.zeros(len(wanted), dtype=bool)
    both = np.minimum(a.counts[idx[hit]], b.counts[at[hit]])
    return np.bincount(owner[hit], weights=both, minlength=len(a_rows)).astype(np.int64)


def best_of_groups(values: NDArray[np.float64], group_starts: Ints) -> Ints:
    """Index of the first largest value within each group (groups are consecutive runs that
    begin at ``group_starts``), as ``np.argmax`` per group."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    best = np.maximum.reduceat(values, group_starts)
    sizes = np.diff(np.r_[group_starts, len(values)])
    is_best = values == np.repeat(best, sizes)
    index = np.where(is_best, np.arange(len(values)), len(values))
    return np.minimum.reduceat(index, group_starts)
