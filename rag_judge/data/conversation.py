"""Conversations and agents: a sample's turns, the steps taken within each, and the tool calls
a sample expects.

A turn is a question, the steps taken to answer it in the order they happened, and the answer.
A step is a retrieval (``{"query", "contexts"}``: one ranking, in rank order) or a tool call
(``{"tool", "arguments", "result"}``). A step is told by its keys: ``tool`` makes a tool call,
``contexts`` or ``query`` a retrieval; ``"type": "retrieval"`` or ``"type": "tool"`` may say
so outright. A turn's gold data (``references``, ``relevance``, ``qrels``) is named as a
single-turn sample's is, and grades every retrieval step of that turn.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from rag_judge.data.context import (
    MODEL_CONFIG,
    Context,
    Number,
    Qrel,
    one_or_many,
    repeated_doc_id,
    texts_as_contexts,
    unset,
)

__all__ = [
    "ORDERS",
    "STOPS",
    "Driven",
    "ExpectedCall",
    "ExpectedTools",
    "Order",
    "RetrievalStep",
    "Step",
    "Stop",
    "ToolStep",
    "Turn",
]

# How a turn's tool calls are matched against the expected ones, in agentevals' words, with
# in_order (the expected calls appear in order, other calls between them allowed).
Order = Literal["strict", "in_order", "unordered", "subset", "superset"]
ORDERS: tuple[Order, ...] = ("strict", "in_order", "unordered", "subset", "superset")


class RetrievalStep(BaseModel):
    """One retrieval: the query sent to the retriever (None when not recorded) and the
    contexts it returned, in rank order."""

    model_config = MODEL_CONFIG

    type: Literal["retrieval"] = "retrieval"
    query: str | None = None
    contexts: tuple[Context, ...] = ()

    @field_validator("contexts", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        return texts_as_contexts(value)

    @model_validator(mode="after")
    def _unique_context_ids(self) -> RetrievalStep:
        doc = repeated_doc_id(self.contexts)
        if doc is not None:
            raise ValueError(f"doc id {doc!r} appears twice in the ranking of this step")
        return self


class ToolStep(BaseModel):
    """One tool call: the tool's name, the arguments it was called with, what it returned."""

    model_config = MODEL_CONFIG

    type: Literal["tool"] = "tool"
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None


def _step_kind(value: Any) -> str | None:
    """Which kind of step ``value`` is: its ``type`` when given, else by its keys."""
    if isinstance(value, dict):
        kind = value.get("type")
        if kind is not None:
            return kind if isinstance(kind, str) else None
        if "tool" in value:
            return "tool"
        if not value:  # a retrieval that recorded nothing, as a dump without defaults writes it
            return "retrieval"
        return "retrieval" if "contexts" in value or "query" in value else None
    return getattr(value, "type", None)


_STEP_SHAPES = (
    "expected a retrieval step (an object with keys query, contexts) or a tool call (an object "
    "with keys tool, arguments, result); a key 'type' of 'retrieval' or 'tool' may say which"
)
Step = Annotated[
    Annotated[RetrievalStep, Tag("retrieval")] | Annotated[ToolStep, Tag("tool")],
    Discriminator(_step_kind, custom_error_type="step_kind", custom_error_message=_STEP_SHAPES),
]


class Turn(BaseModel):
    """One exchange of a conversation: the user's question, the steps taken to answer it, the
    answer, and the turn's gold data (named as a single-turn sample's)."""

    model_config = MODEL_CONFIG

    question: str | None = None
    steps: tuple[Step, ...] = ()
    answer: str | None = None
    references: tuple[str, ...] = ()
    relevance: dict[str, Number] | None = None
    qrels: tuple[Qrel, ...] | None = Field(default=None, exclude_if=unset)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("references", mode="before")
    @classmethod
    def _single_reference(cls, value: Any) -> Any:
        return one_or_many(value)

    def retrieval_steps(self) -> tuple[RetrievalStep, ...]:
        """The turn's retrievals, in the order they happened."""
        return tuple(s for s in self.steps if isinstance(s, RetrievalStep))

    def tool_calls(self) -> tuple[ToolStep, ...]:
        """The turn's tool calls, in the order they happened."""
        return tuple(s for s in self.steps if isinstance(s, ToolStep))


class ExpectedCall(BaseModel):
    """A tool call a sample expects: the tool, and the arguments when they must match (None:
    any arguments)."""

    model_config = MODEL_CONFIG

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] | None = Field(default=None, exclude_if=unset)


class ExpectedTools(BaseModel):
    """The tool calls expected of one turn (``turn``, from 0) or, when ``turn`` is left out, of
    the whole conversation (all its tool calls in order; a single-turn sample's one turn), and
    how their order is matched."""

    model_config = MODEL_CONFIG

    turn: Annotated[int, Field(strict=True, ge=0)] | None = Field(default=None, exclude_if=unset)
    calls: tuple[ExpectedCall, ...]
    order: Order = "strict"

    @field_validator("calls", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        # A plain string is a tool's name, its arguments left free.
        if isinstance(value, list | tuple):
            return [{"tool": v} if isinstance(v, str) else v for v in value]
        return value


# Why a driven conversation ended (rag_judge.data.dialogue): the turn limit, the dataset's user
# turns ran out (replay), the simulated user said it was done, an answer matched the stop
# pattern, or a call failed.
Stop = Literal["max_turns", "dataset_end", "user_done", "stop_pattern", "error"]
STOPS: tuple[Stop, ...] = ("max_turns", "dataset_end", "user_done", "stop_pattern", "error")


class Driven(BaseModel):
    """How rag-judge drove a conversational target through this conversation: ``mode``
    (``replay`` or ``simulate``), the turns run, the turn limit, and why it stopped."""

    model_config = MODEL_CONFIG

    mode: Literal["replay", "simulate"]
    turns: Annotated[int, Field(ge=0)]
    max_turns: Annotated[int, Field(ge=1)]
    stopped: Stop
