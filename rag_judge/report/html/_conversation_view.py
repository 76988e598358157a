"""A conversation as report.html draws it: its turns in order, each with its question, steps
(a retrieval's ranked contexts with their gold grades; a tool call's name, arguments and
result) and answer, the values its turn and each step scored, and where it degraded.

A single-turn sample scored per turn or per step shows only its units' values and where it
degraded: its question, contexts and answer are drawn by the sample's own view.

Plain values computed from a sample's result; the template (``_templates.py``) escapes every
string it draws.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rag_judge.data.conversation import ExpectedTools, RetrievalStep, ToolStep, Turn
from rag_judge.data.sample import Context
from rag_judge.report.levels import miss_text
from rag_judge.report.model import Degradation, Failure, Judgment, Miss, SampleResult, UnitResult

__all__ = [
    "ConversationView",
    "StepView",
    "TurnView",
    "UnitScore",
    "conversation_view",
]

_JSON_LIMIT = 2_000  # characters of a tool call's arguments or result shown


@dataclass(frozen=True)
class UnitScore:
    """One value a unit scored: ``failure`` where it has none, ``miss`` the threshold it fell
    short of where the report names it (a degraded turn, the step named)."""

    metric: str
    value: float | None
    failure: Failure | None = None
    miss: str = ""

    @property
    def css(self) -> str:
        if self.miss:
            return "miss"
        if self.failure is not None:
            return "bad" if self.failure.counts else "na"
        return ""

    @property
    def state(self) -> str:
        """What stands for a missing value: ``error``, ``n/a`` or a missing input's word."""
        if self.failure is None:
            return ""
        return "n/a" if not self.failure.counts else self.failure.kind.value.replace("_", " ")


@dataclass(frozen=True)
class StepView:
    """One step of a turn: ``index`` its place among the turn's steps (tool calls included)."""

    index: int
    kind: Literal["retrieval", "tool"]
    query: str | None = None
    contexts: list[tuple[Context, float | None]] = field(default_factory=list)
    tool: str = ""
    arguments: str = ""
    result: str | None = None
    scores: list[UnitScore] = field(default_factory=list)
    hop: bool = False  # the first step of a degraded turn that fell below its threshold
    misses: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TurnView:
    """One turn: its texts, steps, expected tool calls, values, judgments and how it
    degraded (``degraded`` None: it did not)."""

    index: int
    question: str | None
    answer: str | None
    references: Sequence[str]
    steps: list[StepView]
    expected: list[str]
    scores: list[UnitScore]
    judgments: list[tuple[str, Judgment]]
    not_retrieved: list[tuple[str, float]]
    degraded: Degradation | None
    misses: list[str]
    hop: str  # where it degraded, in words: "step 0 (retrieval)"; "" when none was named


@dataclass(frozen=True)
class ConversationView:
    """A sample's turns for the page; ``single`` for a single-turn sample, whose texts the
    sample's own view draws."""

    turns: list[TurnView]
    single: bool
    goal: str | None = None

    @property
    def degraded(self) -> list[int]:
        return [t.index for t in self.turns if t.degraded is not None]


def conversation_view(r: SampleResult, hidden: Collection[str] = ()) -> ConversationView | None:
    """``r``'s conversation for the page, or None for a single-turn sample without units.
    ``hidden`` are the metrics the page does not show (a judge's normalised twins)."""
    s = r.sample
    conversation = s is not None and s.is_conversation()
    if not conversation and not r.units:
        return None
    turns = s.conversation_turns() if s is not None else ()
    rows = {(u.turn, u.step): u for u in r.units}
    failing = {d.turn: d for d in r.degraded}
    count = max([len(turns), *(u.turn + 1 for u in r.units)])
    views = []
    for t in range(count):
        turn = turns[t] if t < len(turns) else Turn()
        expected = s.expected_tools_for(t) if s is not None and conversation else None
        views.append(_turn(t, turn, rows, failing.get(t), expected, hidden))
    return ConversationView(views, single=not conversation, goal=s.goal if s else None)


def _turn(
    t: int,
    turn: Turn,
    rows: Mapping[tuple[int, int | None], UnitResult],
    degraded: Degradation | None,
    expected: ExpectedTools | None,
    hidden: Collection[str],
) -> TurnView:
    hop = degraded.step if degraded is not None else None
    step_misses = degraded.step_misses if degraded is not None else []
    grades = turn.relevance or {}
    steps = [
        _step(i, step, grades, rows.get((t, i)), step_misses if i == hop else None, hidden)
        for i, step in enumerate(turn.steps)
    ]
    # A step's row without the step: a report.json written without its samples.
    for (rt, ri), unit in rows.items():
        if rt == t and ri is not None and ri >= len(turn.steps):
            named = step_misses if ri == hop else None
            steps.append(_step(ri, RetrievalStep(), grades, unit, named, hidden))
    steps.sort(key=lambda v: v.index)
    row = rows.get((t, None))
    misses = degraded.misses if degraded is not None else []
    where = ""
    if hop is not None:
        kind = next((v.kind for v in steps if v.index == hop), "step")
        where = f"step {hop} ({'tool call' if kind == 'tool' else kind})"
    return TurnView(
        index=t,
        question=turn.question,
        answer=turn.answer,
        references=turn.references,
        steps=steps,
        expected=[_expected_call(c.tool, c.arguments) for c in expected.calls] if expected else [],
        scores=_scores(row, misses, hidden),
        judgments=[(m, j) for m, j in row.judgments.items() if m not in hidden] if row else [],
        not_retrieved=_not_retrieved(turn),
        degraded=degraded,
        misses=[miss_text(m) for m in misses],
        hop=where,
    )


def _step(
    i: int,
    step: RetrievalStep | ToolStep,
    grades: Mapping[str, float],
    row: UnitResult | None,
    misses: Sequence[Miss] | None,
    hidden: Collection[str],
) -> StepView:
    found = list(misses or [])
    common: dict[str, Any] = {
        "index": i,
        "scores": _scores(row, found, hidden),
        "hop": misses is not None,
        "misses": [miss_text(m) for m in found],
    }
    if isinstance(step, ToolStep):
        result = None if step.result is None else _json(step.result)
        return StepView(
            kind="tool", tool=step.tool, arguments=_json(step.arguments), result=result, **common
        )
    # each context's own grade, else the turn's relevance table's for its id (None: unjudged)
    contexts = [
        (c, c.relevance if c.relevance is not None or c.id is None else grades.get(c.id))
        for c in step.contexts
    ]
    return StepView(kind="retrieval", query=step.query, contexts=contexts, **common)


def _scores(
    row: UnitResult | None, misses: Sequence[Miss], hidden: Collection[str]
) -> list[UnitScore]:
    if row is None:
        return []
    missed = {m.metric: miss_text(m) for m in misses}
    names = [m for m in dict.fromkeys([*row.scores, *row.errors]) if m not in hidden]
    return [UnitScore(m, row.scores.get(m), row.errors.get(m), missed.get(m, "")) for m in names]


def _not_retrieved(turn: Turn) -> list[tuple[str, float]]:
    """The turn's judged-relevant documents that none of its steps retrieved, highest first."""
    seen = {c.id for s in turn.retrieval_steps() for c in s.contexts if c.id is not None}
    missed = [(d, g) for d, g in (turn.relevance or {}).items() if g > 0 and d not in seen]
    return sorted(missed, key=lambda p: -p[1])


def _expected_call(tool: str, arguments: Mapping[str, Any] | None) -> str:
    return f"{tool}(any arguments)" if arguments is None else f"{tool}({_json(arguments)})"


def _json(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= _JSON_LIMIT:
        return text
    return f"{text[:_JSON_LIMIT]}… (truncated, {len(text):,} characters)"
