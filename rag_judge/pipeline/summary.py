"""A metric's summary: its exact mean (or corpus statistic) and bootstrap interval, clustered
by conversation where its values are units of conversations (``per: turn | step``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.evaluators.base import CorpusStatistic
from rag_judge.pipeline.collect import Step
from rag_judge.pipeline.per_unit import UnitStep
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricInfo,
    MetricSummary,
    Signature,
    Usage,
)
from rag_judge.report.samples import Column
from rag_judge.stats import bootstrap_ci, bootstrap_cis, clustered_bootstrap_ci
from rag_judge.stats.bootstrap import SumStatistic, exact_sums
from rag_judge.stats.pages import release

__all__ = ["shared_intervals", "summarize", "summarize_run"]


def summarize(
    values: Sequence[float | None] | Column,
    *,
    resamples: int,
    confidence: float,
    seed: int,
    corpus: CorpusStatistic | None = None,
    failures: Sequence[Failure | None] = (),
    unscored: int | None = None,
    not_applicable: int | None = None,
    info: MetricInfo | None = None,
    clusters: Sequence[str] | None = None,
    ci: tuple[float, float] | tuple[None, None] | None = None,
) -> MetricSummary:
    """Exact mean (or corpus statistic) of the scored samples and its bootstrap interval;
    ``failures`` are the per-sample failures, of which unscored verdicts are counted apart
    (or ``unscored`` says how many there were), and samples the metric does not apply to
    (``not_applicable``, counted from ``failures`` when not given) are neither scored nor
    errors. ``values`` may be a run's :class:`Column` (a
    million floats are not made Python objects). ``clusters`` labels each value with its
    conversation: the interval then resamples conversations (:func:`clustered_bootstrap_ci`).
    ``ci``: the interval, found already (:func:`shared_intervals`)."""
    info = info or MetricInfo()
    described = {
        "kind": info.kind, "scale": info.scale, "normalises": info.normalises,
        "direction": info.direction, "restates": info.restates,
    }  # fmt: skip
    if not isinstance(values, Column):
        given, values = values, Column()
        values.extend(given)
    column, present = values.arrays()
    n = int(np.count_nonzero(present))
    # every sample scored: no positions and no copy of the scored values (a million of each)
    whole = n == len(present)
    scored = None if whole else np.flatnonzero(present)
    release(present)
    if unscored is None:
        unscored = sum(1 for f in failures if f is not None and f.kind is FailureKind.UNSCORED)
    if not_applicable is None:
        not_applicable = sum(1 for f in failures if f is not None and not f.counts)
    errors = len(present) - n - not_applicable
    counts = {"errors": errors, "unscored": unscored, "not_applicable": not_applicable}
    if not n:
        return MetricSummary(mean=None, n=0, **counts, **described)
    if corpus is not None:
        if n == len(corpus.rows):
            rows = corpus.rows
        else:  # the scored samples' rows (every sample scored: the first n, as before)
            rows = corpus.rows[np.arange(n) if scored is None else scored]
        point = corpus.score(rows)
        release(rows)
        if ci is None:
            ci = _interval(rows, scored, clusters, resamples, confidence, seed, corpus.score)
        aggregate = corpus.description
    else:
        arr = column if scored is None else column[scored]
        # exact, independent of order; a memoryview's floats one at a time, not a list of all
        point = math.fsum(np.ascontiguousarray(arr).data) / len(arr)
        release(arr)
        if ci is None:
            ci = _interval(arr, scored, clusters, resamples, confidence, seed, None)
        aggregate = "mean"
    return MetricSummary(
        mean=point, ci_low=ci[0], ci_high=ci[1], n=n, **counts,
        aggregate=aggregate, **described,
    )  # fmt: skip


def shared_intervals(
    columns: dict[str, Column],
    *,
    resamples: int,
    confidence: float,
    seed: int,
    corpora: dict[str, tuple[Column, CorpusStatistic]] | None = None,
) -> dict[str, tuple[float, float] | tuple[None, None]]:
    """The bootstrap intervals :func:`summarize` would find for the means of the columns that
    have a value on every sample, found together (:func:`bootstrap_cis`: one draw of rows
    serves them all); ``columns`` holds no corpus statistic and no clustered metric. Of the
    ``corpora`` (a metric's column and statistic), those of exact column sums over every
    sample (corpus BLEU, chrF) are found from the same draws."""
    by_length: dict[int, dict[str, NDArray[np.float64]]] = {}
    sums: dict[int, dict[str, tuple[NDArray[np.float64], SumStatistic]]] = {}
    for metric, column in columns.items():
        values, present = column.arrays()
        if _whole(present):
            by_length.setdefault(len(values), {})[metric] = values
    for metric, (column, corpus) in (corpora or {}).items():
        present = column.arrays()[1]
        statistic, rows = corpus.score, corpus.rows
        whole = _whole(present) and len(rows) == len(present)
        if whole and isinstance(statistic, SumStatistic) and exact_sums(rows):
            sums.setdefault(len(rows), {})[metric] = (rows, statistic)
    out: dict[str, tuple[float, float] | tuple[None, None]] = {}
    for n in {*by_length, *sums}:
        group, summed = by_length.get(n, {}), sums.get(n, {})
        found = bootstrap_cis(
            list(group.values()), resamples=resamples, confidence=confidence, seed=seed,
            sums=list(summed.values()),
        )  # fmt: skip
        out.update(zip([*group, *summed], found, strict=True))
    return out


def _whole(present: NDArray[np.bool_]) -> bool:
    """Whether a column has a value on every sample (and any sample at all)."""
    found = bool(len(present) and present.all())
    release(present)
    return found


def _interval(
    rows: NDArray[np.float64],
    scored: NDArray[np.intp] | None,
    clusters: Sequence[str] | None,
    resamples: int,
    confidence: float,
    seed: int,
    statistic: Callable[[NDArray[np.float64]], float] | None,
) -> tuple[float, float] | tuple[None, None]:
    if clusters is None:
        return bootstrap_ci(
            rows, resamples=resamples, confidence=confidence, seed=seed, statistic=statistic
        )
    # the scored units' conversations (None: every unit's)
    picked = range(len(rows)) if scored is None else scored.tolist()
    labels = [clusters[i] for i in picked]
    return clustered_bootstrap_ci(
        rows, labels, resamples=resamples, confidence=confidence, seed=seed, statistic=statistic
    )


def summarize_run(
    steps: Sequence[Step],
    units: Sequence[UnitStep],
    *,
    resamples: int,
    confidence: float,
    seed: int,
    run: dict[str, Any],
) -> tuple[dict[str, Signature], dict[str, MetricSummary], Usage]:
    """Every metric's signature (with the run's options ``run``) and summary, and the usage
    summed: the steps' per-sample metrics first, then the units'."""
    signatures: dict[str, Signature] = {}
    summary: dict[str, MetricSummary] = {}
    usage = Usage()
    averaged = {  # the means without a corpus statistic: their intervals found together
        m: s.columns[m] for s in steps for m in s.metrics if not s.has_corpus(m)
    }
    corpora = {  # and the corpus statistics of column sums, from the same draws
        m: (s.columns[m], corpus) for s in steps for m in s.metrics
        if (corpus := s.corpus(m)) is not None
    }  # fmt: skip
    intervals = shared_intervals(
        averaged, resamples=resamples, confidence=confidence, seed=seed, corpora=corpora
    )
    for step in steps:
        usage += step.usage
        for metric in step.metrics:
            signatures[metric] = step.signatures[metric].with_run(**run)
            summary[metric] = summarize(
                step.columns[metric],
                resamples=resamples,
                confidence=confidence,
                seed=seed,
                corpus=corpora[metric][1] if metric in corpora else None,
                unscored=step.unscored.get(metric, 0),
                not_applicable=step.not_applicable.get(metric, 0),
                info=step.info.get(metric),
                ci=intervals.get(metric),
            )
    for unit in units:
        usage += unit.step.usage
        for metric in unit.step.metrics:
            signatures[unit.name(metric)] = unit.signature(metric, **run)
            summary[unit.name(metric)] = summarize(
                unit.step.columns[metric],
                resamples=resamples,
                confidence=confidence,
                seed=seed,
                corpus=unit.step.corpus(metric),
                unscored=unit.step.unscored.get(metric, 0),
                not_applicable=unit.step.not_applicable.get(metric, 0),
                info=unit.step.info.get(metric),
                clusters=unit.clusters,
            )
    return signatures, summary, usage
