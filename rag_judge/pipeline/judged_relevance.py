"""An evaluator that reads another step's judgments (``relevance_from: context_relevance``: a
retrieval evaluator graded by the judge's per-context verdicts) runs after that step and is
fed its judgments from the step's spool, one per sample in order, so a streamed run keeps one
chunk in memory. What an evaluator reads it declares (``Evaluator.reads``)."""

from __future__ import annotations

from collections.abc import Iterator

from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import EvaluatorRun
from rag_judge.pipeline.collect import Step, read_detail
from rag_judge.report.model import Judgment, MetricKind

__all__ = ["feed_judgments"]


def feed_judgments(run: EvaluatorRun, steps: list[Step]) -> EvaluatorRun:
    """``run`` fed the judgments it reads from the judge steps among ``steps``."""
    wanted = run.evaluator.reads()
    if not wanted:
        return run
    found = {}
    for metric in wanted:
        step = next(
            (s for s in steps if metric in s.columns and s.info[metric].kind is MetricKind.JUDGE),
            None,
        )
        if step is None:  # the config check makes this unreachable from a config file
            raise ConfigError(f"{metric!r} is read from a judge evaluator: none scores it")
        found[metric] = _judgments(step, metric)
    run.take(found)
    return run


def _judgments(step: Step, rubric: str) -> Iterator[Judgment | None]:
    step.spool.flush()
    with step.spool.path.open("rb") as fh:
        for line in fh:
            yield read_detail(line)[1].get(rubric)
