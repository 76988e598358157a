"""The metamorphic judge audit: which judge metrics each check says something about, what a
sound judge does under it, and the rate at which the judge did otherwise.

A check transforms a sample (:mod:`rag_judge.analysis.metamorphic_transforms`) and names the
metrics it speaks to, each with an expectation: ``same`` (the score must not move), ``fall``,
``rise`` or ``no_rise``. Its rate is the share of the samples where the judge broke it, over
the samples judged both ways whose original score left room to show the expectation (a 1
cannot fall, a 5 cannot rise). "Original" is the untransformed sample judged again now (the
control), so both sides of a pair come from the same judge at the same time.

The rate's interval is Clopper-Pearson's (exact binomial): each sample is a 0/1 outcome, and
a percentile bootstrap of 0/1 outcomes collapses to [1, 1] when every one of a few samples
broke. A check is flagged when that interval's lower bound is above its threshold: a
one-sided binomial test that the rate exceeds it, valid at any n. The paired bootstrap
(resampling samples keeps each pair) gives the interval of the mean shift (transformed minus
original), which says how far the judge moved, not how often. The catalogue, with the default
thresholds, is in docs/judge-estimates.md ("Metamorphic audit").
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rag_judge.analysis.judge_change import judge_fields
from rag_judge.analysis.metamorphic_transforms import TRANSFORMS, Transform, swap_citations
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator
from rag_judge.evaluators.grounding.evaluator import GroundingEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.judge.rubrics import Rubric, resolve_rubrics
from rag_judge.report.types import Signature
from rag_judge.stats.bootstrap import bootstrap_ci

__all__ = [
    "CHECKS",
    "Aim",
    "CheckRate",
    "Control",
    "aims",
    "check_rate",
    "clopper_pearson",
    "control_rate",
    "for_check",
    "signature_changes",
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
    gave no value. ``ci_low``/``ci_high``: the rate's Clopper-Pearson interval (the flag's);
    ``shift``: the mean of transformed minus original over the n, with its paired bootstrap
    interval."""

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
    shift: float | None = None
    shift_low: float | None = None
    shift_high: float | None = None


@dataclass(frozen=True)
class Control:
    """The untransformed samples judged again against the report's stored scores: ``moved``
    of the ``n`` samples scored both times changed. A reproducible judge moves none."""

    metric: str
    n: int
    moved: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def reproducible(self) -> bool:
        return self.moved == 0


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
    broke: list[bool] = []
    shifts: list[float] = []
    not_applicable = unscored = 0
    for pair in pairs:
        if pair is None or pair[0] is None or not _room(aim, pair[0]):
            not_applicable += 1
        elif pair[1] is None:
            unscored += 1
        else:
            broke.append(_broke(aim, pair[0], pair[1]))
            shifts.append(pair[1] - pair[0])
    n, k = len(broke), sum(broke)
    low, high = clopper_pearson(k, n, confidence)
    moves = np.asarray(shifts, dtype=np.float64)
    s_low, s_high = bootstrap_ci(moves, resamples=resamples, confidence=confidence, seed=seed)
    return CheckRate(
        metric=aim.metric,
        check=check,
        expect=aim.expect,
        rate=k / n if n else None,
        ci_low=low,
        ci_high=high,
        n=n,
        not_applicable=not_applicable,
        unscored=unscored,
        threshold=threshold,
        flagged=low is not None and low > threshold,
        shift=float(moves.mean()) if n else None,
        shift_low=s_low,
        shift_high=s_high,
    )


def control_rate(
    metric: str, pairs: Sequence[tuple[float | None, float | None]], *, confidence: float = 0.95
) -> Control:
    """How often the re-judged untransformed samples moved from the stored scores, from each
    sample's (stored, re-judged) values; a sample unscored either time is left out."""
    both = [(a, b) for a, b in pairs if a is not None and b is not None]
    moved = sum(abs(b - a) > _EPS for a, b in both)
    low, high = clopper_pearson(moved, len(both), confidence)
    rate = moved / len(both) if both else None
    return Control(metric, len(both), moved, rate, low, high)


def clopper_pearson(
    k: int, n: int, confidence: float = 0.95
) -> tuple[float, float] | tuple[None, None]:
    """The exact (Clopper-Pearson) interval of a binomial rate with ``k`` of ``n``: its bounds
    are the rates at which seeing ``k`` or more (``k`` or fewer) has probability (1 -
    ``confidence``) / 2. It covers at least ``confidence`` at every n and rate."""
    if n == 0:
        return None, None
    alpha = (1.0 - confidence) / 2.0
    # the all-or-none bounds have closed forms; the others are found by bisection
    low = 0.0 if k == 0 else alpha ** (1.0 / n) if k == n else _solve(k - 1, n, 1.0 - alpha)
    high = 1.0 if k == n else 1.0 - alpha ** (1.0 / n) if k == 0 else _solve(k, n, alpha)
    return low, high


def _solve(k: int, n: int, target: float) -> float:
    """The rate p at which P(X <= k) = ``target`` for X ~ Binomial(n, p) (0 <= k < n); the
    CDF falls as p grows."""
    i = np.arange(k + 1, dtype=np.float64)
    # log C(n, i) for i = 0..k, as cumulative sums of logs (no overflow, no lgamma loop)
    log_comb = np.concatenate(([0.0], np.cumsum(np.log((n - i[:-1]) / (i[:-1] + 1)))))
    low, high = 0.0, 1.0
    for _ in range(100):  # each step halves the bracket: 2^-100 is past a float's bits
        p = 0.5 * (low + high)
        terms = log_comb + i * math.log(p) + (n - i) * math.log1p(-p)
        top = float(terms.max())
        cdf = math.exp(top) * float(np.exp(terms - top).sum())
        if cdf > target:
            low = p
        else:
            high = p
    return 0.5 * (low + high)


# The signature options a run rewrites to say what the server honoured (judge/used.py): a
# planned signature cannot know them, so the check before any call leaves them to the control.
_RUN_TIME = frozenset({"scoring", "n"})


def signature_changes(
    stored: Mapping[str, Signature],
    now: Mapping[str, Signature],
    metrics: Sequence[str],
    *,
    planned: bool = False,
) -> dict[str, list[tuple[str, str, str]]]:
    """Each of ``metrics`` whose re-judge signature (``now``) differs from the report's
    (``stored``) in a judge field, with the fields; a metric either side lacks is not compared.
    ``planned``: ``now`` is the signature before any call, and the run-time fields are left
    out."""
    out = {}
    for m in metrics:
        if m in stored and m in now:
            fields = judge_fields(stored[m], now[m])
            fields = [f for f in fields if not (planned and f[0] in _RUN_TIME)]
            if fields:
                out[m] = fields
    return out
