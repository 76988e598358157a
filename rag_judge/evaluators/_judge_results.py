"""From a judge's outcomes to an evaluator's result: each (sample, rubric[, context]) request
is a ``Job``; ``fill`` turns a chunk's outcomes into judgments, scores and failures (a
per-context rubric's judgment is the mean of its contexts' grades, or unscored naming the
contexts without one). Shared by the single judge and each juror of a jury."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rag_judge.evaluators._judge_used import NORM
from rag_judge.evaluators.base import EvaluatorResult
from rag_judge.judge.asking import Outcome
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.verdicts import Reading, Scoring, Unscored, schema_valid
from rag_judge.llm.base import CompletionRequest
from rag_judge.report.model import Failure, FailureKind, Judgment, Signature

__all__ = ["Job", "empty_result", "fail", "fill", "record", "skipped_inputs"]


@dataclass
class Job:
    index: int
    rubric: Rubric
    context: int | None
    context_id: str | None
    request: CompletionRequest


def fail(result: EvaluatorResult, index: int, rubric: Rubric, failure: Failure) -> None:
    result.fail(index, failure, metrics=[rubric.name, rubric.name + NORM])


def empty_result(n: int, signatures: dict[str, Signature]) -> EvaluatorResult:
    """A result for ``n`` samples with room for their judgments."""
    result = EvaluatorResult.empty(n, signatures)
    result.judgments = [{} for _ in range(n)]
    return result


def record(
    result: EvaluatorResult, index: int, rubric: Rubric, entry: Judgment, failure: Failure | None
) -> None:
    """A sample's judgment on ``rubric``: its 1-5 score and ``(s-1)/4`` twin, or, when it
    failed or has no score, ``failure`` (else "no score") on both."""
    result.judgments[index][rubric.name] = entry
    if failure is None and entry.score is not None:
        result.scores[rubric.name][index] = entry.score
        result.scores[rubric.name + NORM][index] = (entry.score - 1.0) / 4.0
    else:
        fail(result, index, rubric, failure or Failure(message="no score"))


def skipped_inputs(result: EvaluatorResult) -> int:
    """(sample, rubric) pairs left out for a missing input or a template that cannot render
    the sample (the failures recorded before any call; each rubric once, not its twin)."""
    return sum(1 for errs in result.errors for m in errs if not m.endswith(NORM))


def _judgment(outcome: Outcome[Reading], scoring: Scoring) -> Judgment:
    found = outcome.result
    seen: dict[str, Any] = {
        "raw": outcome.raw,
        "attempts": outcome.attempts,
        "cached": outcome.cached,
        **_server_facts(outcome, scoring),
    }
    if isinstance(found, Reading):
        return Judgment(score=found.value, reason=found.reason, **seen, **found.extra)
    if isinstance(found, Unscored):
        return Judgment(score=None, reason=found.reason, **seen)
    return Judgment(score=None, reason=f"judge call failed: {found}", **seen)


def _server_facts(outcome: Outcome[Reading], scoring: Scoring) -> dict[str, Any]:
    """What the server did with the last request, where a judgment records it (see the
    ``Judgment`` fields): None values are left out of report.json."""
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
        else bool(reply.choices) and all(schema_valid(text) for text in reply.choices),
        "label_mass": float(mass) if isinstance(mass, int | float) else None,
    }


def _failure(outcome: Outcome[Reading], where: str) -> Failure | None:
    found = outcome.result
    if isinstance(found, Unscored):
        return Failure(kind=FailureKind.UNSCORED, message=f"{where}{found.reason}")
    if not isinstance(found, Reading):
        return Failure(kind=FailureKind.ERROR, message=f"{where}{found}")
    return None


def fill(
    result: EvaluatorResult,
    jobs: list[Job],
    outcomes: list[Outcome[Reading]],
    scoring: Scoring,
) -> None:
    groups: dict[tuple[int, str], list[tuple[Job, Outcome[Reading]]]] = {}
    for job, outcome in zip(jobs, outcomes, strict=True):
        groups.setdefault((job.index, job.rubric.name), []).append((job, outcome))
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
        entry = _per_context(judged) if rubric.per_context else judged[0]
        record(result, i, rubric, entry, next((f for f in failures if f is not None), None))


def _per_context(judged: list[Judgment]) -> Judgment:
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
    return Judgment(
        score=score,
        reason=reason,
        attempts=sum(e.attempts for e in judged),
        cached=all(e.cached for e in judged),
        contexts=judged,
    )
