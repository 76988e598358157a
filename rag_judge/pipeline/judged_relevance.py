"""``relevance_from: context_relevance``: a retrieval evaluator graded by the judge's
per-context verdicts where a sample carries no relevance judgments. It runs after the judge's
step and reads that step's judgments back from its spool, one per sample in order, so a
streamed run keeps one chunk in memory."""

from __future__ import annotations

from collections.abc import Iterator

from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.pipeline.collect import Step, read_detail
from rag_judge.report.model import Judgment, MetricKind

__all__ = ["reads_judgments", "with_judgments"]


def reads_judgments(evaluator: Evaluator) -> bool:
    """Whether ``evaluator`` needs another step's judgments (so runs after the others)."""
    return isinstance(evaluator, RetrievalEvaluator) and evaluator.relevance_from is not None


def with_judgments(evaluator: Evaluator, steps: list[Step]) -> Evaluator:
    """``evaluator`` as it should run: fed the judge step's judgments when it reads them."""
    if not isinstance(evaluator, RetrievalEvaluator) or evaluator.relevance_from is None:
        return evaluator
    rubric = evaluator.relevance_from
    step = next(
        (s for s in steps if rubric in s.columns and s.info[rubric].kind is MetricKind.JUDGE),
        None,
    )
    if step is None:  # the config check makes this unreachable from a config file
        raise ConfigError(f"relevance_from: {rubric!r} needs a judge evaluator scoring {rubric!r}")
    return evaluator.with_judge_grades(_judgments(step, rubric))


def _judgments(step: Step, rubric: str) -> Iterator[Judgment | None]:
    step.spool.flush()
    with step.spool.path.open("rb") as fh:
        for line in fh:
            yield read_detail(line)[1].get(rubric)
