"""Judge rubrics over answered samples only: ``faithfulness_answered`` is ``faithfulness``
where the grounding evaluator found that the answer answers, and does not apply where it
abstains (a refusal is neither faithful nor unfaithful; averaging it in as a 5, or dropping it
without a trace, would both mislead). Built after every evaluator has run, from their
columns, as one more step of the run."""

from __future__ import annotations

from collections.abc import Sequence

from rag_judge.config import ExperimentConfig
from rag_judge.evaluators.base import Evaluator, EvaluatorResult, Restated
from rag_judge.pipeline.collect import Collected, Step
from rag_judge.report.model import Failure, FailureKind, MetricInfo, MetricKind, Restatement
from rag_judge.report.samples import Column

__all__ = ["add_conditioned", "conditioned_infos", "restated_rubrics"]


def _restating(evaluators: Sequence[Evaluator]) -> Restated | None:
    """What the first evaluator that restates others' metrics per sample restates
    (``restated``); one scored per turn or step restates nothing."""
    per_sample = (e for e in evaluators if e.per == "conversation")
    return next((r for e in per_sample if (r := e.restated()) is not None), None)


def restated_rubrics(evaluators: Sequence[Evaluator], restated: Restated) -> dict[str, Evaluator]:
    """Each metric ``restated`` names that a judge metric of these evaluators scores, with
    that evaluator."""
    out = {}
    for rubric in dict.fromkeys(restated.metrics):
        # A rubric scored per turn or step has no per-sample values to restate.
        per_sample = (e for e in evaluators if e.per == "conversation")
        scorer = next((e for e in per_sample if rubric in e.metric_names()), None)
        if scorer is not None and scorer.metric_info(rubric).kind is MetricKind.JUDGE:
            out[rubric] = scorer
    return out


def _info(info: MetricInfo, rubric: str, restated: Restated) -> MetricInfo:
    given = Restatement(metric=rubric, given=restated.given)
    return info.model_copy(update={"restates": given})


def conditioned_infos(evaluators: Sequence[Evaluator]) -> dict[str, MetricInfo]:
    """Known before the run: ``<rubric>_answered`` for each rubric a grounding evaluator
    names in ``conditioned`` that a judge metric of these evaluators scores."""
    restated = _restating(evaluators)
    if restated is None:
        return {}
    return {
        rubric + restated.suffix: _info(scorer.metric_info(rubric), rubric, restated)
        for rubric, scorer in restated_rubrics(evaluators, restated).items()
    }


def add_conditioned(cfg: ExperimentConfig, collected: Collected, chunk: int) -> list[str]:
    """Add a step with ``<rubric>_answered`` for every rubric a grounding evaluator names in
    ``conditioned`` that some judge step scored; returns the new metrics (none: no step)."""
    restated = _restating(cfg.evaluators)
    answered = _find(collected.steps, restated.gate) if restated is not None else None
    if restated is None or answered is None:
        return []
    wanted = []
    for rubric in restated_rubrics(
        cfg.evaluators, restated
    ):  # what metric_infos() said it would add
        step = _find(collected.steps, rubric)
        if step is not None:
            wanted.append((rubric, step))
    if not wanted:
        return []
    gate = answered.columns[restated.gate]
    lacking = answered.missing.get(restated.gate, set())
    suffix = restated.suffix
    out = collected.step({r + suffix: _info(s.info[r], r, restated) for r, s in wanted})
    signatures = {
        r + suffix: s.signatures[r].model_copy(
            update={
                "name": r + suffix,
                # the signature says so too: the number is not the rubric's over every sample
                "options": {**s.signatures[r].options, "given": restated.given},
            }
        )
        for r, s in wanted
    }
    for start in range(0, answered.n, chunk):
        result = EvaluatorResult.empty(min(start + chunk, answered.n) - start, signatures)
        for rubric, step in wanted:
            name = rubric + suffix
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
    stop = start + len(result.errors)  # the chunk's values read at once (columns in files)
    for j, (answered, value) in enumerate(
        zip(gate.window(start, stop), column.window(start, stop), strict=True)
    ):
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
