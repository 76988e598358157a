"""Rubric judging, job by job: each (sample, rubric[, context]) request is a ``Job``; a chunk's
outcomes become one typed :class:`Verdict` per sample and rubric (a per-context rubric's is the
mean of its contexts' grades, or unscored naming the contexts without one). Shared by a single
judge and each juror of a jury; what a family does with verdicts is its own business."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rag_judge.data.sample import Sample
from rag_judge.judge.asking import Outcome
from rag_judge.judge.prompts import PromptError
from rag_judge.judge.reply_json import schema_valid
from rag_judge.judge.rubrics import Rubric, missing_input
from rag_judge.judge.verdicts import VERDICT_SCHEMA, JudgeVerdict, Scoring, Unscored
from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Judgment,
    PerContextJudgment,
    RubricJudgment,
)

__all__ = ["Job", "Verdict", "build_jobs", "verdicts"]


@dataclass
class Job:
    """One request: of sample ``index`` on ``rubric`` (and, per context, of one context)."""

    index: int
    rubric: Rubric
    context: int | None
    context_id: str | None
    request: CompletionRequest


@dataclass
class Verdict:
    """Sample ``index``'s judgment on ``rubric``, and its failure when it has no score (a
    missing input, a template that cannot render it, an unscored or failed call)."""

    index: int
    rubric: Rubric
    judgment: Judgment | None
    failure: Failure | None


def build_jobs(
    samples: Sequence[Sample],
    rubrics: Sequence[Rubric],
    render: Callable[[Rubric, Sample, int | None], tuple[ChatMessage, ...]],
    request: Callable[[tuple[ChatMessage, ...]], CompletionRequest],
) -> tuple[list[Job], list[Verdict]]:
    """One job per request of ``samples``; a sample that lacks an input, or that a template
    cannot render (``render`` raises PromptError), gets a failed verdict instead (no call)."""
    jobs: list[Job] = []
    failed: list[Verdict] = []
    for i, sample in enumerate(samples):
        for rubric in rubrics:
            problem = missing_input(rubric, sample)
            if problem:
                missing = Failure(kind=FailureKind.MISSING_INPUT, message=problem)
                failed.append(Verdict(i, rubric, None, missing))
                continue
            targets = range(len(sample.contexts)) if rubric.per_context else [None]
            built = []
            try:
                for ctx in targets:
                    messages = render(rubric, sample, ctx)
                    ctx_id = sample.contexts[ctx].id if ctx is not None else None
                    built.append(Job(i, rubric, ctx, ctx_id, request(messages)))
            except PromptError as exc:  # the template cannot render this sample
                failed.append(Verdict(i, rubric, None, Failure(message=str(exc))))
                continue
            jobs.extend(built)
    return jobs, failed


def verdicts(
    jobs: Sequence[Job], outcomes: Sequence[Outcome[JudgeVerdict]], scoring: Scoring
) -> list[Verdict]:
    """One verdict per sample and rubric that had jobs, in job order."""
    groups: dict[tuple[int, str], list[tuple[Job, Outcome[JudgeVerdict]]]] = {}
    for job, outcome in zip(jobs, outcomes, strict=True):
        groups.setdefault((job.index, job.rubric.name), []).append((job, outcome))
    out = []
    for (i, _), group in groups.items():
        rubric = group[0][0].rubric
        failures = []
        judged = []
        for job, outcome in group:
            entry = _judgment(outcome, scoring)
            if rubric.per_context:
                rank = (job.context or 0) + 1
                entry = entry.model_copy(update={"rank": rank, "id": job.context_id})
            judged.append(entry)
            failures.append(_failure(outcome, f"context {entry.rank}: " if entry.rank else ""))
        judgment: Judgment = _per_context(judged) if rubric.per_context else judged[0]
        failure = next((f for f in failures if f is not None), None)
        if failure is None and judgment.score is None:
            failure = Failure(message="no score")
        out.append(Verdict(i, rubric, judgment, failure))
    return out


def leaves(found: Iterable[Verdict]) -> list[RubricJudgment]:
    """Every rubric verdict among ``found`` (one judge's), a per-context rubric's contexts one
    by one."""
    out: list[RubricJudgment] = []
    for verdict in found:
        entry = verdict.judgment
        if isinstance(entry, PerContextJudgment):
            out.extend(entry.contexts)
        elif isinstance(entry, RubricJudgment):
            out.append(entry)
    return out


def _judgment(outcome: Outcome[JudgeVerdict], scoring: Scoring) -> RubricJudgment:
    found = outcome.result
    seen: dict[str, Any] = {
        "raw": outcome.raw,
        "attempts": outcome.attempts,
        "cached": outcome.cached,
        **_server_facts(outcome, scoring),
    }
    if isinstance(found, JudgeVerdict):
        return RubricJudgment(score=found.score, reason=found.reason, **seen, **found.details())
    if isinstance(found, Unscored):
        return RubricJudgment(score=None, reason=found.reason, **seen)
    return RubricJudgment(score=None, reason=f"judge call failed: {found}", **seen)


def _server_facts(outcome: Outcome[JudgeVerdict], scoring: Scoring) -> dict[str, Any]:
    """What the server did with the last request, where a judgment records it (see the
    ``RubricJudgment`` fields): None values are left out of report.json."""
    reply = outcome.reply
    if reply is None:
        return {}
    mass = reply.extra.get("label_mass")
    received = len(reply.choices)
    return {
        "choices_received": received if received < outcome.request.n else None,
        "finish_reason": reply.finish_reason if reply.finish_reason != "stop" else None,
        "structured_output": reply.structured_output,
        # A label-scoring client answers with a label, not JSON: nothing to check.
        "schema_valid": None
        if scoring == "distribution"
        else bool(reply.choices)
        and all(schema_valid(text, VERDICT_SCHEMA) for text in reply.choices),
        "label_mass": float(mass) if isinstance(mass, int | float) else None,
    }


def _failure(outcome: Outcome[JudgeVerdict], where: str) -> Failure | None:
    found = outcome.result
    if isinstance(found, Unscored):
        return Failure(kind=FailureKind.UNSCORED, message=f"{where}{found.reason}")
    if not isinstance(found, JudgeVerdict):
        return Failure(kind=FailureKind.ERROR, message=f"{where}{found}")
    return None


def _per_context(judged: list[RubricJudgment]) -> PerContextJudgment:
    """A per-context rubric's judgment: the mean of its contexts' grades when every context
    was graded; else unscored, naming the contexts without a grade and why."""
    scores = [e.score for e in judged if e.score is not None]
    missing = [e for e in judged if e.score is None]
    if missing:
        which = "; ".join(
            f"context {e.rank}{f' ({e.id})' if e.id else ''}: {e.reason}" for e in missing
        )
        score, reason = None, f"{len(missing)} of {len(judged)} contexts not graded: {which}"
    else:
        score, reason = math.fsum(scores) / len(scores), f"mean of {len(scores)} per-context grades"
    return PerContextJudgment(
        score=score,
        reason=reason,
        attempts=sum(e.attempts for e in judged),
        cached=all(e.cached for e in judged),
        contexts=judged,
    )
