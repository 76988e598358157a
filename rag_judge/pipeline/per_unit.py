"""An evaluator scored per turn or per retrieval step (``per: turn | step``): each sample is
expanded into its units (``data.units``), the evaluator scores the units as it scores any
sample, and the report summarises the units' values under prefixed names (``step.ndcg@10``),
their intervals clustered by conversation.

Each unit's values are also joined back to its conversation's result, one row per turn or
step (:func:`with_units`), with the hops where a failing turn degraded (``pipeline.hops``).
docs/conversations.md, "Levels", says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

from rag_judge.data.rows import RowWriter
from rag_judge.data.sample import Sample
from rag_judge.data.units import Unit, step_samples, turn_samples, unit_of
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorRun, per_metric
from rag_judge.pipeline.collect import Step, read_detail
from rag_judge.pipeline.conditioned import restated_rubrics
from rag_judge.pipeline.hops import Threshold, degraded
from rag_judge.pipeline.running import stream
from rag_judge.report.model import MetricInfo, SampleResult, Signature, UnitResult

__all__ = ["UnitStep", "check_per_unit", "run_per_unit", "with_units"]


@dataclass
class UnitStep:
    """One per-unit evaluator's output: its step over the units, and each unit's conversation
    (the cluster its bootstrap resamples)."""

    evaluator: Evaluator
    step: Step
    clusters: list[str] = field(default_factory=list)
    # per unit, in order: the sample it came from (its index), its id, and its place
    owners: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    places: list[Unit] = field(default_factory=list)
    samples: int = 0  # how many samples the units came from (one may have none)

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


def check_per_unit(evaluator: Evaluator, index: int, evaluators: Sequence[Evaluator]) -> None:
    """A per-unit evaluator may not read or restate another step's per-sample values: those
    are aligned with the samples, its values with the units. A restatement that names no
    metric of ``evaluators`` (a grounding evaluator's default ``conditioned`` without a
    judge) restates nothing, so it does not count."""
    restated = evaluator.restated()
    restates = restated is not None and bool(restated_rubrics(evaluators, restated))
    if evaluator.per != "conversation" and (evaluator.reads() or restates):
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
    infos = {m: evaluator.metric_info(m) for m in run.metric_names()}
    out = UnitStep(evaluator, Step(infos, spool, spill=spool.path.parent))

    def units() -> Iterator[list[Sample]]:
        owner = 0
        for chunk in chunks:
            expanded = []
            for sample in chunk:
                for u in expand(sample):
                    place = unit_of(u)
                    if evaluator.per == "step" and place.step is None:
                        place = place._replace(step=0)  # a single-turn sample is its one step
                    out.clusters.append(place.conversation)
                    out.owners.append(owner)
                    out.ids.append(u.id)
                    out.places.append(place)
                    expanded.append(u)
                owner += 1
            out.samples = owner
            yield expanded

    stream(run, units(), out.step)
    return out


def with_units(
    results: Iterator[SampleResult],
    units: Sequence[UnitStep],
    thresholds: Mapping[str, Threshold],
) -> Iterator[SampleResult]:
    """Each of ``results`` with its units' rows (one per turn, then its steps, merged over the
    per-unit evaluators in config order) and the hops where a failing turn degraded."""
    if not units:
        yield from results
        return
    with ExitStack() as stack:
        spools = []
        for u in units:
            u.step.spool.close()
            spools.append(stack.enter_context(u.step.spool.path.open("rb")))
        at = [0] * len(units)
        for i, result in enumerate(results):
            rows: dict[tuple[int, int | None], UnitResult] = {}
            for k, u in enumerate(units):
                while at[k] < len(u.owners) and u.owners[at[k]] == i:
                    _fill(rows, u, at[k], spools[k].readline())
                    at[k] += 1
            result.units = sorted(rows.values(), key=_place)
            result.degraded = degraded(result.sample, result.units, thresholds)
            yield result


def _place(row: UnitResult) -> tuple[int, int]:
    return row.turn, -1 if row.step is None else row.step  # a turn's row before its steps'


def _fill(rows: dict[tuple[int, int | None], UnitResult], u: UnitStep, j: int, line: bytes) -> None:
    """Unit ``j`` of ``u`` written into its row (made on first sight)."""
    place = u.places[j]
    row = rows.get((place.turn, place.step))
    if row is None:
        row = rows[place.turn, place.step] = UnitResult(
            id=u.ids[j], turn=place.turn, step=place.step
        )
    for metric, column in u.step.columns.items():
        row.scores[u.name(metric)] = column.get(j)
    failed, judged = read_detail(line)
    row.errors.update({u.name(m): f for m, f in failed.items()})
    row.judgments.update({u.name(m): v for m, v in judged.items()})
