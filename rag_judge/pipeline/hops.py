"""Which hop degraded: for each failing turn of a conversation, the first step whose retrieval
metric or tool call fell below its threshold.

A turn fails when one of its ``turn.X`` values misses its threshold. Its steps are then read
in the order they happened: a retrieval step misses when one of its ``step.X`` values does; a
tool call misses when it matches no call its turn expected. The rules are in
docs/conversations.md, "Which hop degraded".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_judge.data.conversation import ExpectedCall, ToolStep, Turn
from rag_judge.data.sample import Sample
from rag_judge.metrics.trajectory import canonical_json
from rag_judge.report.model import Degradation, Miss, UnitResult
from rag_judge.report.result import UNIT_PREFIXES
from rag_judge.report.thresholds import meets, parse_threshold

__all__ = ["Threshold", "degraded", "unit_thresholds"]


@dataclass(frozen=True)
class Threshold:
    """A per-unit metric's threshold: its operator and bound, and its text as configured."""

    op: str
    bound: float
    text: str

    def missed_by(self, value: float | None) -> bool:
        # A unit without a value (a failure, an unscored verdict) did not fall below anything:
        # its failure is in its row already.
        return value is not None and not meets(value, self.op, self.bound)


def unit_thresholds(
    thresholds: Mapping[str, str | float], gates: Mapping[str, str | float]
) -> dict[str, Threshold]:
    """The per-unit thresholds: ``thresholds``, and a gate on a ``turn.`` or ``step.`` metric
    where ``thresholds`` gives none (a gate's expression read per unit)."""
    given = {m: e for m, e in gates.items() if m.startswith(UNIT_PREFIXES)}
    given.update(thresholds)
    out = {}
    for metric, expr in given.items():
        op, bound = parse_threshold(expr, metric=metric)
        out[metric] = Threshold(op, bound, f"{op} {bound:g}")
    return out


def degraded(
    sample: Sample | None, units: Sequence[UnitResult], thresholds: Mapping[str, Threshold]
) -> list[Degradation]:
    """Each failing turn of ``sample``'s conversation, with the first step that fell below its
    threshold (``units`` are its per-turn and per-step rows)."""
    if not thresholds or not units:
        return []
    turns = sample.conversation_turns() if sample is not None else ()
    steps: dict[tuple[int, int], UnitResult] = {
        (u.turn, u.step): u for u in units if u.step is not None
    }
    out = []
    for row in units:
        if row.step is not None:
            continue
        misses = _misses(row, thresholds, "turn.")
        if not misses:
            continue
        found: tuple[int | None, list[Miss]] = (None, [])
        if row.turn < len(turns):
            found = _first_hop(row.turn, turns[row.turn], steps, thresholds, sample)
        out.append(Degradation(turn=row.turn, misses=misses, step=found[0], step_misses=found[1]))
    return out


def _misses(row: UnitResult, thresholds: Mapping[str, Threshold], prefix: str) -> list[Miss]:
    return [
        Miss(metric=metric, value=row.scores[metric], threshold=t.text)
        for metric, t in thresholds.items()
        if metric.startswith(prefix) and metric in row.scores
        if t.missed_by(row.scores[metric])
    ]


def _first_hop(
    t: int,
    turn: Turn,
    steps: Mapping[tuple[int, int], UnitResult],
    thresholds: Mapping[str, Threshold],
    sample: Sample | None,
) -> tuple[int | None, list[Miss]]:
    """The first step of turn ``t`` that missed, and how; (None, []) when none did."""
    expected = sample.expected_tools_for(t) if sample is not None else None
    for s, step in enumerate(turn.steps):
        if isinstance(step, ToolStep):
            if expected is not None and not any(_fits(step, c) for c in expected.calls):
                return s, [Miss(metric="tool_call", call=_shown(step))]
            continue
        row = steps.get((t, s))
        misses = _misses(row, thresholds, "step.") if row is not None else []
        if misses:
            return s, misses
    return None, []


def _fits(call: ToolStep, expected: ExpectedCall) -> bool:
    # An expected call that states no arguments takes any; stated ones compare as JSON.
    if call.tool != expected.tool:
        return False
    stated = expected.arguments
    return stated is None or canonical_json(call.arguments) == canonical_json(stated)


def _shown(call: ToolStep) -> str:
    return f"{call.tool}({canonical_json(call.arguments)})"
