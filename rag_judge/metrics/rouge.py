"""ROUGE-N, ROUGE-L and ROUGE-Lsum exactly as rouge-score 0.1.2 computes them, without nltk.

A port of ``rouge_score.rouge_scorer``, ``scoring`` and ``tokenize`` (rouge-score, Copyright
Google Research, Apache License 2.0). rouge-score imports nltk at module level, which pulls in
scipy, sklearn and pandas (+170 MB, ~2 s per process); here nltk is imported only for the
Porter stemmer. Every score comes from the same integer counts and the same float operations in
the same order, so the numbers are bit for bit rouge-score's. What differs is speed: each text
is tokenized once per pair, the prediction's n-grams are shared by its references, and LCS
tables are computed a whole column at a time as bit vectors (Hyyrö 2004), not cell by cell.
``split_summaries=True`` (nltk's sentence splitter) is not supported: summaries split on "\\n".
"""

from __future__ import annotations

import functools
import importlib
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple, Protocol

__all__ = ["FOLLOWS", "DefaultTokenizer", "RougeScorer", "Score", "Tokenizer", "fmeasure"]

FOLLOWS = "0.1.2"  # the rouge-score release whose numbers this port reproduces (signatures say it)


class Tokenizer(Protocol):
    def tokenize(self, text: str) -> list[str]: ...


class Score(NamedTuple):
    precision: float
    recall: float
    fmeasure: float


_ZERO = Score(precision=0, recall=0, fmeasure=0)  # rouge-score returns int zeros here too
_WORD = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
_TYPE = re.compile(r"rouge[0-9]$")


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
        tokens = _WORD.findall(text.lower())
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


def _create_ngrams(tokens: list[str], n: int) -> Counter[Hashable]:
    # Keys are tuples as in rouge-score, except unigrams (plain strings): the counts are equal.
    ngrams: Counter[Hashable] = Counter()
    ngrams.update(tokens if n == 1 else zip(*(tokens[i:] for i in range(n))))
    return ngrams


def _score_ngrams(target: Counter[Hashable], prediction: Counter[Hashable]) -> Score:
    # Integer counts: summing in any order gives rouge-score's exact values.
    hits = sum(min(c, prediction[g]) for g, c in target.items())
    precision = hits / max(prediction.total(), 1)
    recall = hits / max(target.total(), 1)
    return Score(precision, recall, fmeasure(precision, recall))


def _lcs_columns(ref: list[str], can: list[str]) -> list[int]:
    """Columns of rouge-score's ``_lcs_table(ref, can)`` as bit vectors.

    Bit i of ``cols[j]`` is set iff ``table[i + 1][j] == table[i][j] + 1``, so
    ``table[i][j] == (cols[j] & ((1 << i) - 1)).bit_count()``. Each column follows from the
    previous one in a few big-integer operations (Hyyrö's bit-parallel LCS), not len(ref) steps.
    """
    match: dict[str, int] = {}
    for i, tok in enumerate(ref):
        match[tok] = match.get(tok, 0) | (1 << i)
    full = (1 << len(ref)) - 1
    v = full  # complement of the column: a zero bit where the table steps up
    cols = [0]
    for tok in can:
        u = v & match.get(tok, 0)
        v = ((v + u) | (v - u)) & full
        cols.append(full ^ v)
    return cols


def _score_lcs(target: list[str], prediction: list[str]) -> Score:
    if not target or not prediction:
        return _ZERO
    lcs = _lcs_columns(target, prediction)[-1].bit_count()
    precision = lcs / len(prediction)
    recall = lcs / len(target)
    return Score(precision, recall, fmeasure(precision, recall))


def _lcs_indices(ref: list[str], can: list[str]) -> list[int]:
    """rouge-score's ``lcs_ind``: the positions in ``ref`` of one LCS, chosen as its
    ``_backtrack_norec`` chooses (ties move up, i.e. drop a ref token), since rougeLsum's
    union of LCSs depends on which LCS is taken. Positions come out in reverse order."""
    cols = _lcs_columns(ref, can)
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
        for c in can_sents:
            union.update(_lcs_indices(r, c))
        for t in (r[i] for i in sorted(union)):
            if can_left[t] > 0 and ref_left[t] > 0:
                hits += 1
                can_left[t] -= 1
                ref_left[t] -= 1
    recall = hits / m
    precision = hits / n
    return Score(precision, recall, fmeasure(precision, recall))


class _Text:
    """One text tokenized once: its tokens, its sentences (for rougeLsum), its n-grams."""

    def __init__(self, text: str, tok: Tokenizer, tokens: bool, sentences: bool) -> None:
        self.tokens: list[str] = tok.tokenize(text) if tokens else []
        self.sentences: list[list[str]] = []
        if sentences:
            if "\n" not in text and tokens:  # one sentence, the whole text: reuse its tokens
                self.sentences = [self.tokens] if text else []
            else:  # rouge-score: split on "\n", drop empty lines, tokenize each
                self.sentences = [tok.tokenize(s) for s in text.split("\n") if s]
        self._ngrams: dict[int, Counter[Hashable]] = {}

    def ngrams(self, n: int) -> Counter[Hashable]:
        if n not in self._ngrams:
            self._ngrams[n] = _create_ngrams(self.tokens, n)
        return self._ngrams[n]


class RougeScorer:
    """``rouge_score.rouge_scorer.RougeScorer`` (``split_summaries=False``), same results."""

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
        self._lsum = "rougeLsum" in self.rouge_types
        self._tokens = any(t != "rougeLsum" for t in self.rouge_types)

    def _prepare(self, text: str) -> _Text:
        return _Text(text, self._tokenizer, self._tokens, self._lsum)

    def score(self, target: str, prediction: str) -> dict[str, Score]:
        return self._score(self._prepare(target), self._prepare(prediction))

    def score_multi(self, targets: Sequence[str], prediction: str) -> dict[str, Score]:
        """Per type, the scores against the target with the best F (the first of equals, as
        rouge-score's ``np.argmax``). Raises ValueError without targets, as argmax does."""
        pred = self._prepare(prediction)
        per_target = [self._score(self._prepare(t), pred) for t in targets]
        if not per_target:
            raise ValueError("score_multi needs at least one target")
        return {
            k: max(per_target, key=lambda s: s[k].fmeasure)[k]  # max keeps the first of equals
            for k in self.rouge_types
        }

    def _score(self, target: _Text, pred: _Text) -> dict[str, Score]:
        out: dict[str, Score] = {}
        for rtype in self.rouge_types:
            if rtype == "rougeL":
                out[rtype] = _score_lcs(target.tokens, pred.tokens)
            elif rtype == "rougeLsum":
                ts, ps = target.sentences, pred.sentences
                if len(ts) == 1 and len(ps) == 1:
                    # One sentence each: every token of the one LCS is counted, so summary-level
                    # LCS is plain LCS; when the sentences are the whole texts, that is rougeL.
                    whole = ts[0] is target.tokens and ps[0] is pred.tokens
                    if whole and "rougeL" in out:
                        out[rtype] = out["rougeL"]
                    else:
                        out[rtype] = _score_lcs(ts[0], ps[0])
                else:
                    out[rtype] = _summary_level_lcs(ts, ps)
            else:
                n = int(rtype[5:])
                out[rtype] = _score_ngrams(target.ngrams(n), pred.ngrams(n))
        return out
