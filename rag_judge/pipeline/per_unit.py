"""An evaluator scored per turn or per retrieval step (``per: turn | step``): each sample is
expanded into its units (``data.units``), the evaluator scores the units as it scores any
sample, and the report summarises the units' values under prefixed names (``step.ndcg@10``),
their intervals clustered by conversation.

The units' values live in the summary only: a report's sample holds one value per metric, and
a conversation has several steps. docs/conversations.md, "Levels", says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from rag_judge.data.rows import RowWriter
from rag_judge.data.sample import Sample
from rag_judge.data.units import step_samples, turn_samples, unit_of
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorRun, per_metric
from rag_judge.pipeline.collect import Step
from rag_judge.pipeline.running import stream
from rag_judge.report.model import MetricInfo, Signature

__all__ = ["UnitStep", "check_per_unit", "run_per_unit"]


@dataclass
class UnitStep:
    """One per-unit evaluator's output: its step over the units, and each unit's conversation
    (the cluster its bootstrap resamples)."""

    evaluator: Evaluator
    step: Step
    clusters: list[str] = field(default_factory=list)

    def name(self, metric: str) -> str:
        return per_metric(self.evaluator.per, metric)

    def signature(self, metric: str, **run: object) -> Signature:
        """The metric's signature under its reported name: ``per`` is an option (a step's
        NDCG is another number than a conversation's), the clustering describes the interval."""
        own = self.step.signatures[metric]
        options = {**own.options, "per": self.evaluator.per}
        return own.model_copy(update={"name": self.name(metric), "options": options}).with_run(
            **run, cluster="conversation"
        )


def check_per_unit(evaluator: Evaluator, index: int) -> None:
    """A per-unit evaluator may not read or restate another step's per-sample values: those
    are aligned with the samples, its values with the units."""
    if evaluator.per != "conversation" and (evaluator.reads() or evaluator.restated()):
        loc = ("evaluators", index)
        raise ConfigError(
            f"evaluators[{index}].per: {evaluator.type} reads or restates other evaluators' "
            f"values per sample, so it runs only per conversation (got per: {evaluator.per})",
            loc=loc,
        )


def unit_infos(evaluator: Evaluator, names: Iterable[str]) -> dict[str, MetricInfo]:
    """The metrics' infos under their reported names."""
    return {per_metric(evaluator.per, m): evaluator.metric_info(m) for m in names}


def run_per_unit(run: EvaluatorRun, chunks: Iterable[list[Sample]], spool: RowWriter) -> UnitStep:
    """``run`` over the units of every sample in ``chunks``, a chunk of samples at a time."""
    evaluator = run.evaluator
    expand = step_samples if evaluator.per == "step" else turn_samples
    out = UnitStep(
        evaluator, Step({m: evaluator.metric_info(m) for m in run.metric_names()}, spool)
    )

    def units() -> Iterator[list[Sample]]:
        for chunk in chunks:
            expanded = [u for sample in chunk for u in expand(sample)]
            out.clusters.extend(unit_of(u).conversation for u in expanded)
            yield expanded

    stream(run, units(), out.step)
    return out
