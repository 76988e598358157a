"""A metric's scores in two reports, paired: by sample id, or, for a metric scored per turn or
step, by unit id (the conversation's id and the turn's index, and the step's), each pair with
its conversation so that a bootstrap can resample conversations."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rag_judge.report.model import Report

__all__ = ["Paired", "cluster_sums", "paired"]


def cluster_sums(d: NDArray[np.float64], clusters: Sequence[str]) -> NDArray[np.float64]:
    """Each conversation's summed difference, in first-seen order: the unit a clustered
    randomisation test flips (its statistic, the total, is the pooled mean's numerator)."""
    sums: dict[str, float] = {}
    for value, c in zip(d.tolist(), clusters, strict=True):
        sums[c] = sums.get(c, 0.0) + value
    return np.array(list(sums.values()), dtype=np.float64)


@dataclass(frozen=True)
class Paired:
    """A metric's scores in two reports, index-aligned over what both scored; ``clusters``
    gives each pair's conversation for a metric scored per turn or step (else None); ``ids``
    each pair's id."""

    base: NDArray[np.float64]
    new: NDArray[np.float64]
    missing: int
    clusters: list[str] | None = None
    ids: list[str] | None = None


def paired(base: Report, new: Report, metric: str) -> Paired:
    """``metric``'s scores in both reports over the sample ids they share (in base order),
    index-aligned; a pair unscored (None) or not finite (NaN would poison every mean) on
    either side is left out and counted as missing. A metric scored per turn or step pairs
    its units by id: the conversation's id and the turn's index (and the step's)."""
    before, after = base.column(metric), new.column(metric)
    pairs = [(i, b, after[i]) for i, b in before.items() if i in after]
    kept = [(i, b, v) for i, b, v in pairs if _finite(b) and _finite(v)]
    arr = np.array([(b, v) for _, b, v in kept], dtype=np.float64).reshape(-1, 2)
    owners = base.clusters(metric)
    clusters = None if owners is None else [owners[i] for i, _, _ in kept]
    ids = [i for i, _, _ in kept]
    return Paired(arr[:, 0], arr[:, 1], len(pairs) - len(kept), clusters, ids)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
