"""A label plan: which samples a person labels for a rubric's human-scale mean to reach ±h with
few labels, and the estimate from the labels given so far (``stats/active_ppi.py``).

The plan puts the rubric's judged samples in a seeded random order (the stream). Each gets a
known inclusion probability pi_i, larger where the judge recorded disagreement (a jury's or n
sampled verdicts' spread, else the entropy of its score distribution: the review mode's
uncertainty), and a seeded uniform U_i; it is queued iff U_i < pi_i. Nothing in the plan looks
at a label, so the inverse-probability-weighted estimate is unbiased whatever the judge's bias.

The estimate walks the stream up to the first queued sample still unlabelled: the samples before
it are processed (a queued one with its label, an unqueued one with its judge score alone).
Labels of samples the plan did not queue are not used (they would bias it); they are counted.
docs/judge-estimates.md ("Spending labels where they help") says what the interval guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rag_judge.errors import ConfigError, DataError
from rag_judge.report.judgments import Judgment
from rag_judge.report.model import Report
from rag_judge.stats.active_ppi import (
    FLOOR,
    LAM_WARMUP,
    MIN_LABELS,
    MIX,
    active_path,
    inclusion_probabilities,
    planned_rate,
)

__all__ = [
    "LabelPlan",
    "PlanEstimate",
    "PlanItem",
    "estimate_plan",
    "make_plan",
    "page_plan",
    "report_key",
    "verdict_uncertainty",
]


class PlanItem(BaseModel):
    """One sample of the stream: its judge score, inclusion probability, and whether it is
    queued for a label."""

    model_config = ConfigDict(extra="forbid")
    id: str
    judge: float
    pi: float = Field(gt=0, le=1)
    queued: bool


class LabelPlan(BaseModel):
    """What ``rag-judge label-plan`` writes (plan.json)."""

    model_config = ConfigDict(extra="forbid")
    report: str  # the report's name and creation time: labels are for its samples
    rubric: str
    target_halfwidth: float = Field(gt=0)
    confidence: float = Field(gt=0, lt=1)
    seed: int
    rule: Literal["uncertainty", "uniform"]  # uniform: the judge recorded no disagreement
    rate: float = Field(gt=0, le=1)
    mix: float = MIX
    floor: float = FLOOR
    t_star: int  # the stream step where the sequence is tuned to be narrowest
    min_labels: int = MIN_LABELS
    lam_warmup: int = LAM_WARMUP
    stream: list[PlanItem]

    def queue(self) -> list[str]:
        """The ids to label, in order."""
        return [item.id for item in self.stream if item.queued]

    @classmethod
    def load(cls, path: str | Path) -> LabelPlan:
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path}: file not found") from None
        except ValueError as exc:
            raise DataError(f"{path}: not a label plan ({exc})") from None


@dataclass(frozen=True)
class PlanEstimate:
    """The estimate after the labels so far. ``steps``: stream samples processed; ``next_id``:
    the queued sample to label next (None when the queue is done); ``outside``: labelled samples
    the plan did not queue (not used)."""

    rubric: str
    labels: int
    steps: int
    estimate: float | None
    low: float | None
    high: float | None
    lam: float | None
    reached: bool
    next_id: str | None
    outside: int

    @property
    def half(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2

    def status(self, h: float) -> str:
        """A line for a person: the interval, and whether to stop."""
        if self.estimate is None or self.half is None:
            return f"{self.rubric}: no label yet; label {self.next_id} first"
        if self.labels < MIN_LABELS:  # the sequence's variance is a guess on so few labels
            where = (
                f"{self.rubric} = {self.estimate:.3f} ({self.labels} labels; the interval is "
                f"shown from {MIN_LABELS})"
            )
        else:
            where = f"{self.rubric} = {self.estimate:.3f} ± {self.half:.3f} ({self.labels} labels)"
        if self.reached:
            return f"{where}; stop: ±{h:g} reached"
        if self.next_id is None:
            return f"{where}; the plan is spent before ±{h:g} (plan again with a higher --rate)"
        return f"{where}; label {self.next_id} next"


def verdict_uncertainty(judgment: Judgment | None) -> float | None:
    """The review mode's uncertainty of a verdict (``BaseJudgment.uncertainty``)."""
    return None if judgment is None else judgment.uncertainty()


def make_plan(
    report: Report,
    h: float,
    *,
    rubric: str | None = None,
    seed: int = 0,
    confidence: float | None = None,
    rate: float | None = None,
) -> LabelPlan:
    """The plan for ``rubric`` (default: the report's first 1-5 rubric) to reach ±``h`` at
    ``confidence`` (default: the report's); ``rate`` fixes the share of samples queued
    (default: :func:`planned_rate`)."""
    rubrics = [m for m in report.graded_rubrics() if report.summary[m].n > 0]
    if rubric is None:
        if not rubrics:
            raise ConfigError("the report has no 1-5 judge rubric with a score to plan labels for")
        rubric = rubrics[0]
    elif rubric not in rubrics:
        raise ConfigError(f"rubric {rubric!r} is not a scored 1-5 rubric of the report: {rubrics}")
    if not (math.isfinite(h) and h > 0):
        raise ConfigError(f"the target half-width must be a positive number, got {h!r}")
    level = report.confidence if confidence is None else confidence
    if not 0 < level < 1:
        raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {level!r}")
    if rate is not None and not 0 < rate <= 1:
        raise ConfigError(f"rate must be in (0, 1], got {rate!r}")
    ids, scores, signal = [], [], []
    for r in report.samples:
        score = r.scores.get(rubric)
        if score is not None and math.isfinite(score):
            ids.append(r.id)
            scores.append(float(score))
            signal.append(verdict_uncertainty(r.judgments.get(rubric)))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(ids))
    draws = rng.random(len(ids))
    measured = any(u is not None for u in signal)
    u = np.array([np.nan if signal[i] is None else signal[i] for i in order], dtype=np.float64)
    f = np.array([scores[i] for i in order], dtype=np.float64)
    alpha = 1.0 - level
    chosen = rate if rate is not None else planned_rate(u if measured else None, f, h, alpha)
    pi = inclusion_probabilities(u if measured else None, len(ids), chosen)
    stream = [
        PlanItem(id=ids[i], judge=scores[i], pi=float(p), queued=bool(d < p))
        for i, p, d in zip(order, pi, draws, strict=True)
    ]
    return LabelPlan(
        report=report_key(report),
        rubric=rubric,
        target_halfwidth=h,
        confidence=level,
        seed=seed,
        rule="uncertainty" if measured else "uniform",
        rate=chosen,
        t_star=len(stream),
        stream=stream,
    )


def report_key(report: Report) -> str:
    """Which report a plan is for: its name and creation time."""
    return f"{report.config.get('name') or 'report'}:{report.created}"


def estimate_plan(plan: LabelPlan, labels: Mapping[str, Mapping[str, float]]) -> PlanEstimate:
    """The active PPI estimate and its confidence sequence after the plan's labels so far
    (``labels``: sample id -> rubric -> label, as ``load_labels`` reads them)."""
    steps, next_id, y = len(plan.stream), None, []
    for k, item in enumerate(plan.stream):
        value = labels.get(item.id, {}).get(plan.rubric)
        if item.queued and value is None:
            steps, next_id = k, item.id
            break
        y.append(float(value) if item.queued and value is not None else math.nan)
    queued = {item.id for item in plan.stream if item.queued}
    outside = sum(1 for sid, row in labels.items() if plan.rubric in row and sid not in queued)
    if not any(item.queued for item in plan.stream[:steps]):  # no estimate before a label
        return PlanEstimate(plan.rubric, 0, steps, None, None, None, None, False, next_id, outside)
    items = plan.stream[:steps]
    path = active_path(
        [i.judge for i in items],
        [i.pi for i in items],
        [float(i.queued) for i in items],
        y,
        1.0 - plan.confidence,
        plan.t_star,
    )
    used = int(path.labels[-1])
    low, high = float(path.low[-1]), float(path.high[-1])
    reached = used >= plan.min_labels and (high - low) / 2 <= plan.target_halfwidth
    return PlanEstimate(
        rubric=plan.rubric,
        labels=used,
        steps=steps,
        estimate=float(path.estimate[-1]),
        low=low,
        high=high,
        lam=float(path.lam[-1]),
        reached=reached,
        next_id=next_id,
        outside=outside,
    )


def page_plan(plan: LabelPlan) -> dict[str, object]:
    """What the review page needs to follow the plan and compute the same sequence."""
    return {
        "rubric": plan.rubric,
        "h": plan.target_halfwidth,
        "alpha": 1.0 - plan.confidence,
        "t_star": plan.t_star,
        "min_labels": plan.min_labels,
        "lam_warmup": plan.lam_warmup,
        "stream": [[i.id, i.judge, i.pi, int(i.queued)] for i in plan.stream],
    }
