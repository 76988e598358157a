"""BERTScore math over token embeddings: the definition of bert-score 0.3.13, minus its defects.

Given the token embeddings of a candidate and a reference (one layer of the encoder, special
tokens included), every token is L2-normalised (by the encoder, once, in torch) and matched
greedily to its most similar token on the other side by cosine similarity; precision averages
the candidate side, recall the reference side, each weighted by idf (or 1), with
``[CLS]``/``[SEP]`` weighted 0 but still available as match targets, exactly as in
bert-score's ``greedy_cos_idf``. With several references, P, R and F are each the max over
them.

Where this differs from bert-score, on purpose:

* The similarity matrix is built over the real tokens of the two texts only. bert-score pads a
  batch and multiplies the padded positions' similarity by 0, so a token whose best real match
  is negative gets 0 instead, and a pair's score depends on which pairs share its batch.
* A text with no token besides ``[CLS]``/``[SEP]`` (empty, or whitespace) scores 0 for
  P, R and F instead of crashing (bert-score 0.3.13 under transformers 5 raises on it); a
  zero-weight side (every idf 0) also gives 0 where bert-score gives NaN.
* P, R and F within 1e-6 outside [0, 1] (float error: 1.0000000213 for an identical pair) are
  snapped onto it, so an identical pair scores exactly 1.0; baseline rescaling comes after.

Everything here is pure NumPy over arrays, in float64.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "IdfTable",
    "greedy_prf",
    "idf_table",
    "is_empty",
    "max_over_references",
    "rescale",
    "score_pairs",
    "token_weights",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class IdfTable:
    """Inverse document frequency per token id, over a set of ``n_docs`` reference texts.

    bert-score's formula: ``log((M + 1) / (df + 1))``, and ``log(M + 1)`` for a token that no
    reference contains. Since every reference holds ``[CLS]`` and ``[SEP]``, their idf is 0.
    """

    values: Mapping[int, float]
    n_docs: int

    @property
    def unseen(self) -> float:
        return math.log(self.n_docs + 1)

    def get(self, token_id: int) -> float:
        return self.values.get(token_id, self.unseen)


def idf_table(references: Iterable[Sequence[int] | IntArray]) -> IdfTable:
    """idf over reference token-id lists, one document per list (duplicates count again)."""
    df: Counter[int] = Counter()
    n_docs = 0
    for ids in references:
        n_docs += 1
        df.update(set(int(i) for i in ids))
    values = {tok: math.log((n_docs + 1) / (count + 1)) for tok, count in df.items()}
    return IdfTable(values=values, n_docs=n_docs)


def token_weights(
    ids: Sequence[int] | IntArray, zero_ids: Collection[int], idf: IdfTable | None = None
) -> FloatArray:
    """Per-token weights: idf (or 1 without idf), and 0 for the ids in ``zero_ids``."""
    arr = np.asarray(ids, dtype=np.int64)
    if idf is None:
        weights = np.ones(len(arr), dtype=np.float64)
    else:
        weights = np.array([idf.get(i) for i in arr.tolist()], dtype=np.float64)
    for special in zero_ids:  # two ids: cheaper than np.isin on short texts
        weights[arr == special] = 0.0
    return weights


def is_empty(ids: Sequence[int] | IntArray, zero_ids: Collection[int]) -> bool:
    """True when a text has no token besides the zero-weight specials (bert-score's test)."""
    return all(int(tok) in zero_ids for tok in ids)  # stops at the first content token


def greedy_prf(
    cand: NDArray[np.floating],
    cand_weights: FloatArray,
    ref: NDArray[np.floating],
    ref_weights: FloatArray,
) -> tuple[float, float, float]:
    """(P, R, F1) of one candidate against one reference.

    ``cand``/``ref`` are L2-normalised token embeddings (tokens x dim) of the real tokens
    only, multiplied in float64; the weights are unnormalised (they are divided by their sum
    here). A side whose weights sum to 0 (an empty text) gives (0, 0, 0).
    """
    cand_total = float(cand_weights.sum())
    ref_total = float(ref_weights.sum())
    if cand_total <= 0.0 or ref_total <= 0.0 or len(cand) == 0 or len(ref) == 0:
        return 0.0, 0.0, 0.0
    sim = np.asarray(cand, dtype=np.float64) @ np.asarray(ref, dtype=np.float64).T
    precision = _snap(float(sim.max(axis=1) @ cand_weights) / cand_total)
    recall = _snap(float(sim.max(axis=0) @ ref_weights) / ref_total)
    denom = precision + recall
    f1 = _snap(2.0 * precision * recall / denom) if denom != 0.0 else 0.0
    return precision, recall, f1


SNAP_TOLERANCE = 1e-6


def _snap(value: float) -> float:
    """``value`` moved onto [0, 1] when it lies outside by float error only (at most
    ``SNAP_TOLERANCE``): cosines of unit vectors summed in float64 can give 1.0000000213 for an
    identical pair. A value further outside is left as it is: a cosine below 0 is a legitimate
    (negative) score, and one far above 1 means the vectors were not normalised, which this must
    not hide. Applied before any baseline rescaling, whose results are not bounded to [0, 1]."""
    if 1.0 < value <= 1.0 + SNAP_TOLERANCE:
        return 1.0
    if -SNAP_TOLERANCE <= value < 0.0:
        return 0.0
    return value


def score_pairs(
    unit: Sequence[NDArray[np.floating]],
    weights: Sequence[FloatArray],
    cands: IntArray,
    refs: IntArray,
) -> FloatArray:
    """(P, R, F1) rows for pairs of texts: pair j is text ``cands[j]`` against ``refs[j]``,
    given each text's normalised token vectors and token weights."""
    out = np.empty((len(cands), 3), dtype=np.float64)
    for j, (c, r) in enumerate(zip(cands.tolist(), refs.tolist())):
        out[j] = greedy_prf(unit[c], weights[c], unit[r], weights[r])
    return out


def max_over_references(prf: FloatArray, firsts: Sequence[int] | IntArray) -> FloatArray:
    """Several references: per sample, the element-wise max of P, R and F over its rows, as
    bert-score. Sample ``k``'s rows start at ``firsts[k]`` and run to the next sample's start
    (every sample has at least one row: ``firsts`` strictly increases from 0).

    Each of the three takes its own best reference, so F need not be the harmonic mean of the
    returned P and R.
    """
    starts = np.asarray(firsts, dtype=np.int64)
    rows = np.asarray(prf, dtype=np.float64)
    if len(starts) == 0:
        return np.empty((0, rows.shape[1] if rows.ndim == 2 else 3), dtype=np.float64)
    if starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= len(rows):
        raise ValueError("firsts must start at 0 and strictly increase within the rows")
    best: FloatArray = np.maximum.reduceat(rows, starts, axis=0)
    return best


def rescale(values: FloatArray, baseline: FloatArray) -> FloatArray:
    """bert-score's baseline rescaling ``(x - b) / (1 - b)``, column-wise for P, R, F."""
    b = np.asarray(baseline, dtype=np.float64)
    return (np.asarray(values, dtype=np.float64) - b) / (1.0 - b)
