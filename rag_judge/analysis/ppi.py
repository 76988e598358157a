"""Bias-corrected judge numbers from a labelled slice: per judge metric, the raw judge mean beside
the prediction-powered (PPI++) mean on the human scale and the Rogan–Gladen pass rate
(:mod:`rag_judge.stats.ppi` has the statistics), and the PPI++ difference of two runs.

A metric's samples split three ways: *labelled* (a human label and a finite judge score),
*unlabelled* (a judge score, no label) and neither (no judge score: a label there is unused).
What a label may be depends on the metric: a 1-5 rubric (scale (1, 5)) takes 1-5; a 0/1 judge
metric (scale [0, 1], every judge value 0 or 1, such as ``answer_rate``) takes 0 or 1; any other
judge metric a value on its scale.

The settings an estimate depends on beyond the labels (interval level, ``pass_score``, the pass
rate's bootstrap seed, the interval ``method``) default to the report's own (:func:`settings`),
so that ``calibrate`` and ``gate`` reproduce the numbers the run stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rag_judge.errors import ConfigError, DataError
from rag_judge.report.model import PPIEstimate, Report, ReportWarning, RoganGladen, WarningKind
from rag_judge.stats.ppi import PPIMean, PPIMethod, as_method, mean_ci, ppi_mean, rogan_gladen

__all__ = [
    "MIN_LABELS",
    "MIN_OFF_MODE",
    "EstimateSettings",
    "LabelRows",
    "few_labels_warnings",
    "has_labels",
    "metric_kind",
    "paired_estimate",
    "ppi_difference",
    "ppi_estimate",
    "ppi_estimates",
    "settings",
]

LabelRows = Mapping[str, Mapping[str, float]]  # sample id -> metric -> human label
Kind = Literal["rubric", "binary", "other"]
RUBRIC_SCALE = (1.0, 5.0)
# The smallest slice whose intervals tests/stats/test_ppi_coverage.py checks (≥ 93% at 95%).
MIN_LABELS = 15
# Labels away from the slice's most common value: below this the slice's spread, and so any
# interval's width, rests on a handful of labels (the n·p·(1 − p) ≥ 5 rule of thumb for a
# proportion); skewed slices under-cover at any method (docs/judge-estimates.md).
MIN_OFF_MODE = 5


@dataclass(frozen=True)
class EstimateSettings:
    """What an estimate depends on beyond the scores and labels."""

    confidence: float = 0.95
    pass_score: float = 4.0
    seed: int = 0
    method: PPIMethod = PPIMethod.T


def settings(report: Report) -> EstimateSettings:
    """The settings ``report``'s run used: its interval level, its config's ``seed`` and
    ``labels.pass_score`` / ``labels.method``. A report whose config has no ``labels`` gets the
    defaults; one whose ``labels`` predate ``method`` computed ppi_py's intervals."""
    cfg = report.config
    seed = cfg.get("seed")
    labels: Any = cfg.get("labels")
    out = EstimateSettings(confidence=report.confidence, seed=seed if isinstance(seed, int) else 0)
    if not isinstance(labels, dict):
        return out
    score = labels.get("pass_score")
    return EstimateSettings(
        confidence=out.confidence,
        pass_score=float(score) if isinstance(score, int | float) else out.pass_score,
        seed=out.seed,
        method=as_method(labels.get("method", PPIMethod.PPI_PY)),
    )


def ppi_estimates(
    report: Report,
    labels: LabelRows | None = None,
    *,
    confidence: float | None = None,
    pass_score: float | None = None,
    seed: int | None = None,
    method: PPIMethod | str | None = None,
) -> dict[str, PPIEstimate]:
    """:func:`ppi_estimate` of every judge metric (:meth:`Report.judge_rubrics`) that ``labels``
    (by default the report's own) name at least once, in the report's order. A setting left
    None is the report's (:func:`settings`)."""
    labels = report.labels if labels is None else labels
    named = {m for row in labels.values() for m in row}
    return {
        m: ppi_estimate(
            report,
            m,
            labels,
            confidence=confidence,
            pass_score=pass_score,
            seed=seed,
            method=method,
        )
        for m in report.judge_rubrics()
        if m in named
    }


def ppi_estimate(
    report: Report,
    metric: str,
    labels: LabelRows,
    *,
    confidence: float | None = None,
    pass_score: float | None = None,
    seed: int | None = None,
    method: PPIMethod | str | None = None,
) -> PPIEstimate:
    """The PPI++ estimate of ``metric``'s mean on the human scale, beside the judge's and the
    labels' own means, with intervals by ``method``; the pass rate (a 1-5 rubric passes at a
    score ≥ ``pass_score``, its value as is for a weighted G-Eval score; a 0/1 metric at 1)
    corrected by Rogan–Gladen, its bootstrap seeded with ``seed``. A setting left None is the
    report's (:func:`settings`)."""
    run = settings(report)
    confidence = run.confidence if confidence is None else confidence
    pass_score = run.pass_score if pass_score is None else pass_score
    seed = run.seed if seed is None else seed
    method = run.method if method is None else as_method(method)
    if not (math.isfinite(pass_score) and RUBRIC_SCALE[0] <= pass_score <= RUBRIC_SCALE[1]):
        raise ConfigError(f"pass_score must be a number in [1, 5], got {pass_score!r}")
    scored, human, kind = _paired(report, metric, labels)
    scale = report.summary[metric].scale
    estimate = paired_estimate(metric, scored, human, confidence, method, scale)
    if kind == "other" or not scored:
        return estimate
    cut = pass_score if kind == "rubric" else 1.0
    lab = [sid for sid in scored if sid in human]
    y = np.array([human[sid] for sid in lab], dtype=np.float64)
    f_lab = np.array([scored[sid] for sid in lab], dtype=np.float64)
    f_all = np.array(list(scored.values()), dtype=np.float64)
    rate = rogan_gladen(f_all >= cut, f_lab >= cut, y >= cut, confidence=confidence, seed=seed)
    pass_rate = RoganGladen(
        threshold=pass_score if kind == "rubric" else None,
        apparent=rate.apparent,
        sensitivity=rate.sensitivity,
        specificity=rate.specificity,
        corrected=rate.corrected,
        ci=_bounds(rate.ci_low, rate.ci_high),
    )
    return estimate.model_copy(update={"pass_rate": pass_rate})


def paired_estimate(
    metric: str,
    scored: Mapping[str, float],
    human: Mapping[str, float],
    confidence: float,
    method: PPIMethod,
    scale: tuple[float, float | None] | None,
) -> PPIEstimate:
    """The PPI++ mean of ``metric`` from the judge's values (``scored``, by sample id) and the
    human ones (``human``, on the labelled ids among them), beside the judge's and the labels'
    own means, each interval clipped to ``scale``; no pass rate."""
    lab = [sid for sid in scored if sid in human]
    y = np.array([human[sid] for sid in lab], dtype=np.float64)
    f_lab = np.array([scored[sid] for sid in lab], dtype=np.float64)
    f_all = np.array(list(scored.values()), dtype=np.float64)
    f_unl = np.array([v for sid, v in scored.items() if sid not in human], dtype=np.float64)
    ppi = ppi_mean(y, f_lab, f_unl, confidence=confidence, method=method)
    judge = mean_ci(f_all, confidence=confidence, method=method)
    return PPIEstimate(
        metric=metric,
        confidence=confidence,
        method=method,
        n_labelled=ppi.n_labelled,
        n_unlabelled=ppi.n_unlabelled,
        judge_mean=judge.mean,
        judge_ci=_bounds(judge.low, judge.high, scale),
        labelled_mean=ppi.classical_mean,
        labelled_ci=_bounds(ppi.classical_ci_low, ppi.classical_ci_high, scale),
        estimate=ppi.estimate,
        ci=_bounds(ppi.ci_low, ppi.ci_high, scale),
        se=ppi.se,
        lam=ppi.lam,
        ess=ppi.ess,
        ess_gain=ppi.ess_gain,
    )


def ppi_difference(
    base: Report,
    new: Report,
    metric: str,
    *,
    confidence: float = 0.95,
    method: PPIMethod | str | None = None,
) -> PPIMean | None:
    """The PPI++ mean of the paired difference new − base of ``metric``, or None unless it is a
    judge metric of both reports and both carry labels for it. The judge's differences come
    from every sample id scored in both; the labels' from the ids among them labelled in both
    (each report's label of its own answer); the two are paired by id as in ``compare``. The
    interval ``method`` is by default the new report's (:func:`settings`)."""
    # A judge metric, or one corrected as one (a retrieval metric from judge grades).
    judged = [metric in r.judge_rubrics() or metric in r.estimates for r in (base, new)]
    if not all(judged):
        return None
    if not has_labels(base.labels, metric) or not has_labels(new.labels, metric):
        return None
    before, human_before, _ = _paired(base, metric, base.labels)
    after, human_after, _ = _paired(new, metric, new.labels)
    shared = [sid for sid in before if sid in after]
    both = {sid for sid in shared if sid in human_before and sid in human_after}
    d_y = [human_after[sid] - human_before[sid] for sid in shared if sid in both]
    d_f_lab = [after[sid] - before[sid] for sid in shared if sid in both]
    d_f_unl = [after[sid] - before[sid] for sid in shared if sid not in both]
    method = settings(new).method if method is None else method
    return ppi_mean(d_y, d_f_lab, d_f_unl, confidence=confidence, method=method)


def few_labels_warnings(
    report: Report,
    estimates: Mapping[str, PPIEstimate] | None = None,
    labels: LabelRows | None = None,
) -> list[ReportWarning]:
    """A warning for each estimate (by default the report's, from its labels) whose labelled
    slice is too small for any interval method: fewer than :data:`MIN_LABELS` labelled
    samples, or fewer than :data:`MIN_OFF_MODE` of them away from the most common label."""
    labels = report.labels if labels is None else labels
    out = []
    for metric, e in (report.estimates if estimates is None else estimates).items():
        if e.n_labelled < MIN_LABELS:
            kind, value, threshold = WarningKind.FEW_LABELS, e.n_labelled, MIN_LABELS
            why = f"only {e.n_labelled} labelled samples (fewer than {MIN_LABELS})"
        else:
            scored, human, _ = _paired(report, metric, labels)
            values = [human[sid] for sid in scored if sid in human]
            modal = max(values.count(v) for v in set(values))
            off = len(values) - modal
            if off >= MIN_OFF_MODE:
                continue
            kind, value, threshold = WarningKind.FEW_LABELS_OFF_MODE, off, MIN_OFF_MODE
            why = (
                f"{len(values)} labels of which only {off} differ from the most common one "
                f"(fewer than {MIN_OFF_MODE})"
            )
        message = (
            f"the bias-corrected estimate of {metric} rests on {why}: no interval method "
            "keeps its stated coverage on so small a slice, so read its interval as a rough "
            "range, and label more samples (a random slice) before trusting it."
        )
        out.append(
            ReportWarning(
                kind=kind, metric=metric, value=value, threshold=threshold, message=message
            )
        )
    return out


def metric_kind(report: Report, metric: str) -> Kind:
    """``rubric`` (a 1-5 scale), ``binary`` (scale [0, 1], every judge value 0 or 1) or
    ``other``: what labels ``metric`` takes and whether it has a pass rate."""
    return _kind(report, metric, _scored(report, metric))


# ---- pairing a report's scores with labels ------------------------------------------------------


def _paired(
    report: Report, metric: str, labels: LabelRows
) -> tuple[dict[str, float], dict[str, float], Kind]:
    """The finite judge scores by id, every label of ``metric`` by id (checked against what
    the metric takes), and the metric's kind."""
    scored = _scored(report, metric)
    kind = _kind(report, metric, scored)
    human: dict[str, float] = {}
    for sid, row in labels.items():
        value = row.get(metric)
        if value is not None:
            human[sid] = _check_label(report, metric, kind, sid, float(value))
    return scored, human, kind


def _scored(report: Report, metric: str) -> dict[str, float]:
    return {
        sid: v for sid, v in report.column(metric).items() if v is not None and math.isfinite(v)
    }


def _kind(report: Report, metric: str, scored: Mapping[str, float]) -> Kind:
    scale = report.summary[metric].scale
    if tuple(scale) == RUBRIC_SCALE:
        return "rubric"
    if tuple(scale) == (0.0, 1.0) and all(v in (0.0, 1.0) for v in scored.values()):
        return "binary"
    return "other"


def _check_label(report: Report, metric: str, kind: Kind, sid: str, value: float) -> float:
    if kind == "rubric":
        ok, legal = RUBRIC_SCALE[0] <= value <= RUBRIC_SCALE[1], "1-5 (a 1-5 rubric)"
    elif kind == "binary":
        ok, legal = value in (0.0, 1.0), "0 or 1 (a pass/fail metric)"
    else:
        low, high = report.summary[metric].scale
        ok = math.isfinite(value) and low <= value and (high is None or value <= high)
        legal = f"a number in [{low:g}, {'∞' if high is None else format(high, 'g')}]"
    if not ok:
        raise DataError(f"sample {sid!r}: {metric} label {value:g} is not {legal}")
    return value


def has_labels(labels: LabelRows, metric: str) -> bool:
    """Whether any row of ``labels`` labels ``metric``."""
    return any(metric in row for row in labels.values())


def _bounds(
    low: float | None, high: float | None, scale: tuple[float, float | None] | None = None
) -> tuple[float, float] | None:
    """An interval, clipped to the metric's ``scale`` when given: the mean it bounds cannot
    leave the scale, so clipping loses no coverage and a 1-5 mean never reads "[4.3, 5.2]"."""
    if low is None or high is None:
        return None
    if scale is not None:
        low = max(low, scale[0])
        high = high if scale[1] is None else min(high, scale[1])
    return (low, high)
