"""One sample's result: its scores, failures and judgments, and, for a conversation scored per
turn or per step, each unit's row and the hops where a failing turn degraded."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    field_validator,
)

from rag_judge.data.sample import Sample
from rag_judge.report.judgments import Judgment, grounding_by_key
from rag_judge.report.types import Failure, FailureKind

__all__ = [
    "LEVELS",
    "UNIT_PREFIXES",
    "Degradation",
    "Level",
    "Miss",
    "SampleResult",
    "UnitResult",
    "level_of",
]

# The prefixes of the metrics scored per unit (``turn.faithfulness``, ``step.ndcg@10``).
UNIT_PREFIXES = ("turn.", "step.")


# What one value of a reported metric scores.
Level = Literal["conversation", "turn", "step"]
LEVELS: tuple[Level, ...] = ("conversation", "turn", "step")


def level_of(metric: str) -> Level:
    """The level a reported metric scores: ``turn``, ``step`` or ``conversation``."""
    if metric.startswith("turn."):
        return "turn"
    return "step" if metric.startswith("step.") else "conversation"


class _Scored(BaseModel):
    """Scores, failures and judgments by metric, as a sample and a unit hold them."""

    id: str
    scores: dict[str, float | None] = Field(default_factory=dict)
    errors: dict[str, Failure] = Field(default_factory=dict)
    judgments: dict[str, Judgment] = Field(default_factory=dict)

    @field_validator("errors", mode="before")
    @classmethod
    def _legacy_errors(cls, value: Any) -> Any:
        # report.json written before failures were typed holds plain strings.
        if isinstance(value, dict):
            return {m: _legacy_failure(e) if isinstance(e, str) else e for m, e in value.items()}
        return value

    @field_validator("judgments", mode="before")
    @classmethod
    def _grounding(cls, value: Any) -> Any:
        # Each stored judgment is read as its shape by its keys; grounding's, by its key too.
        return grounding_by_key(value)


class UnitResult(_Scored):
    """One turn (``step`` None) or one retrieval step of a conversation, with the values of the
    evaluators run ``per: turn`` or ``per: step`` under their reported names (``turn.X``,
    ``step.X``). Turns and steps count from 0, as the data model counts them."""

    turn: int
    step: int | None = None


class Miss(BaseModel):
    """A unit's value that fell short of its threshold, or a tool call that matched no call
    its turn expected (``metric`` is then ``tool_call`` and ``call`` names it)."""

    metric: str
    value: float | None = None
    threshold: str | None = None  # as configured: ">= 0.5"
    call: str | None = None  # the tool call, as `name(arguments JSON)`


class Degradation(BaseModel):
    """A failing turn of a conversation: the turn's values that missed their thresholds, and
    the first step of that turn whose retrieval metric or tool call fell below its own (None:
    no step did, so the turn failed on its own)."""

    turn: int
    misses: list[Miss]
    step: int | None = None
    step_misses: list[Miss] = Field(default_factory=list)


def _empty(value: list[Any]) -> bool:
    return not value


class SampleResult(_Scored):
    """One sample's scores, failures and judgments, and the sample as it was evaluated (with a
    target, the target's answer and contexts, not the dataset's). A conversation scored per
    turn or per step also holds its ``units`` and where it ``degraded``; a report without
    them writes neither key."""

    sample: Sample | None = None
    # Left out when empty, so a report of single-turn samples stays byte for byte what it was
    # (a field rule, not a wrap serializer: that would build the whole row as Python dicts).
    units: list[UnitResult] = Field(default_factory=list, exclude_if=_empty)
    degraded: list[Degradation] = Field(default_factory=list, exclude_if=_empty)


def _legacy_failure(text: str) -> Failure:
    if text.startswith("unscored: "):
        return Failure(kind=FailureKind.UNSCORED, message=text.removeprefix("unscored: "))
    return Failure(message=text)
