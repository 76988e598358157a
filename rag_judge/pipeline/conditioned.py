"""Judge rubrics over answered samples only: ``faithfulness_answered`` is ``faithfulness``
where the grounding evaluator found that the answer answers, and does not apply where it
abstains (a refusal is neither faithful nor unfaithful; averaging it in as a 5, or dropping it
without a trace, would both mislead). Built after every evaluator has run, from their
columns, as one more step of the run."""

from __future__ import annotations

from collections.abc import Sequence

from rag_judge.config import ExperimentConfig
from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.evaluators.grounding import GroundingEvaluator
from rag_judge.pipeline.collect import Collected, Step
from rag_judge.report.model import Failure, FailureKind, MetricKind
from rag_judge.report.samples import Column

__all__ = ["ANSWERED", "add_conditioned", "conditioned_rubrics"]

ANSWERED = "_answered"


def conditioned_rubrics(evaluators: Sequence[Evaluator]) -> dict[str, Evaluator]:
    """Known before the run: each rubric a grounding evaluator names in ``conditioned`` that
    a judge metric of these evaluators scores, with that evaluator; ``add_conditioned`` adds
    ``<rubric>_answered`` for each (none without a grounding evaluator's ``answer_rate``)."""
    if not any("answer_rate" in e.metric_names() for e in evaluators):
        return {}
    rubrics = [m for e in evaluators if isinstance(e, GroundingEvaluator) for m in e.conditioned]
    out = {}
    for rubric in dict.fromkeys(rubrics):
        scorer = next((e for e in evaluators if rubric in e.metric_names()), None)
        if scorer is not None and scorer.metric_info(rubric).kind is MetricKind.JUDGE:
            out[rubric] = scorer
    return out


def add_conditioned(cfg: ExperimentConfig, collected: Collected, chunk: int) -> list[str]:
    """Add a step with ``<rubric>_answered`` for every rubric a grounding evaluator names in
    ``conditioned`` that some judge step scored; returns the new metrics (none: no step)."""
    answered = _find(collected.steps, "answer_rate")
    if answered is None:
        return []
    wanted = []
    for rubric in conditioned_rubrics(cfg.evaluators):  # what metric_infos() said it would add
        step = _find(collected.steps, rubric)
        if step is not None:
            wanted.append((rubric, step))
    if not wanted:
        return []
    gate = answered.columns["answer_rate"]
    lacking = answered.missing.get("answer_rate", set())
    out = collected.step({r + ANSWERED: s.info[r] for r, s in wanted})
    signatures = {
        r + ANSWERED: s.signatures[r].model_copy(
            update={
                "name": r + ANSWERED,
                "options": {**s.signatures[r].options, "given": "answered"},
            }
        )
        for r, s in wanted
    }
    for start in range(0, answered.n, chunk):
        result = EvaluatorResult.empty(min(start + chunk, answered.n) - start, signatures)
        for rubric, step in wanted:
            name = rubric + ANSWERED
            column = step.columns[rubric]
            result.scores[name] = _values(result, name, rubric, column, gate, start, lacking)
        out.add(result)
    return list(out.columns)


def _find(steps: list[Step], metric: str) -> Step | None:
    return next((s for s in steps if metric in s.columns), None)


def _values(
    result: EvaluatorResult,
    name: str,
    rubric: str,
    column: Column,
    gate: Column,
    start: int,
    lacking: set[int],
) -> list[float | None]:
    """``lacking``: the samples the grounding evaluator had no input for (a missing or empty
    answer: a missing input here too, as for the rubric itself, not a failed call)."""
    values: list[float | None] = []
    for j in range(len(result.errors)):
        answered, value = gate.get(start + j), column.get(start + j)
        if answered is None and start + j in lacking:
            why = Failure(
                kind=FailureKind.MISSING_INPUT,
                message="no abstention verdict: the sample has no answer to ground",
            )
        elif answered is None:
            why = Failure(message="no abstention verdict: the grounding evaluator failed here")
        elif answered == 0.0:
            why = Failure(kind=FailureKind.NOT_APPLICABLE, message="the answer abstains")
        elif value is None:
            why = Failure(message=f"{rubric} has no score for this sample")
        else:
            why = None
        values.append(None if why else value)
        if why:
            result.errors[j][name] = why
    return values
