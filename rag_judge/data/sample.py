"""Samples, contexts and datasets: the validated models every reader produces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from rag_judge.data.context import (
    MODEL_CONFIG,
    Context,
    Flag,
    Number,
    Qrel,
    one_or_many,
    repeated_doc_id,
    texts_as_contexts,
    unset,
)
from rag_judge.data.conversation import Driven, ExpectedTools, RetrievalStep, Turn

__all__ = ["Context", "Dataset", "Qrel", "Sample", "duplicate_id"]

# What a field of a sample takes, in JSON's words, where its type does not say it all: for
# rag_judge.messages.input_problems, by field pattern.
SAMPLE_EXPECTED = {
    "id": "a non-empty string",
    "contexts": "a list of strings or of objects with keys id, text, score, relevance, "
    "doc_id, start, end",
    "contexts[]": "a string or an object with keys id, text, score, relevance, doc_id, start, end",
    "contexts[].id": "a doc id (a string or a number)",
    "contexts[].doc_id": "the id of the document the chunk was cut from",
    "contexts[].start": "a character offset into the document (an integer >= 0)",
    "contexts[].end": "a character offset into the document, past the chunk's last character",
    "contexts[].score": "a number (the retrieval score)",
    "contexts[].relevance": "a number (the context's relevance grade)",
    "references": "a string or a list of strings",
    "relevance": 'an object of doc id to grade, for every judged doc ({"d1": 2, "d7": 0})',
    "relevance.*": "a number (the doc's relevance grade)",
    "qrels": "a list of objects with keys doc_id, relevance and optionally start, end",
    "qrels[]": 'an object {"doc_id": "d1", "relevance": 2} or with "start" and "end" offsets',
    "qrels[].doc_id": "a document id (a string or a number)",
    "qrels[].relevance": "a number (the span's or document's relevance grade)",
    "qrels[].start": "a character offset into the document (an integer >= 0)",
    "qrels[].end": "a character offset into the document, past the span's last character",
    "answerable": "true or false (whether the question can be answered from the material)",
}
# A turn's fields take what the sample's of the same name take; a retrieval step's contexts
# take what the sample's contexts take.
_GOLD = ("references", "relevance", "qrels")
SAMPLE_EXPECTED.update(
    {
        f"turns[].{k}": v
        for k, v in SAMPLE_EXPECTED.items()
        if k.split("[")[0].split(".")[0] in _GOLD
    }
    | {f"turns[].steps[].{k}": v for k, v in SAMPLE_EXPECTED.items() if k.startswith("contexts")}
    | {
        "turns": "a list of objects with keys question, steps, answer, references, relevance, "
        "qrels, metadata",
        "turns[].steps": "a list of retrieval steps ({query, contexts}) and tool calls "
        "({tool, arguments, result}), in the order they happened",
        "turns[].steps[].arguments": "an object of argument name to value",
        "turns[].metadata": "an object",
        "expected_tools": "a list of objects with keys turn, calls, order",
        "expected_tools[].turn": "the index of a turn (an integer >= 0; 0 is the first turn)",
        "expected_tools[].calls": "a list of tool names or of objects with keys tool, arguments",
        "expected_tools[].calls[]": "a tool name or an object with keys tool, arguments",
        "expected_tools[].calls[].arguments": "an object of argument name to value",
        "goal": "a string (what the conversation should achieve)",
    }
)
# The fields of a single-turn sample that a conversation keeps in its turns instead.
_TURN_FIELDS = ("question", "contexts", "answer", "references", "relevance", "qrels")


class Sample(BaseModel):
    """One question with what the RAG system retrieved and answered, and the gold data.

    ``contexts`` are in rank order. ``relevance`` maps doc id -> grade for every judged document
    of the query, retrieved or not; ``None`` means the sample carries no judgments at all, while
    ``{}`` means it was judged and nothing is relevant. ``qrels`` label documents or character
    spans of them instead (``rag_judge.data.chunks`` maps them onto the chunks).

    A conversation (or an agent's several steps) holds ``turns`` instead
    (``rag_judge.data.conversation``); then the single-turn fields (question, contexts, answer,
    references, relevance, qrels) are absent, each turn holding its own, so nothing is said
    twice. ``expected_tools`` are the tool calls expected of a turn or of the whole
    conversation, ``goal`` what the conversation should achieve. A single-turn sample is the
    one-turn, one-step case of a conversation: :meth:`conversation_turns`.
    """

    model_config = MODEL_CONFIG

    id: str = Field(min_length=1)
    question: str | None = None
    contexts: tuple[Context, ...] = ()
    answer: str | None = None
    references: tuple[str, ...] = ()
    relevance: dict[str, Number] | None = None
    qrels: tuple[Qrel, ...] | None = Field(default=None, exclude_if=unset)
    answerable: Flag | None = None  # whether the material holds an answer (None: not said)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Left out of a dump when unset: a single-turn sample serializes as it always did.
    turns: tuple[Turn, ...] | None = Field(default=None, min_length=1, exclude_if=unset)
    expected_tools: tuple[ExpectedTools, ...] | None = Field(default=None, exclude_if=unset)
    goal: str | None = Field(default=None, exclude_if=unset)
    # A turn unit's earlier turns, for the judge to read (``history``, ``with_history``).
    # Private: set by data.units.turn_samples, never a dataset's key, never in a dump.
    _history: tuple[Turn, ...] = PrivateAttr(default=())
    # How a conversational target was driven through it (replay or simulated user): set by
    # rag_judge.data.dialogue, never read from a dataset's own columns.
    driven: Driven | None = Field(
        default=None, exclude_if=unset, json_schema_extra={"set_by_run": True}
    )

    @field_validator("contexts", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        return texts_as_contexts(value)

    @field_validator("references", mode="before")
    @classmethod
    def _single_reference(cls, value: Any) -> Any:
        return one_or_many(value)

    @model_validator(mode="after")
    def _unique_context_ids(self) -> Sample:
        doc = repeated_doc_id(self.contexts)
        if doc is not None:
            raise ValueError(f"doc id {doc!r} appears twice in the ranking of query {self.id!r}")
        return self

    @model_validator(mode="after")
    def _conversation_rules(self) -> Sample:
        if self.turns is None and self.expected_tools is None:
            return self  # a single-turn sample: nothing more to check
        if self.turns is not None:
            beside = [f for f in _TURN_FIELDS if getattr(self, f) not in (None, ())]
            if beside:
                raise ValueError(
                    f"{', '.join(repr(f) for f in beside)} beside 'turns': a conversation keeps "
                    f"each turn's {', '.join(_TURN_FIELDS)} in that turn"
                )
        count = self._turn_count()
        seen: set[int | None] = set()
        for i, expected in enumerate(self.expected_tools or ()):
            if expected.turn is not None and expected.turn >= count:
                raise ValueError(
                    f"expected_tools[{i}] is for turn {expected.turn}, past the last turn, "
                    f"turn {count - 1} (turns count from 0)"
                )
            key = self._turn_key(expected.turn)
            if key in seen:
                whose = "the whole conversation" if key is None else f"turn {key}"
                raise ValueError(f"expected_tools[{i}]: {whose} already has its expected tools")
            seen.add(key)
        return self

    def _turn_key(self, turn: int | None) -> int | None:
        # In a one-turn sample the whole conversation is turn 0.
        return 0 if turn is None and self._turn_count() == 1 else turn

    def _turn_count(self) -> int:
        return 1 if self.turns is None else len(self.turns)

    @property
    def history(self) -> tuple[Turn, ...]:
        """The turns before this one when the sample is a turn of a conversation
        (``rag_judge.data.units.turn_samples``); () for any other sample."""
        return self._history

    def with_history(self, turns: tuple[Turn, ...]) -> Sample:
        """A copy of the sample whose ``history`` is ``turns``."""
        copy = self.model_copy()
        copy._history = tuple(turns)
        return copy

    def is_conversation(self) -> bool:
        """Whether the sample holds ``turns`` (else it is a single-turn sample)."""
        return self.turns is not None

    def conversation_turns(self) -> tuple[Turn, ...]:
        """The sample's turns. A single-turn sample is one turn whose one retrieval step holds
        its contexts (the step's query is not recorded: None)."""
        if self.turns is not None:
            return self.turns
        step = RetrievalStep(contexts=self.contexts)
        turn = Turn(
            question=self.question,
            steps=(step,),
            answer=self.answer,
            references=self.references,
            relevance=self.relevance,
            qrels=self.qrels,
        )
        return (turn,)

    def expected_tools_for(self, turn: int | None) -> ExpectedTools | None:
        """The tool calls expected of turn ``turn`` (from 0), or with None of the whole
        conversation (in a one-turn sample, the same as turn 0); None when none are."""
        key = self._turn_key(turn)
        return next((e for e in self.expected_tools or () if self._turn_key(e.turn) == key), None)

    def has_judgments(self) -> bool:
        """Whether anything grades the sample's retrieval: ``qrels``, ``relevance`` or a
        context's own ``relevance``."""
        return self.qrels is not None or self.judged_grades() is not None

    def judged_grades(self) -> dict[str, float] | None:
        """All judgments of the query: ``relevance`` plus grades carried by the contexts.

        ``None`` when neither the sample nor any of its contexts carries a judgment.
        """
        own = {
            c.id: c.relevance for c in self.contexts if c.id is not None and c.relevance is not None
        }
        if self.relevance is None and not own and not self._unnamed_grades():
            return None
        # A context's own grade is the more specific judgment, so it wins over the table.
        return {**(self.relevance or {}), **own}

    def _unnamed_grades(self) -> list[float]:
        return [c.relevance for c in self.contexts if c.id is None and c.relevance is not None]

    def ranked_grades(self) -> list[float]:
        """The grade of each retrieved context in rank order; unjudged contexts get 0."""
        table = self.relevance or {}
        out = []
        for ctx in self.contexts:
            if ctx.relevance is not None:
                out.append(float(ctx.relevance))
            else:
                out.append(float(table.get(ctx.id, 0.0)) if ctx.id is not None else 0.0)
        return out

    def ideal_grades(self) -> list[float]:
        """Every judged grade of the query, including contexts without an id that carry one."""
        return list((self.judged_grades() or {}).values()) + self._unnamed_grades()


class Dataset(BaseModel):
    """An ordered collection of samples with unique ids."""

    model_config = ConfigDict(frozen=True)

    samples: tuple[Sample, ...]
    source: str | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> Dataset:
        dup = duplicate_id(s.id for s in self.samples)
        if dup is not None:
            raise ValueError(f"sample id {dup!r} appears twice")
        return self

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:  # type: ignore[override]
        return iter(self.samples)

    def __getitem__(self, index: int) -> Sample:
        return self.samples[index]


def duplicate_id(ids: Iterable[str]) -> str | None:
    """The first id that appears a second time, or None when all are unique."""
    seen: set[str] = set()
    for sid in ids:
        if sid in seen:
            return sid
        seen.add(sid)
    return None
