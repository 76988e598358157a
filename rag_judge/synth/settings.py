"""``rag-judge synth``'s settings: the judge, how many questions of which kinds, the chunking,
the pool and the filters' thresholds; read from ``--config synth.yaml`` with ``file:line``
errors. docs/synth.md lists every key."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from rag_judge.data.yaml_file import line_of, read_yaml
from rag_judge.errors import ConfigError, format_loc
from rag_judge.judge.settings import Judge, flat_judge, judge_keys, local_cache
from rag_judge.messages import friendly_message
from rag_judge.synth.asks import KINDS, Kind
from rag_judge.synth.corpus import Chunking

__all__ = ["FilterSettings", "SynthConfig", "load_synth_config", "synth_config"]

# The share of each kind when a config names none: mostly single-chunk facts, and enough of
# every other kind to measure it.
DEFAULT_MIX: dict[Kind, float] = {
    "factual": 0.4,
    "multi_hop": 0.2,
    "comparison": 0.15,
    "conversational": 0.1,
    "unanswerable": 0.15,
}


class FilterSettings(BaseModel):
    """The filters' thresholds (docs/synth.md, "Filters")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    duplicate: float = Field(default=90.0, ge=0, le=100)  # rapidfuzz token_sort_ratio
    leak_words: int = Field(default=4, ge=1)  # consecutive answer words quoted by the question
    closed_book: float = Field(default=0.6, gt=0, le=1)  # token F1 of a closed-book answer
    seed_grade: int = Field(default=2, ge=0, le=3)  # every seed chunk graded at least this
    unanswerable_grade: int = Field(default=2, ge=1, le=3)  # no pool chunk graded this or more


class SynthConfig(BaseModel):
    """What to synthesise and how. The judge's keys (``client``, ``cache``, ``temperature``,
    ``seed``, ``reask``, ``max_tokens``) sit at the top level, as in an evaluator's config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: Judge = Field(default_factory=Judge)
    questions: int = Field(default=20, ge=1)
    seed: int = 0  # the seed chunks' draw, and each question's request
    kinds: dict[Kind, float] = Field(default_factory=lambda: dict(DEFAULT_MIX))
    # Items generated per question kept, so that filters can reject some and still leave
    # ``questions``: the plan asks for ceil(questions * oversample).
    oversample: float = Field(default=2.0, ge=1, le=10)
    chunking: Chunking = Field(default_factory=Chunking)
    pool_depth: int = Field(default=10, ge=0, le=1000)  # BM25 neighbours graded per question
    dense: bool = False  # also the MiniLM neighbours (rag-judge[bertscore])
    dense_depth: int = Field(default=5, ge=0, le=1000)
    filters: FilterSettings = Field(default_factory=FilterSettings)

    @model_validator(mode="wrap")
    @classmethod
    def _judge_keys(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        return judge_keys(data, Judge(), handler)

    @model_serializer(mode="wrap")
    def _flat(self, handler: Callable[[Any], Any]) -> Any:
        return flat_judge(handler(self))

    @field_validator("kinds")
    @classmethod
    def _mix(cls, kinds: dict[Kind, float]) -> dict[Kind, float]:
        if not kinds:
            raise ValueError(f"name at least one kind of question: {', '.join(KINDS)}")
        for kind, share in kinds.items():
            if not (math.isfinite(share) and share >= 0):
                raise ValueError(f"{kind}: a share is a number >= 0, got {share!r}")
        if not sum(kinds.values()) > 0:
            raise ValueError("the shares of the kinds add up to 0: give one a share above 0")
        return kinds

    def planned(self) -> int:
        """How many items the plan asks the judge for."""
        return math.ceil(self.questions * self.oversample)


def load_synth_config(path: str | Path, **overrides: Any) -> SynthConfig:
    """The config in the YAML file at ``path`` with ``overrides`` (the command line's) on top;
    a relative cache path is relative to the file. Errors name ``file:line: key``."""
    path = Path(path)
    data, root = read_yaml(path, "a synth config", "file not found")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a synth config is a YAML mapping of keys to values")
    local_cache(data, path.parent)
    return synth_config(data, overrides, path, root)


def synth_config(
    data: dict[str, Any],
    overrides: dict[str, Any],
    path: Path | None = None,
    root: Any = None,
) -> SynthConfig:
    """``data`` with ``overrides`` (the command line's) on top, validated; a problem is a
    ConfigError naming ``path:line: key`` (``--key`` for an override without a file)."""
    data = {**data, **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return SynthConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            loc = tuple(err["loc"])
            line = line_of(root, loc, at_key=err["type"] == "extra_forbidden")
            if path is None:
                key = str(loc[0]).replace("_", "-") if loc else ""
                problems.append(f"--{key}: {friendly_message(err)}")
                continue
            at = f"{path}:{line}" if line else str(path)
            problems.append(f"{at}: {format_loc(loc)}: {friendly_message(err)}")
        raise ConfigError("\n".join(problems)) from None
