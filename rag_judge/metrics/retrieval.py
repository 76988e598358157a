"""Retrieval metrics as pure, vectorised kernels over a batch of graded rankings.

Every function takes a :class:`Rankings` batch and returns one value per query (a float64
array); averaging is the report's job. Semantics follow trec_eval 9:

* a document is relevant when its grade is >= ``threshold`` (default 1, must be > 0, so zero
  and negative grades are never relevant);
* DCG gains are the positive grades themselves (``ndcg``) or ``2**g - 1`` (``ndcg_exp``),
  whatever the threshold; the discount of rank ``i`` (1-based) is ``1 / log2(i + 1)``;
* IDCG comes from every judged grade of the query, retrieved or not; an all-zero ideal gives 0;
* precision@k divides by k even when fewer than k documents were retrieved; recall, AP and
  R-precision divide by the number of relevant documents, and are 0 when there are none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.ranking import Rankings
from rag_judge.errors import ConfigError

__all__ = [
    "METRIC_FAMILIES",
    "MetricSpec",
    "Rankings",
    "compute",
    "parse_metric",
]

Array = NDArray[np.float64]

# family -> whether "@k" is required ("yes"), optional ("opt") or not allowed ("no").
METRIC_FAMILIES: dict[str, str] = {
    "precision": "yes",
    "recall": "yes",
    "f1": "yes",
    "hit_rate": "yes",
    "mrr": "opt",
    "map": "opt",
    "r_precision": "no",
    "dcg": "opt",
    "idcg": "opt",
    "ndcg": "opt",
    "ndcg_exp": "opt",
}
_NAME = re.compile(r"^(?P<family>[a-z_][a-z0-9_]*)(?:@(?P<k>[^@]*))?$")


@dataclass(frozen=True, order=True)
class MetricSpec:
    """A parsed metric name: a family and an optional cut-off ``k`` (None = whole ranking)."""

    family: str
    k: int | None = None

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"


def parse_metric(name: str) -> MetricSpec:
    """Parse ``"ndcg@10"`` into ``MetricSpec("ndcg", 10)``, with errors that list the legal set."""
    match = _NAME.match(name.strip().lower()) if isinstance(name, str) else None
    family = match.group("family") if match else None
    if match is None or family not in METRIC_FAMILIES:
        raise ConfigError(
            f"unknown retrieval metric {name!r}; valid metrics: {valid_metric_names()}"
        )
    need_k, raw_k = METRIC_FAMILIES[family], match.group("k")
    if raw_k is None:
        if need_k == "yes":
            raise ConfigError(f"metric {name!r} needs a cut-off, e.g. '{family}@10'")
        return MetricSpec(family)
    if need_k == "no":
        raise ConfigError(f"metric {name!r} takes no cut-off; write '{family}'")
    if not re.fullmatch(r"[+-]?\d+", raw_k) or int(raw_k) <= 0:
        raise ConfigError(f"metric {name!r}: k must be a positive integer, got {raw_k!r}")
    return MetricSpec(family, int(raw_k))


def valid_metric_names() -> str:
    return ", ".join(
        {"yes": f"{f}@k", "opt": f"{f}, {f}@k", "no": f}[need]
        for f, need in METRIC_FAMILIES.items()
    )


class _Kernel:
    """Intermediate arrays shared by the metrics of one batch, each computed at most once."""

    def __init__(self, rankings: Rankings, threshold: float) -> None:
        self.r = rankings
        self.threshold = threshold
        self.depth = rankings.ranked.shape[1]

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
    return kn.per_relevant(kn.hits_at(k))


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
    return kn.per_relevant(_row_sums(kn.precision_at_rank[:, : kn.cut(k)]))


def _r_precision(kn: _Kernel, k: int | None) -> Array:
    r = np.minimum(kn.n_relevant, kn.depth).astype(np.int64)
    hits = np.take_along_axis(kn.hits, r[:, None], axis=1)[:, 0].astype(np.float64)
    return kn.per_relevant(hits)


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
}


def compute(
    rankings: Rankings, metrics: Iterable[str | MetricSpec], threshold: float = 1.0
) -> dict[str, Array]:
    """Per-query values of each metric, keyed by its canonical name (``"ndcg@10"``)."""
    if not threshold > 0:
        raise ConfigError(f"relevance threshold must be > 0, got {threshold!r}")
    kernel = _Kernel(rankings, float(threshold))
    out: dict[str, Array] = {}
    for metric in metrics:
        spec = metric if isinstance(metric, MetricSpec) else parse_metric(metric)
        out[spec.name] = _KERNELS[spec.family](kernel, spec.k)
    return out
