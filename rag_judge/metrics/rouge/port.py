"""ROUGE-N, ROUGE-L and ROUGE-Lsum exactly as rouge-score 0.1.2 computes them, without nltk.

A port of ``rouge_score.rouge_scorer``, ``scoring`` and ``tokenize`` (rouge-score, Copyright
Google Research, Apache License 2.0). rouge-score imports nltk at module level, which pulls in
scipy, sklearn and pandas (+170 MB, ~2 s per process); here nltk is imported only for the
Porter stemmer. Every score comes from the same integer counts and the same float operations in
the same order, so the numbers are bit for bit rouge-score's. What differs is speed: a batch
of pairs is scored at once. Each text is tokenized once; n-gram overlaps are counted over
integer ids for the whole batch (:mod:`rag_judge.metrics.ngrams`); LCS lengths come from
rapidfuzz's bit-parallel ``LCSseq`` in C++; rougeLsum's union of LCSs, which depends on the
LCS rouge-score's backtracking picks, computes LCS tables a column at a time as bit vectors
(Hyyrö 2004) and backtracks as rouge-score does.
``split_summaries=True`` (nltk's sentence splitter) is not supported: summaries split on "\\n".
"""

from __future__ import annotations

import functools
import importlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from rag_judge.metrics import ngrams

__all__ = [
    "FOLLOWS",
    "DefaultTokenizer",
    "RougeScorer",
    "Score",
    "ScoreArrays",
    "Tokenizer",
    "fmeasure",
]

FOLLOWS = "0.1.2"  # the rouge-score release whose numbers this port reproduces (signatures say it)


class Tokenizer(Protocol):
    def tokenize(self, text: str) -> list[str]: ...


def tokenize_all(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens: the tokenizer's own batch method (``tokenize_many``) if it has one."""
    many = getattr(tokenizer, "tokenize_many", None)
    if many is not None:
        out: list[list[str]] = many(texts)
        return out
    return [tokenizer.tokenize(t) for t in texts]


class Score(NamedTuple):
    precision: float
    recall: float
    fmeasure: float


_ZERO = Score(precision=0, recall=0, fmeasure=0)  # rouge-score returns int zeros here too
_WORD = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
_TYPE = re.compile(r"rouge[0-9]$")
# ASCII bytes other than [a-z0-9] become spaces; \x01 (the texts' separator) stays.
_ASCII_WORDS = bytes(
    c if chr(c) in "0123456789abcdefghijklmnopqrstuvwxyz\x01" else 32 for c in range(256)
)


def ascii_words(texts: Sequence[str]) -> list[list[str]] | None:
    """The runs of [a-z0-9] of each lowercased text, when all of them are ASCII once
    lowercased (else None): one lower, translate and split over the texts joined, which
    gives what a regex per text gives (lowercasing depends on context only for sigma, which is
    not ASCII)."""
    joined = "\x01".join(texts).lower()
    if not texts or not joined.isascii() or joined.count("\x01") != len(texts) - 1:
        return None
    parts = joined.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split("\x01")
    return [part.split() for part in parts]


class DefaultTokenizer:
    """``rouge_score.tokenizers.DefaultTokenizer``: lowercase, keep only runs of a-z0-9.

    rouge-score replaces every non-[a-z0-9] run with a space and splits on whitespace; the runs
    of [a-z0-9] are exactly those tokens. Words longer than 3 characters go through nltk's
    ``PorterStemmer()`` in its default mode (NLTK_EXTENSIONS), as rouge-score's does.
    """

    def __init__(self, use_stemmer: bool = False) -> None:
        self._stem: Callable[[str], str] | None = None
        if use_stemmer:
            # The only nltk use, so nltk is imported only here (nltk has no type hints).
            porter = importlib.import_module("nltk.stem.porter")
            # Stemming is pure and dominates tokenizing time; words repeat a lot.
            self._stem = functools.lru_cache(maxsize=2**16)(porter.PorterStemmer().stem)

    def tokenize(self, text: str) -> list[str]:
        return self._stemmed(_WORD.findall(text.lower()))

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        words = ascii_words(texts)
        if words is None:
            return [self.tokenize(t) for t in texts]
        return words if self._stem is None else [self._stemmed(w) for w in words]

    def _stemmed(self, tokens: list[str]) -> list[str]:
        if self._stem is None:
            return tokens
        stem = self._stem
        tokens = [stem(t) if len(t) > 3 else t for t in tokens]
        return [t for t in tokens if _VALID.match(t)]  # rouge-score's check after stemming


def fmeasure(precision: float, recall: float) -> float:
    """``rouge_score.scoring.fmeasure``: the same expression, so the same rounding."""
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def _match_masks(ref: list[str]) -> dict[str, int]:
    """Per token, the bit mask of its positions in ``ref``."""
    match: dict[str, int] = {}
    for i, tok in enumerate(ref):
        match[tok] = match.get(tok, 0) | (1 << i)
    return match


def _lcs_columns(ref: list[str], can: list[str], match: dict[str, int] | None = None) -> list[int]:
    """Columns of rouge-score's ``_lcs_table(ref, can)`` as bit vectors.

    Bit i of ``cols[j]`` is set iff ``table[i + 1][j] == table[i][j] + 1``, so
    ``table[i][j] == (cols[j] & ((1 << i) - 1)).bit_count()``. Each column follows from the
    previous one in a few big-integer operations (Hyyrö's bit-parallel LCS), not len(ref) steps.
    ``match`` is ``_match_masks(ref)``, when the caller has it.
    """
    if match is None:
        match = _match_masks(ref)
    full = (1 << len(ref)) - 1
    v = full  # complement of the column: a zero bit where the table steps up
    cols = [0]
    for tok in can:
        u = v & match.get(tok, 0)
        v = ((v + u) | (v - u)) & full
        cols.append(full ^ v)
    return cols


def _lcs_indices(ref: list[str], can: list[str], match: dict[str, int] | None = None) -> list[int]:
    """rouge-score's ``lcs_ind``: the positions in ``ref`` of one LCS, chosen as its
    ``_backtrack_norec`` chooses (ties move up, i.e. drop a ref token), since rougeLsum's
    union of LCSs depends on which LCS is taken. Positions come out in reverse order."""
    cols = _lcs_columns(ref, can, match)
    i, j = len(ref), len(can)
    out: list[int] = []
    while i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            i -= 1
            j -= 1
            out.append(i)
        else:
            low = (1 << (i - 1)) - 1
            left = (cols[j - 1] & ((low << 1) | 1)).bit_count()  # table[i][j - 1]
            up = (cols[j] & low).bit_count()  # table[i - 1][j]
            if left > up:
                j -= 1
            else:
                i -= 1
    return out


def _summary_level_lcs(ref_sents: list[list[str]], can_sents: list[list[str]]) -> Score:
    """ROUGE paper section 3.2, with ROUGE-1.5.5's guard against counting a token twice."""
    if not ref_sents or not can_sents:
        return _ZERO
    m = sum(map(len, ref_sents))
    n = sum(map(len, can_sents))
    if not n or not m:
        return _ZERO
    ref_left = Counter(t for s in ref_sents for t in s)
    can_left = Counter(t for s in can_sents for t in s)
    hits = 0
    for r in ref_sents:
        union: set[int] = set()
        match = _match_masks(r)
        for c in can_sents:
            if not match.keys().isdisjoint(c):  # else their LCS is empty
                union.update(_lcs_indices(r, c, match))
        for t in (r[i] for i in sorted(union)):
            if can_left[t] > 0 and ref_left[t] > 0:
                hits += 1
                can_left[t] -= 1
                ref_left[t] -= 1
    recall = hits / m
    precision = hits / n
    return Score(precision, recall, fmeasure(precision, recall))


class ScoreArrays(NamedTuple):
    """Per-prediction precision, recall and F of one ROUGE type."""

    precision: NDArray[np.float64]
    recall: NDArray[np.float64]
    fmeasure: NDArray[np.float64]


def _fmeasures(precision: NDArray[np.float64], recall: NDArray[np.float64]) -> ScoreArrays:
    """:func:`fmeasure` elementwise: the same operations in the same order, so the same bits."""
    total = precision + recall
    positive = total > 0
    f = np.zeros_like(total)
    np.divide(2 * precision * recall, total, out=f, where=positive)
    return ScoreArrays(precision, recall, f)


def _ratios(
    hits: NDArray[np.int64], pred: NDArray[np.int64], target: NDArray[np.int64]
) -> ScoreArrays:
    """hits / pred and hits / target (0 where a length is 0), with their F."""
    p = np.zeros(len(hits), dtype=np.float64)
    r = np.zeros(len(hits), dtype=np.float64)
    np.divide(hits, pred, out=p, where=pred > 0)
    np.divide(hits, target, out=r, where=target > 0)
    return _fmeasures(p, r)


_CODE_POINTS = 0x110000 - 0x800  # ids a str can hold as one code point each (no surrogates)


def _lcs_lengths(
    table: ngrams.Tokens, left: NDArray[np.int64], right: NDArray[np.int64]
) -> NDArray[np.int64]:
    """LCS length of texts ``left[k]`` and ``right[k]`` of ``table``, for every k, through
    rapidfuzz's bit-parallel LCSseq on token ids written as one code point each (its fastest
    input, a str); each text is converted once, however many pairs it is in."""
    from rapidfuzz.distance import LCSseq
    from rapidfuzz.process import cpdist

    if not len(left):
        return np.zeros(0, dtype=np.int64)
    ends = (table.starts + table.lengths).tolist()
    if table.vocab <= _CODE_POINTS:
        points = table.ids + (table.ids >= 0xD800) * 0x800  # skip the surrogate block
        whole = points.astype("<u4").tobytes().decode("utf-32-le")
        seqs: list[Any] = [whole[a:b] for a, b in zip(table.starts.tolist(), ends)]
    else:  # more distinct tokens than code points: rapidfuzz hashes lists of ints
        seqs = [table.ids[a:b].tolist() for a, b in zip(table.starts.tolist(), ends)]
    lcs = cpdist(
        [seqs[i] for i in left.tolist()], [seqs[j] for j in right.tolist()],
        scorer=LCSseq.similarity, dtype=np.int64,
    )  # fmt: skip
    return np.asarray(lcs, dtype=np.int64).reshape(len(left))


class RougeScorer:
    """``rouge_score.rouge_scorer.RougeScorer`` (``split_summaries=False``), same results.

    :meth:`score_batch` scores many predictions at once; ``score`` and ``score_multi`` are
    batches of one.
    """

    def __init__(
        self,
        rouge_types: Sequence[str],
        use_stemmer: bool = False,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        for rtype in rouge_types:  # rouge-score checks while scoring; here once, same errors
            if rtype not in ("rougeL", "rougeLsum") and not _TYPE.match(rtype):
                raise ValueError(f"Invalid rouge type: {rtype}")
            if rtype == "rouge0":
                raise ValueError(f"rougen requires positive n: {rtype}")
        self.rouge_types = list(rouge_types)
        self._tokenizer = tokenizer if tokenizer is not None else DefaultTokenizer(use_stemmer)

    def score(self, target: str, prediction: str) -> dict[str, Score]:
        return self.score_multi([target], prediction)

    def score_multi(self, targets: Sequence[str], prediction: str) -> dict[str, Score]:
        """Per type, the scores against the target with the best F (the first of equals, as
        rouge-score's ``np.argmax``). Raises ValueError without targets, as argmax does."""
        if not targets:
            raise ValueError("score_multi needs at least one target")
        batch = self.score_batch([prediction], [targets])
        return {k: Score(*(float(a[0]) for a in v)) for k, v in batch.items()}

    def score_batch(
        self, predictions: Sequence[str], references: Sequence[Sequence[str]]
    ) -> dict[str, ScoreArrays]:
        """``score_multi(references[i], predictions[i])`` for every i, as arrays per type."""
        counts = np.fromiter(map(len, references), np.int64, len(references))
        if len(predictions) != len(references):
            raise ValueError(
                f"{len(predictions)} predictions but {len(references)} reference lists"
            )
        if (counts == 0).any():
            raise ValueError(f"pair {int(np.argmin(counts))} has no reference")
        texts = [*predictions, *(t for refs in references for t in refs)]
        # pair k: prediction pred[k] against target text target[k]; a prediction's pairs are
        # consecutive, from group[i] on
        pred = np.repeat(np.arange(len(predictions), dtype=np.int64), counts)
        target = len(predictions) + np.arange(len(pred), dtype=np.int64)
        group = np.cumsum(counts) - counts
        tok = self._tokenizer
        need = any(t != "rougeLsum" for t in self.rouge_types)
        whole = tokenize_all(tok, texts) if need else []
        per_pair = _pair_scores(self.rouge_types, texts, whole, pred, target, tok)
        out: dict[str, ScoreArrays] = {}
        for rtype in self.rouge_types:
            scores = per_pair[rtype]
            best = ngrams.best_of_groups(scores.fmeasure, group)
            out[rtype] = ScoreArrays(*(a[best] for a in scores))
        return out


def _pair_scores(
    types: Sequence[str],
    texts: list[str],
    whole: list[list[str]],
    pred: NDArray[np.int64],
    target: NDArray[np.int64],
    tok: Tokenizer,
) -> dict[str, ScoreArrays]:
    """Each type's scores of every (prediction, target) pair."""
    out: dict[str, ScoreArrays] = {}
    orders = sorted({int(t[5:]) for t in types if _TYPE.match(t)})
    table = ngrams.encode(whole)  # shared by ROUGE-N and rougeL
    if orders:
        for n, (rows, grams) in enumerate(ngrams.ngram_ids(table, orders[-1]), start=1):
            if n not in orders:
                continue
            width = int(grams.max()) + 1 if len(grams) else 1
            counts = ngrams.GramCounts.of(rows, grams, len(texts), width)
            hits = ngrams.clipped_matches(counts, target, counts, pred)
            totals = np.maximum(table.lengths - n + 1, 0)
            out[f"rouge{n}"] = _ratios(
                hits, np.maximum(totals[pred], 1), np.maximum(totals[target], 1)
            )
    if "rougeL" in types:
        lcs = _lcs_lengths(table, pred, target)
        out["rougeL"] = _ratios(lcs, table.lengths[pred], table.lengths[target])
    if "rougeLsum" in types:
        out["rougeLsum"] = _summary_scores(texts, pred, target, tok)
    return out


def _summary_scores(
    texts: list[str], pred: NDArray[np.int64], target: NDArray[np.int64], tok: Tokenizer
) -> ScoreArrays:
    """rougeLsum of every pair: texts split on "\\n" (empty lines dropped) into sentences.
    A pair of one sentence each is plain LCS (every token of the one LCS counts), computed
    in bulk; other pairs take the union of LCSs, sentence by sentence."""
    # rouge-score: split on "\n", drop empty lines, tokenize each (all in one batch here)
    lines = [[s for s in text.split("\n") if s] for text in texts]
    line_tokens = iter(tokenize_all(tok, [s for group in lines for s in group]))
    sents = [[next(line_tokens) for _ in group] for group in lines]
    p = np.zeros(len(pred), dtype=np.float64)
    r = np.zeros(len(pred), dtype=np.float64)
    single = [k for k, (i, j) in enumerate(zip(pred.tolist(), target.tolist()))
              if len(sents[i]) == 1 and len(sents[j]) == 1]  # fmt: skip
    if single:
        left = [sents[i][0] for i in pred[single].tolist()]
        right = [sents[j][0] for j in target[single].tolist()]
        table = ngrams.encode(left + right)
        first, second = np.arange(len(left)), np.arange(len(left), 2 * len(left))
        lcs = _lcs_lengths(table, first, second)
        scores = _ratios(lcs, table.lengths[first], table.lengths[second])
        p[single], r[single] = scores.precision, scores.recall
    rest = np.ones(len(pred), dtype=bool)
    rest[single] = False
    for k in np.flatnonzero(rest).tolist():
        p[k], r[k], _ = _summary_level_lcs(sents[target[k]], sents[pred[k]])
    return _fmeasures(p, r)
