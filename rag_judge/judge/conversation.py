"""What the judge sees of a conversation: the turns as delimited sections, and the inputs of
the conversation rubrics (the turns, the goal, the assistant's role, the allowed topics).

Each turn is up to three sections, ``TURN n USER``, ``TURN n TOOL CALLS`` and ``TURN n
ASSISTANT`` (n from 1, as contexts are numbered in a prompt). A turn's text goes through
``rag_judge.llm.sections.section``, so it can never open or close a section. The rules are in
docs/conversations.md, "The judge in a conversation".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rag_judge.data.conversation import ToolStep, Turn
from rag_judge.data.sample import Sample
from rag_judge.llm.sections import neutralise, section

__all__ = [
    "CONVERSATION_INPUTS",
    "HISTORY",
    "HISTORY_INTRO",
    "ROLE_KEYS",
    "TOOL_RESULT_CHARS",
    "TOPIC_KEYS",
    "conversation_of",
    "conversation_sections",
    "conversation_variable",
    "missing_conversation_input",
    "role_of",
    "topics_of",
    "turn_records",
]

CONVERSATION_INPUTS: tuple[str, ...] = ("turns", "goal", "role", "topics")
# The metadata keys read for the role and the topics, first found wins. The second names are
# DeepEval's chatbot_role and ragas' reference_topics, which their layouts keep in metadata.
ROLE_KEYS = ("role", "chatbot_role")
TOPIC_KEYS = ("topics", "reference_topics")
# The template variable of the turns before a turn unit's own.
HISTORY = "history"
HISTORY_INTRO = (
    "The conversation before the turn you grade, oldest turn first. It is context for the "
    "material further below; do not grade it."
)
# A tool's result is shown up to this many characters: enough to see what it returned.
TOOL_RESULT_CHARS = 300


def conversation_of(sample: Sample) -> tuple[Turn, ...] | None:
    """The turns a conversation rubric judges: a conversation's own, or for a turn unit the
    turns before it and then its own question and answer. None for a single-turn sample."""
    if sample.turns is not None:
        return sample.turns
    if sample.history:
        return (*sample.history, Turn(question=sample.question, answer=sample.answer))
    return None


def role_of(sample: Sample) -> str | None:
    """The assistant's role, from the sample's metadata (``ROLE_KEYS``), or None."""
    for key in ROLE_KEYS:
        value = sample.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def topics_of(sample: Sample) -> tuple[str, ...]:
    """The allowed topics, from the sample's metadata (``TOPIC_KEYS``): a string is one topic,
    a list holds several; blank ones are dropped."""
    for key in TOPIC_KEYS:
        value = sample.metadata.get(key)
        found = (value,) if isinstance(value, str) else value
        if isinstance(found, list | tuple):
            topics = tuple(t for t in found if isinstance(t, str) and t.strip())
            if topics:
                return topics
    return ()


def missing_conversation_input(rubric: str, field: str, sample: Sample) -> str | None:
    """Why ``sample`` lacks the conversation input ``field`` of rubric ``rubric``, or None."""
    if field == "turns":
        turns = conversation_of(sample)
        if turns is None:
            return (
                f"field 'turns': rubric '{rubric}' judges a whole conversation; the sample has "
                "no turns"
            )
        if not any(t.answer is not None and t.answer.strip() for t in turns):
            return (
                f"field 'turns': rubric '{rubric}' judges the assistant's answers; no turn has one"
            )
    elif field == "goal" and (sample.goal is None or not sample.goal.strip()):
        return f"field 'goal': rubric '{rubric}' needs the conversation's goal; none given"
    elif field == "role" and role_of(sample) is None:
        return (
            f"field 'metadata.role': rubric '{rubric}' needs the assistant's role (metadata "
            "'role' or 'chatbot_role', a string); none given"
        )
    elif field == "topics" and not topics_of(sample):
        return (
            f"field 'metadata.topics': rubric '{rubric}' needs the allowed topics (metadata "
            "'topics' or 'reference_topics', a string or a list of strings); none given"
        )
    return None


def conversation_variable(field: str, sample: Sample) -> Any:
    """The template variable of conversation input ``field``, every string neutralised; None
    when the sample lacks it (the template then fails under StrictUndefined)."""
    if field == "turns":
        turns = conversation_of(sample)
        return None if turns is None else turn_records(turns)
    if field == "goal":
        return None if sample.goal is None else neutralise(sample.goal)
    if field == "role":
        role = role_of(sample)
        return None if role is None else neutralise(role)
    topics = topics_of(sample)
    return [neutralise(t) for t in topics] if topics else None


def turn_records(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Each turn's question, tool calls (one line each) and answer, neutralised."""
    return [
        {
            "question": None if t.question is None else neutralise(t.question),
            "tools": [neutralise(_call_line(c)) for c in t.tool_calls()],
            "answer": None if t.answer is None else neutralise(t.answer),
        }
        for t in turns
    ]


def _call_line(call: ToolStep) -> str:
    """``name({"arg": 1}) -> result``, the result cut at ``TOOL_RESULT_CHARS`` characters."""
    line = f"{call.tool}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"
    if call.result is None:
        return line
    result = call.result
    if not isinstance(result, str):
        result = json.dumps(result, ensure_ascii=False, sort_keys=True, default=str)
    if len(result) > TOOL_RESULT_CHARS:
        result = result[:TOOL_RESULT_CHARS] + "…"
    return f"{line} -> {result}"


def conversation_sections(turns: Sequence[Mapping[str, Any]]) -> str:
    """The turns (``turn_records``) as delimited sections, in order, a blank line between.

    A turn without a question or an answer leaves that section out; a turn without tool calls
    has no TOOL CALLS section.
    """
    parts = []
    for n, turn in enumerate(turns, start=1):
        if turn.get("question") is not None:
            parts.append(section(f"TURN {n} USER", turn["question"]))
        if turn.get("tools"):
            parts.append(section(f"TURN {n} TOOL CALLS", "\n".join(map(str, turn["tools"]))))
        if turn.get("answer") is not None:
            parts.append(section(f"TURN {n} ASSISTANT", turn["answer"]))
    return "\n\n".join(parts)
