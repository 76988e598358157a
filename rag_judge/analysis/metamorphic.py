"""The metamorphic judge audit: which judge metrics each check says something about, what a
sound judge does under it, and the rate at which the judge did otherwise.

A check transforms a sample (:mod:`rag_judge.analysis.metamorphic_transforms`) and names the
metrics it speaks to, each with an expectation: ``same`` (the score must not move), ``fall``,
``rise`` or ``no_rise``. Its rate is the share of the samples where the judge broke it, over
the samples judged both ways whose original score left room to show the expectation (a 1
cannot fall, a 5 cannot rise). The interval is a percentile bootstrap of that share over the
samples: each sample is a pair (original, transformed), so resampling samples keeps the pairs
(a paired bootstrap). A check is flagged when the interval's lower bound is above its
threshold: then the defect is shown at the interval's confidence, not a one-off flip. The
catalogue, with the default thresholds, is in docs/judge-estimates.md ("Metamorphic audit").
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rag_judge.analysis.metamorphic_transforms import TRANSFORMS, Transform, swap_citations
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator
from rag_judge.evaluators.grounding.evaluator import GroundingEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.judge.rubrics import Rubric, resolve_rubrics
from rag_judge.stats.bootstrap import bootstrap_ci

__all__ = [
    "CHECKS",
    "Aim",
    "CheckRate",
    "aims",
    "check_rate",
    "for_check",
    "transformed",
]

Expect = Literal["same", "fall", "rise", "no_rise"]

# Default thresholds: the rate above which a check's interval flags the judge. The checks
# whose answer is unambiguous (order, an injected instruction) allow little; those where a
# sound judge may miss a case (a removed chunk that another chunk restates) allow more.
CHECKS: dict[str, float] = {
    "shuffle": 0.10,
    "distractor": 0.10,
    "padding": 0.10,
    "remove_support": 0.20,
    "injection": 0.05,
    "citation_swap": 0.20,
    "number_change": 0.20,
}
_EPS = 1e-9


@dataclass(frozen=True)
class Aim:
    """One metric a check speaks to: what a sound judge does and the metric's scale."""

    metric: str
    expect: Expect
    low: float
    high: float


@dataclass(frozen=True)
class CheckRate:
    """The outcome of one check on one metric. ``n``: samples judged both ways with room to
    show the expectation; ``not_applicable``: audited samples the transform could not apply
    to, or whose original score left no room; ``unscored``: transformed samples the judge
    gave no value."""

    metric: str
    check: str
    expect: Expect
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    not_applicable: int
    unscored: int
    threshold: float
    flagged: bool


def _rubrics(evaluator: JudgeEvaluator) -> list[Rubric]:
    return resolve_rubrics(evaluator.rubrics)


def aims(check: str, evaluators: Sequence[Evaluator]) -> list[Aim]:
    """The metrics of ``evaluators`` that ``check`` speaks to (see the module's rules)."""
    out: list[Aim] = []
    for ev in evaluators:
        if isinstance(ev, JudgeEvaluator):
            out += [
                Aim(r.name, expect, 1.0, 5.0)
                for r in _rubrics(ev)
                if (expect := _rubric_expect(check, set(r.inputs))) is not None
            ]
        elif isinstance(ev, GroundingEvaluator):
            if check == "citation_swap" and ev.citations is not None:
                out.append(Aim("citation_precision", "fall", 0.0, 1.0))
            elif check == "number_change":
                out.append(Aim("claim_contradiction", "rise", 0.0, 1.0))
    return out


def _rubric_expect(check: str, inputs: set[str]) -> Expect | None:
    """What a rubric that sees ``inputs`` should do under ``check``. A rubric judging the
    answer against the contexts ("grounded": faithfulness) must fall when its support goes
    or a number turns false; one judging against contexts or references keeps its score
    under an added true sentence; any rubric that sees the contexts keeps it when they are
    reordered and never rises for an instruction planted in them. A distractor leaves only
    the grounded ones alone: it rightly lowers a rubric about the contexts themselves."""
    sees = "contexts" in inputs
    grounded = sees and "answer" in inputs
    if check in ("shuffle", "injection") and sees:
        return "same" if check == "shuffle" else "no_rise"
    if check == "distractor" and grounded:
        return "same"
    if check == "padding" and "answer" in inputs and (sees or "references" in inputs):
        return "same"
    if check in ("remove_support", "number_change") and grounded:
        return "fall"
    return None


def for_check(evaluators: Sequence[Evaluator], wanted: Sequence[Aim]) -> list[Evaluator]:
    """The evaluators that produce a metric of ``wanted``, a judge's rubrics cut to those: a
    check asks no more than it reads. A grounding step's conditioned rubrics are dropped (no
    judge rubric runs beside it here)."""
    names = {a.metric for a in wanted}
    out: list[Evaluator] = []
    for ev in evaluators:
        if isinstance(ev, JudgeEvaluator):
            kept = tuple(r for r in _rubrics(ev) if r.name in names)
            if kept:
                out.append(ev.model_copy(update={"rubrics": kept}))
        elif isinstance(ev, GroundingEvaluator) and names & {
            "citation_precision",
            "claim_contradiction",
        }:
            out.append(ev.model_copy(update={"conditioned": ()}))
    return out


def _transform(check: str, evaluators: Sequence[Evaluator]) -> Transform:
    if check not in TRANSFORMS:
        raise ConfigError(f"unknown check {check!r}; the checks are: {', '.join(CHECKS)}")
    if check == "citation_swap":  # the markers as the grounding step reads them
        for ev in evaluators:
            if isinstance(ev, GroundingEvaluator) and ev.citations is not None:
                return functools.partial(swap_citations, pattern=ev.citations.pattern)
    return TRANSFORMS[check]


def transformed(
    check: str, samples: Sequence[Sample], evaluators: Sequence[Evaluator], seed: int
) -> list[Sample | None]:
    """Each sample under ``check`` (None where it cannot apply), each drawn from a generator
    seeded by the seed, the check and the sample's id: a sample's transform does not depend on
    which other samples are audited, except a distractor's chunk, drawn from them."""
    transform = _transform(check, evaluators)
    return [transform(s, samples, random.Random(f"{seed}:{check}:{s.id}")) for s in samples]


def _broke(aim: Aim, before: float, after: float) -> bool:
    if aim.expect == "same":
        return abs(after - before) > _EPS
    if aim.expect == "fall":
        return after >= before - _EPS
    if aim.expect == "rise":
        return after <= before + _EPS
    return after > before + _EPS  # no_rise


def _room(aim: Aim, before: float) -> bool:
    """Whether ``before`` leaves room to show the expectation (a 1 cannot fall)."""
    if aim.expect == "fall":
        return before > aim.low + _EPS
    if aim.expect in ("rise", "no_rise"):
        return before < aim.high - _EPS
    return True


def check_rate(
    check: str,
    aim: Aim,
    pairs: Sequence[tuple[float | None, float | None] | None],
    *,
    threshold: float,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> CheckRate:
    """The rate of ``check`` on ``aim`` from each audited sample's (original, transformed)
    values (None: the transform did not apply)."""
    broke: list[float] = []
    not_applicable = unscored = 0
    for pair in pairs:
        if pair is None or pair[0] is None or not _room(aim, pair[0]):
            not_applicable += 1
        elif pair[1] is None:
            unscored += 1
        else:
            broke.append(float(_broke(aim, pair[0], pair[1])))
    values = np.asarray(broke, dtype=np.float64)
    rate = float(values.mean()) if len(values) else None
    low, high = bootstrap_ci(values, resamples=resamples, confidence=confidence, seed=seed)
    return CheckRate(
        metric=aim.metric,
        check=check,
        expect=aim.expect,
        rate=rate,
        ci_low=low,
        ci_high=high,
        n=len(values),
        not_applicable=not_applicable,
        unscored=unscored,
        threshold=threshold,
        flagged=low is not None and low > threshold,
    )
