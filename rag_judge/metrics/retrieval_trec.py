"""trec_eval's measures beyond the common ones, as kernels over a padded batch: bpref, infAP,
interpolated precision at recall levels, Rprec_mult, and judged@k (ir_measures' Judged@k).

Each takes the arrays :mod:`rag_judge.metrics.retrieval`'s kernel shares, row = query, column =
rank, and follows trec_eval 9's C code (``m_bpref.c``, ``m_infAP.c``, ``m_iprec_at_recall.c``,
``m_Rprec_mult.c``) step for step, including its integer cut-offs: a recall level or multiple
``x`` of R becomes ``(long) (x * R + 0.9)`` documents, as the trec_eval that pytrec_eval bundles
computes it (trec_eval 10 rounds the recall levels instead).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["bpref", "infap", "iprec", "judged_at", "rprec_mult"]

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
# The caller's left-to-right row sum (batch-independent), which at chunk level also counts a
# chunk's term once per label it earns.
RowSum = Callable[[Array], Array]
INFAP_EPSILON = 0.00001


def _before(mask: Mask) -> Array:
    """How many ``mask`` entries lie strictly before each column, per row."""
    counts: Array = (np.cumsum(mask, axis=1) - mask.astype(np.int64)).astype(np.float64)
    return counts


def _per_relevant(total: Array, n_relevant: Array) -> Array:
    # 0 without relevant documents, where trec_eval's sum is 0 too (nothing relevant to rank)
    out: Array = np.divide(total, n_relevant, out=np.zeros_like(total), where=n_relevant > 0)
    return out


def bpref(
    relevant: Mask, nonrelevant: Mask, n_relevant: Array, n_nonrelevant: Array, rows: RowSum
) -> Array:
    """Buckley & Voorhees' bpref: per relevant document, 1 - (judged non-relevant ranked above
    it, at most R) / min(R, N); unjudged documents are skipped."""
    above = _before(nonrelevant)
    denom = np.minimum(n_nonrelevant, n_relevant)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 1.0 - np.minimum(above, n_relevant[:, None]) / denom
    share = np.where(denom > 0, share, 0.0)  # only reached by judgments that omit ranked ones
    per_doc = np.where(relevant, np.where(above > 0, share, 1.0), 0.0)
    return _per_relevant(rows(per_doc), n_relevant)


def infap(
    relevant: Mask, nonrelevant: Mask, pooled: Mask, n_relevant: Array, rows: RowSum
) -> Array:
    """Yilmaz & Aslam's inferred AP: documents outside the pool are skipped, pooled but
    unjudged ones (graded below 0) count toward the depth but not the precision estimate."""
    rel_so_far = np.cumsum(relevant, axis=1).astype(np.float64)
    nonrel, unjudged = _before(nonrelevant), _before(pooled)
    j = np.arange(relevant.shape[1], dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        later = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((rel_so_far - 1 + nonrel + unjudged) / j) * (
            (rel_so_far - 1 + INFAP_EPSILON) / (rel_so_far - 1 + nonrel + 2 * INFAP_EPSILON)
        )
    per_doc = np.where(relevant, np.where(j == 0, 1.0, later), 0.0)
    return _per_relevant(rows(per_doc), n_relevant)


def _cutoffs(x: float, n_relevant: Array) -> NDArray[np.int64]:
    """trec_eval's ``(long) (x * num_rel + 0.9)``: truncation toward zero of a positive."""
    return np.trunc(x * n_relevant + 0.9).astype(np.int64)


def iprec(
    level: float,
    hits: NDArray[np.int64],
    present: Mask,
    n_relevant: Array,
    found: NDArray[np.int64] | None = None,
) -> Array:
    """Interpolated precision at recall ``level``: the best precision at any rank from the one
    where the ``c``-th relevant document is found on, c = (long) (level * R + 0.9); 0 when fewer
    than c relevant documents were retrieved. ``hits[:, i]`` = relevant in the top i;
    ``found[:, i]`` = relevant labels earned in the top i where a chunk earns several (the
    recall levels count labels, the precision counts ranked items), else ``hits``."""
    found_at = hits if found is None else found
    n, depth = present.shape
    if depth == 0:
        return np.zeros(n)
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    precision = np.where(present, hits[:, 1:] / ranks, 0.0)
    best_from = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
    cut = _cutoffs(level, n_relevant)
    total = found_at[:, -1]
    # rank index of the c-th relevant document (c = 0: the whole ranking's best)
    at = np.argmax(found_at[:, 1:] >= np.maximum(cut, 1)[:, None], axis=1)
    at = np.where(cut == 0, 0, at)
    value: Array = best_from[np.arange(n), at]
    return np.where((cut <= total) & (total > 0), value, 0.0)


def rprec_mult(
    x: float, hits: NDArray[np.int64], n_retrieved: NDArray[np.int64], n_relevant: Array
) -> Array:
    """Precision at ``c`` = (long) (x * R + 0.9) documents, dividing by c even past the end of
    the ranking (trec_eval's Rprec_mult_x); 0 when c is 0."""
    cut = _cutoffs(x, n_relevant)
    found = np.take_along_axis(hits, np.minimum(cut, n_retrieved)[:, None], axis=1)[:, 0]
    return np.divide(found.astype(np.float64), cut, out=np.zeros(len(cut)), where=cut > 0)


def judged_at(k: int, known: Mask, n_retrieved: NDArray[np.int64]) -> Array:
    """Share of the top min(k, retrieved) documents that carry a judgment; 0 for an empty
    ranking. ir_measures' Judged@k divides by min(k, retrieved) too since 0.3.1 (by k before),
    but raises ZeroDivisionError on an empty ranking and orders by the float64 score with ties
    by doc id ascending, not in trec_eval order."""
    top = np.minimum(k, n_retrieved)
    counts = np.cumsum(known, axis=1)
    counts = np.concatenate([np.zeros((len(top), 1), dtype=counts.dtype), counts], axis=1)
    judged = np.take_along_axis(counts, top[:, None], axis=1)[:, 0].astype(np.float64)
    return np.divide(judged, top, out=np.zeros(len(top)), where=top > 0)
