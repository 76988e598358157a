"""A conversation as the units its metrics score: one plain single-turn sample per retrieval
step, or per turn.

The evaluators score a sample's top-level question, contexts, answer and gold. Expanding a
conversation into such samples lets every one of them score a step or a turn unchanged, so a
step's NDCG is trec_eval's on that step's ranking. The rules are in docs/conversations.md,
"Units: steps and turns".
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rag_judge.data.context import Context
from rag_judge.data.conversation import RetrievalStep, Turn
from rag_judge.data.sample import Sample

__all__ = ["UNIT_KEY", "Unit", "context_union", "step_samples", "turn_samples", "unit_of"]

# The metadata key under which a unit records where it came from.
UNIT_KEY = "unit"


class Unit(NamedTuple):
    """Where a unit came from: its conversation's id, the turn (from 0), and the step within
    that turn's steps (from 0, tool calls counted; None for a turn)."""

    conversation: str
    turn: int
    step: int | None


def step_samples(sample: Sample) -> list[Sample]:
    """One sample per retrieval step of a conversation, in the order the steps happened.

    A step's sample has the id ``<conversation id>#t<turn>.s<step>``. Turns and steps count
    from 0, as the data model counts them: the step index is the step's place among all the
    turn's steps, tool calls included. Its question is the step's query, or the turn's
    question when the query was not recorded. Its contexts are the step's ranking. It holds
    the turn's gold (references, relevance, qrels), so a retrieval metric reads the step's
    ranking exactly as it reads a single-turn sample's. It holds no answer: the answer
    belongs to the turn. Tool calls yield no sample.

    A single-turn sample is its own one step: it comes back unchanged, id and all.
    """
    if not sample.is_conversation():
        return [sample]
    out = []
    for t, turn in enumerate(sample.conversation_turns()):
        for s, step in enumerate(turn.steps):
            if isinstance(step, RetrievalStep):
                unit = Unit(sample.id, t, s)
                question = step.query if step.query is not None else turn.question
                out.append(_unit_sample(sample, turn, unit, question, step.contexts, None))
    return out


def turn_samples(sample: Sample) -> list[Sample]:
    """One sample per turn of a conversation, in order.

    A turn's sample has the id ``<conversation id>#t<turn>`` (turns count from 0). It holds
    the turn's question, answer and gold. Its contexts are the union of the turn's
    retrieval steps (:func:`context_union`). A turn without a retrieval has no contexts.
    Its ``history`` holds the turns before it, so a judge reads the conversation so far.

    A single-turn sample is its own one turn: it comes back unchanged, id and all.
    """
    if not sample.is_conversation():
        return [sample]
    return [
        _unit_sample(
            sample,
            turn,
            Unit(sample.id, t, None),
            turn.question,
            context_union(turn.retrieval_steps()),
            turn.answer,
            history=sample.conversation_turns()[:t],
        )
        for t, turn in enumerate(sample.conversation_turns())
    ]


def context_union(steps: tuple[RetrievalStep, ...]) -> tuple[Context, ...]:
    """The contexts of ``steps`` as one ranking, without duplicates.

    The steps are read in the order they happened, each in rank order. A context is known by
    its id, or by its text when it has no id. The first occurrence wins: a context takes the
    rank where it first appeared, with that occurrence's score and grade. Later duplicates
    are dropped. So steps ``[d1, d2]`` then ``[d3, d1, d4]`` give ``[d1, d2, d3, d4]``.
    """
    seen: set[tuple[str, str]] = set()
    out = []
    for step in steps:
        for ctx in step.contexts:
            # An id and a text live in separate key spaces: a text never equals an id.
            key = ("id", ctx.id) if ctx.id is not None else ("text", ctx.text)
            if key not in seen:
                seen.add(key)
                out.append(ctx)
    return tuple(out)


def unit_of(sample: Sample) -> Unit:
    """Where ``sample`` came from, as :func:`step_samples` or :func:`turn_samples` recorded it
    under ``metadata["unit"]``. A sample without that record is a single-turn sample: its
    own conversation, turn 0 (step None)."""
    record = sample.metadata.get(UNIT_KEY)
    if isinstance(record, dict) and set(record) == {"conversation", "turn", "step"}:
        conversation, turn, step = record["conversation"], record["turn"], record["step"]
        if (
            isinstance(conversation, str)
            and type(turn) is int
            and (step is None or type(step) is int)
        ):
            return Unit(conversation, turn, step)
    return Unit(sample.id, 0, None)


def _unit_sample(
    sample: Sample,
    turn: Turn,
    unit: Unit,
    question: str | None,
    contexts: tuple[Context, ...],
    answer: str | None,
    history: tuple[Turn, ...] = (),
) -> Sample:
    # The conversation's metadata, then the turn's (it is the more specific), then the unit's
    # record. The conversation-level fields (answerable, goal, expected_tools) stay behind:
    # they say nothing about one step or turn.
    metadata: dict[str, Any] = {**sample.metadata, **turn.metadata, UNIT_KEY: unit._asdict()}
    step = "" if unit.step is None else f".s{unit.step}"
    return Sample(
        id=f"{unit.conversation}#t{unit.turn}{step}",
        question=question,
        contexts=contexts,
        answer=answer,
        references=turn.references,
        relevance=turn.relevance,
        qrels=turn.qrels,
        metadata=metadata,
    ).with_history(history)
