"""Retrieval metrics as pure, vectorised kernels over a batch of graded rankings.

Every function takes a :class:`Rankings` batch and returns one value per query (a float64
array); averaging is the report's job. Semantics follow trec_eval 9:

* a document is relevant when its grade is >= ``threshold`` (default 1, must be > 0, so zero
  and negative grades are never relevant);
* DCG gains are the positive grades themselves (``ndcg``) or ``2**g - 1`` (``ndcg_exp``),
  whatever the threshold; the discount of rank ``i`` (1-based) is ``1 / log2(i + 1)``;
* IDCG comes from every judged grade of the query, retrieved or not; an all-zero ideal gives 0;
* precision@k divides by k even when fewer than k documents were retrieved; recall, AP and
  R-precision divide by the number of relevant documents, and are 0 when there are none;
* at chunk level a chunk may earn several labels (``Rankings.extra_*``): it is one ranked item
  (precision, MRR, hit rate, nDCG, rprec_mult), but each relevant label it earns is one found
  unit of the R (recall, R-precision, num_rel_ret, iprec's recall levels) and adds its rank's
  term to the sums over relevant units (AP, bpref, infAP); without extras this is trec_eval's;
* bpref and infAP read which ranked documents carry a judgment (``Rankings.known``): an
  unjudged one is skipped, a judged one graded below 0 is "in the pool but unjudged", as
  trec_eval's RELVALUE_NONPOOL and RELVALUE_UNJUDGED;
* ``max_docs`` is trec_eval's ``-M``: only the top ``max_docs`` of each ranking are read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.ranking import Rankings
from rag_judge.errors import ConfigError
from rag_judge.metrics import retrieval_trec as trec

# The names, their parsing and aggregation live apart (no ranking needed); importers keep
# importing them from here.
from rag_judge.metrics._retrieval_names import (
    COUNTS,
    GEOMETRIC,
    METRIC_FAMILIES,
    MetricSpec,
    aggregate,
    as_spec,
    is_count,
    is_geometric,
    parse_metric,
    uses_threshold,
)
from rag_judge.metrics._retrieval_names import valid_metric_names as valid_metric_names

__all__ = [
    "COUNTS",
    "GEOMETRIC",
    "METRIC_FAMILIES",
    "MIN_JUDGED",
    "MetricSpec",
    "Rankings",
    "aggregate",
    "compute",
    "is_count",
    "is_geometric",
    "parse_metric",
    "uses_threshold",
]

Array = NDArray[np.float64]

MIN_JUDGED = 0.8  # below this mean judged@k, a run warns that its labels are stale

MIN_GEO_MEAN = 0.00001  # trec_eval's floor for gm_map
ELEVEN_POINTS = tuple(i / 10 for i in range(11))


class _Kernel:
    """Intermediate arrays shared by the metrics of one batch, each computed at most once."""

    def __init__(self, rankings: Rankings, threshold: float) -> None:
        self.r = rankings
        self.threshold = threshold
        self.depth = rankings.ranked.shape[1]

    @cached_property
    def present(self) -> NDArray[np.bool_]:
        return ~np.isnan(self.r.ranked)

    @cached_property
    def known(self) -> NDArray[np.bool_]:
        return self.present if self.r.known is None else self.r.known & self.present

    @cached_property
    def n_retrieved(self) -> NDArray[np.int64]:
        counts: NDArray[np.int64] = self.present.sum(axis=1).astype(np.int64)
        return counts

    @cached_property
    def judged_nonrelevant(self) -> NDArray[np.bool_]:
        """Ranked documents judged with a grade in [0, threshold)."""
        with np.errstate(invalid="ignore"):
            return self.known & (self.r.ranked >= 0) & (self.r.ranked < self.threshold)

    @cached_property
    def pooled_unjudged(self) -> NDArray[np.bool_]:
        """Ranked documents in the judgments with a negative grade (trec_eval: in the pool,
        not judged)."""
        with np.errstate(invalid="ignore"):
            return self.known & (self.r.ranked < 0)

    @cached_property
    def n_nonrelevant(self) -> Array:
        """Judged non-relevant documents of the query: at least those ranked (a batch built
        by hand may rank a judged document its judgments leave out)."""
        with np.errstate(invalid="ignore"):
            judged = self.r.judged
            counts = ((judged >= 0) & (judged < self.threshold)).sum(axis=1)
        out: Array = np.maximum(counts, self.judged_nonrelevant.sum(axis=1)).astype(np.float64)
        return out

    @cached_property
    def relevant(self) -> NDArray[np.bool_]:
        with np.errstate(invalid="ignore"):
            return self.r.ranked >= self.threshold  # NaN padding compares False

    @cached_property
    def hits(self) -> NDArray[np.int64]:
        """hits[:, i] = relevant documents in the top i (column 0 is the empty prefix)."""
        cum = np.cumsum(self.relevant, axis=1)
        return np.concatenate([np.zeros((len(self.r), 1), dtype=np.int64), cum], axis=1)

    @cached_property
    def n_relevant(self) -> Array:
        with np.errstate(invalid="ignore"):
            counts: Array = (self.r.judged >= self.threshold).sum(axis=1).astype(np.float64)
        return counts

    def hits_at(self, k: int | None) -> Array:
        return self.hits[:, self.cut(k)].astype(np.float64)

    @cached_property
    def units(self) -> NDArray[np.int64] | None:
        """Relevant labels earned at each rank (1 per relevant item, plus the further labels
        a chunk earns), or None when no item earns more than one (every TREC run)."""
        extra_rank, extra_grade = self.r.extra_rank, self.r.extra_grade
        if extra_rank is None or extra_grade is None:
            return None
        with np.errstate(invalid="ignore"):  # NaN padding compares False
            keep = (extra_grade >= self.threshold) & (extra_rank < self.depth)
        if not keep.any():
            return None
        out = self.relevant.astype(np.int64)
        rows, cols = np.nonzero(keep)
        np.add.at(out, (rows, extra_rank[rows, cols].astype(np.intp)), 1)
        return out

    @cached_property
    def found(self) -> NDArray[np.int64]:
        """found[:, i] = relevant labels earned in the top i: ``hits`` unless a chunk earns
        several (recall's numerator)."""
        if self.units is None:
            return self.hits
        cum = np.cumsum(self.units, axis=1)
        return np.concatenate([np.zeros((len(self.r), 1), dtype=np.int64), cum], axis=1)

    def found_at(self, k: int | None) -> Array:
        return self.found[:, self.cut(k)].astype(np.float64)

    def per_unit(self, per_item: Array) -> Array:
        """A per-relevant-item term weighted by the labels each item earns (unchanged, and
        not multiplied, when none earns several: trec_eval's arithmetic bit for bit)."""
        return per_item if self.units is None else per_item * self.units

    def rows(self, per_item: Array) -> Array:
        """Row sums of a per-relevant-item term, each counted once per label its item earns:
        the row sum bpref and infAP take."""
        return _row_sums(self.per_unit(per_item))

    def cut(self, k: int | None) -> int:
        return int(self.depth) if k is None else min(k, int(self.depth))

    def per_relevant(self, numer: Array) -> Array:
        n = self.n_relevant
        return np.divide(numer, n, out=np.zeros_like(numer), where=n > 0)

    @cached_property
    def precision_at_rank(self) -> Array:
        ranks = np.arange(1, self.depth + 1, dtype=np.float64)
        return np.where(self.relevant, self.hits[:, 1:] / ranks, 0.0)

    @cached_property
    def discount(self) -> Array:
        return 1.0 / np.log2(np.arange(2, self.depth + 2, dtype=np.float64))

    def gains(self, grades: Array, exponential: bool) -> Array:
        with np.errstate(invalid="ignore"):
            positive = np.where(grades > 0, grades, 0.0)  # NaN and grades <= 0 give no gain
        return np.exp2(positive) - 1.0 if exponential else positive

    def dcg(self, k: int | None, exponential: bool) -> Array:
        c = self.cut(k)
        return _row_sums(self.gains(self.r.ranked[:, :c], exponential) * self.discount[:c])

    @cached_property
    def ideal_order(self) -> Array:
        # Judged grades sorted descending; gains are monotone in the grade, so one sort serves both.
        return -np.sort(-np.nan_to_num(self.r.judged, nan=0.0), axis=1)

    def idcg(self, k: int | None, exponential: bool) -> Array:
        ideal = self.ideal_order
        c = ideal.shape[1] if k is None else min(k, ideal.shape[1])
        disc = 1.0 / np.log2(np.arange(2, c + 2, dtype=np.float64))
        return _row_sums(self.gains(ideal[:, :c], exponential) * disc)


def _row_sums(x: Array) -> Array:
    """Each row summed left to right, as trec_eval accumulates. A query's value must not depend
    on its batch: a matrix product or numpy's pairwise sum groups a row's terms by the batch's
    width (its longest ranking), so a streamed run's chunks would differ in the last bit."""
    out = np.zeros(x.shape[0], dtype=np.float64)
    for j in range(x.shape[1]):
        out += x[:, j]
    return out


def _precision(kn: _Kernel, k: int | None) -> Array:
    assert k is not None  # parse_metric guarantees a cut-off
    return kn.hits_at(k) / k


def _recall(kn: _Kernel, k: int | None) -> Array:
    return kn.per_relevant(kn.found_at(k))


def _f1(kn: _Kernel, k: int | None) -> Array:
    p, r = _precision(kn, k), _recall(kn, k)
    return np.divide(2 * p * r, p + r, out=np.zeros_like(p), where=(p + r) > 0)


def _hit_rate(kn: _Kernel, k: int | None) -> Array:
    return (kn.hits_at(k) > 0).astype(np.float64)


def _mrr(kn: _Kernel, k: int | None) -> Array:
    top = kn.relevant[:, : kn.cut(k)]
    if top.shape[1] == 0:
        return np.zeros(len(kn.r))
    first = np.argmax(top, axis=1).astype(np.float64) + 1.0
    return np.where(top.any(axis=1), 1.0 / first, 0.0)


def _map(kn: _Kernel, k: int | None) -> Array:
    return kn.per_relevant(_row_sums(kn.per_unit(kn.precision_at_rank)[:, : kn.cut(k)]))


def _r_precision(kn: _Kernel, k: int | None) -> Array:
    r = np.minimum(kn.n_relevant, kn.depth).astype(np.int64)
    found = np.take_along_axis(kn.found, r[:, None], axis=1)[:, 0].astype(np.float64)
    return kn.per_relevant(found)


def _set_precision(kn: _Kernel) -> Array:
    found, n = kn.hits_at(None), kn.n_retrieved.astype(np.float64)
    return np.divide(found, n, out=np.zeros_like(found), where=n > 0)


def _set_f1(kn: _Kernel) -> Array:
    """trec_eval's set_F with beta 1, in its own arithmetic: (b + 1) P R / (b P + R)."""
    p, r, found = _set_precision(kn), _recall(kn, None), kn.hits_at(None)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (1.0 + 1.0) * p * r / (1.0 * p + r)
    return np.where(found > 0, f, 0.0)


def _gm_map(kn: _Kernel) -> Array:
    """Per query log(max(AP, 1e-5)), as trec_eval computes it and pytrec_eval returns it; the
    all-queries value is exp of the mean (:func:`aggregate`)."""
    return np.log(np.maximum(_map(kn, None), MIN_GEO_MEAN))


def _eleven_point(kn: _Kernel) -> Array:
    total = np.zeros(len(kn.r))
    for level in reversed(ELEVEN_POINTS):  # trec_eval's order: from recall 1.0 down
        total += trec.iprec(level, kn.hits, kn.present, kn.n_relevant, kn.found)
    return total / len(ELEVEN_POINTS)


def _ndcg(kn: _Kernel, k: int | None, exponential: bool = False) -> Array:
    dcg, idcg = kn.dcg(k, exponential), kn.idcg(k, exponential)
    return np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)


_KERNELS: dict[str, Callable[[_Kernel, int | None], Array]] = {
    "precision": _precision,
    "recall": _recall,
    "f1": _f1,
    "hit_rate": _hit_rate,
    "mrr": _mrr,
    "map": _map,
    "r_precision": _r_precision,
    "dcg": lambda kn, k: kn.dcg(k, False),
    "idcg": lambda kn, k: kn.idcg(k, False),
    "ndcg": _ndcg,
    "ndcg_exp": lambda kn, k: _ndcg(kn, k, exponential=True),
    "bpref": lambda kn, k: trec.bpref(
        kn.relevant, kn.judged_nonrelevant, kn.n_relevant, kn.n_nonrelevant, kn.rows
    ),
    "infap": lambda kn, k: trec.infap(
        kn.relevant, kn.judged_nonrelevant, kn.pooled_unjudged, kn.n_relevant, kn.rows
    ),
    "11pt_avg": lambda kn, k: _eleven_point(kn),
    "set_precision": lambda kn, k: _set_precision(kn),
    "set_recall": lambda kn, k: _recall(kn, None),
    "set_f1": lambda kn, k: _set_f1(kn),
    "gm_map": lambda kn, k: _gm_map(kn),
    "num_rel": lambda kn, k: kn.n_relevant.copy(),
    "num_rel_ret": lambda kn, k: kn.found_at(None),
    "num_ret": lambda kn, k: kn.n_retrieved.astype(np.float64),
    "judged": lambda kn, k: trec.judged_at(k or 0, kn.known, kn.n_retrieved),
}
_REAL_KERNELS: dict[str, Callable[[_Kernel, float], Array]] = {
    "iprec": lambda kn, x: trec.iprec(x, kn.hits, kn.present, kn.n_relevant, kn.found),
    "rprec_mult": lambda kn, x: trec.rprec_mult(x, kn.hits, kn.n_retrieved, kn.n_relevant),
}


def compute(
    rankings: Rankings,
    metrics: Iterable[str | MetricSpec],
    threshold: float = 1.0,
    *,
    max_docs: int | None = None,
) -> dict[str, Array]:
    """Per-query values of each metric, keyed by its canonical name (``"ndcg@10"``);
    ``max_docs`` is trec_eval's ``-M``: only the top ``max_docs`` of each ranking count."""
    if not threshold > 0:
        raise ConfigError(f"relevance threshold must be > 0, got {threshold!r}")
    if max_docs is not None:
        if max_docs < 1:
            raise ConfigError(f"max_docs must be a positive integer, got {max_docs!r}")
        rankings = rankings.top(max_docs)
    kernel = _Kernel(rankings, float(threshold))
    out: dict[str, Array] = {}
    for metric in metrics:
        spec = as_spec(metric)
        k = spec.k
        if isinstance(k, float):  # a recall level or a multiple of R, not a cut-off
            out[spec.name] = _REAL_KERNELS[spec.family](kernel, k)
        else:
            out[spec.name] = _KERNELS[spec.family](kernel, k)
    return out
