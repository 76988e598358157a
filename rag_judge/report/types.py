"""The report's parts as types: usage, metric kinds and summaries, signatures and failures, with
the judgments' shapes of :mod:`rag_judge.report.judgments` re-exported (one sample's result is
:mod:`rag_judge.report.result`).
Meaning lives here, not in strings; the renderers turn these into text at the edge.
:mod:`rag_judge.report.model` assembles them into the Report."""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from rag_judge.report.judgments import (
    CLAIM_VERDICTS,
    GROUNDING,
    UNCHECKED,
    BaseJudgment,
    ClaimJudgment,
    GroundingJudgment,
    Judgment,
    Juror,
    JuryJudgment,
    PerContextJudgment,
    RubricJudgment,
)

__all__ = [
    "CLAIM_VERDICTS",
    "GROUNDING",
    "UNCHECKED",
    "BaseJudgment",
    "ClaimJudgment",
    "Direction",
    "Failure",
    "FailureKind",
    "GroundingJudgment",
    "JudgeName",
    "Judgment",
    "Juror",
    "JuryJudgment",
    "MetricInfo",
    "MetricKind",
    "MetricSummary",
    "PerContextJudgment",
    "Restatement",
    "RubricJudgment",
    "Signature",
    "Usage",
]


class Usage(BaseModel):
    """What model calls cost. ``requests`` counts distinct calls sent (so ``requests +
    cache_hits`` is the number of requests given). ``retries`` counts the further HTTP requests
    those calls took: the engine's retries after a failure, and a client's resend of a call in
    another form (without ``response_format`` after a server refused it). ``connect_errors``
    counts the attempts among all those that never reached a server (connection refused, host
    not found, no connection made in time), so ``requests + retries - connect_errors`` is the
    number of HTTP requests the server received. ``cache_hits`` counts results served without
    a call (from the cache, or from an identical request earlier in the same run).
    ``failures`` counts results that are errors. ``cached_prompt_tokens`` counts the prompt
    tokens among ``prompt_tokens`` that the provider served from its prompt cache (priced lower;
    left out of the dump when 0, so older reports read the same). ``cost`` is None without
    prices."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    connect_errors: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    cached_prompt_tokens: int = 0

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("cached_prompt_tokens"):
            data.pop("cached_prompt_tokens", None)
        return data

    def add(self, other: dict[str, float | None]) -> Usage:
        """A new Usage with ``other``'s counts added (unknown keys are ignored)."""
        data = {name: getattr(self, name) for name in Usage.model_fields}
        for key, value in other.items():
            if key not in data or value is None:
                continue
            data[key] = value if data[key] is None else data[key] + value
        return Usage.model_validate(data)

    def __add__(self, other: Usage) -> Usage:
        return self.add(other.model_dump())


class MetricKind(str, Enum):
    """What family a metric belongs to; renderers and gates read this, not the metric's name."""

    RETRIEVAL = "retrieval"
    LEXICAL = "lexical"
    EMBEDDING = "embedding"
    JUDGE = "judge"
    LATENCY = "latency"
    TOOLS = "tools"  # an agent's tool calls against the ones its sample expects
    CUSTOM = "custom"  # a user's evaluator that names no kind


class Direction(str, Enum):
    """Which way a metric improves (docs/metric-direction.md lists every built-in metric's).
    Regression gates, ``compare``'s change column and report.html's heat map read it."""

    HIGHER = "higher"  # a score or a share of something good
    LOWER = "lower"  # an error rate, a latency, a rank
    # A count or a property of the labels (claims, num_ret, judged@k): a change either way is
    # not an improvement, so no gate or shading may call it one.
    NEUTRAL = "neutral"


def _legacy_direction(data: Any) -> Any:
    # ``lower_is_better: true`` (report.json and MetricInfo before Direction) is LOWER.
    if isinstance(data, dict) and "lower_is_better" in data:
        data = dict(data)
        lower = data.pop("lower_is_better")
        if lower and "direction" not in data:
            data["direction"] = Direction.LOWER
    return data


class MetricInfo(BaseModel):
    """How to read a metric's numbers: its kind, its scale (``hi`` None: unbounded), for a
    judge's normalised twin the metric it restates on [0, 1], and its direction (a metric that
    declares none is read higher-is-better)."""

    model_config = ConfigDict(frozen=True)

    kind: MetricKind = MetricKind.CUSTOM
    scale: tuple[float, float | None] = (0.0, 1.0)
    normalises: str | None = None
    direction: Direction = Direction.HIGHER
    # A metric restated over the samples where a condition holds (``faithfulness_answered``:
    # ``faithfulness`` where the answer answers) names the metric and the condition.
    restates: Restatement | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return _legacy_direction(data)

    @property
    def lower_is_better(self) -> bool:
        return self.direction is Direction.LOWER


class Restatement(BaseModel):
    """What a restated metric is: ``metric`` over the samples that are ``given``."""

    model_config = ConfigDict(frozen=True)

    metric: str
    given: str


class JudgeName(BaseModel):
    """A judge model as signatures name it: ``provider/model``, and whether it is an offline
    stub (whose numbers measure nothing), so that no reader parses the text for either."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model: str
    stub: bool = False

    @property
    def text(self) -> str:
        return f"{self.provider}/{self.model}"


# A signature option value holds no "|" outside brackets (sacrebleu nests signatures in "[...]").
_PART = re.compile(r"(?:[^|\[]|\[[^\]]*\])+")


class Signature(BaseModel):
    """sacrebleu-style signature: the metric's name and, in order, every option that changes
    its number; ``run`` holds the run's settings for its interval (bootstrap, confidence, seed),
    which describe the interval, not the metric. Rendered ``name|key:value|...`` at the edge."""

    model_config = ConfigDict(frozen=True)

    name: str
    options: dict[str, str] = Field(default_factory=dict)
    run: dict[str, str] = Field(default_factory=dict)
    # A judged metric's judges (a jury's in order), structured; rendered in ``options``.
    judged_by: tuple[JudgeName, ...] = ()

    @model_validator(mode="after")
    def _legacy_judges(self) -> Signature:
        # A signature written before judges were structured (or built from text) names them
        # only in its ``judge`` option: read them from there, once, here.
        if not self.judged_by and self.options.get("judge"):
            found = tuple(_judge_of(m) for m in _judge_texts(self.options["judge"]))
            object.__setattr__(self, "judged_by", found)
        return self

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("judged_by"):
            data.pop("judged_by", None)
        return data

    @classmethod
    def of(cls, name: str, **options: object) -> Signature:
        """A signature from keyword options (values rendered with ``str``; order kept)."""
        return cls(name=name, options={k: str(v) for k, v in options.items()})

    def with_run(self, **run: object) -> Signature:
        return self.model_copy(update={"run": {k: str(v) for k, v in run.items()}})

    def render(self) -> str:
        parts = [self.name, *(f"{k}:{v}" for k, v in self.options.items())]
        parts += [f"{k}:{v}" for k, v in self.run.items()]
        return "|".join(parts)

    def judges(self) -> list[str]:
        """The judge models ("provider/model") of a judge metric, a jury's each; empty for
        other metrics."""
        return [j.text for j in self.judged_by]

    def same_metric(self, other: Signature) -> bool:
        """Whether both describe the same metric definition (run settings aside)."""
        return self.name == other.name and self.options == other.options

    @classmethod
    def parse(cls, text: str) -> Signature:
        """Read a rendered signature back (report.json written before signatures were models):
        a trailing ``ci:...`` and the ``seed:...`` after it are the run part."""
        parts = _PART.findall(text)
        name = parts[0] if parts else ""
        options: dict[str, str] = {}
        run: dict[str, str] = {}
        target = options
        for part in parts[1:]:
            key, _, value = part.partition(":")
            if key == "ci":
                target = run
            target[key] = value
        return cls(name=name, options=options, run=run)


def _judge_texts(judge: str) -> list[str]:
    jury = re.fullmatch(r"jury\[(.*)\]", judge.strip())
    models = jury.group(1).split(",") if jury else [judge]
    return [m.strip() for m in models if m.strip()]


def _judge_of(text: str) -> JudgeName:
    provider, _, model = text.partition("/")
    return JudgeName(provider=provider, model=model, stub=provider == "stub")


class FailureKind(str, Enum):
    ERROR = "error"  # the computation or the judge call failed
    UNSCORED = "unscored"  # the judge replied, but no 1-5 verdict could be read from it
    MISSING_INPUT = "missing_input"  # the sample lacks a field the metric needs
    # The metric does not apply to the sample (an abstention has no claims to check; an
    # over-refusal rate reads only answerable questions): not a failure, not counted as one.
    NOT_APPLICABLE = "not_applicable"


class Failure(BaseModel):
    """Why a sample has no value for a metric."""

    model_config = ConfigDict(frozen=True)

    kind: FailureKind = FailureKind.ERROR
    message: str

    def text(self) -> str:
        """One line for a person: the message, prefixed ``unscored:`` for an unscored verdict."""
        if self.kind is FailureKind.UNSCORED:
            return f"unscored: {self.message}"
        if self.kind is FailureKind.NOT_APPLICABLE:
            return f"n/a: {self.message}"
        return self.message

    @property
    def counts(self) -> bool:
        """Whether this is a failure to count (every kind but ``not_applicable``)."""
        return self.kind is not FailureKind.NOT_APPLICABLE


class MetricSummary(BaseModel):
    """Aggregate of one metric. ``n`` counts scored samples; ``errors`` those that failed,
    ``unscored`` of them judge replies that could not be read as a verdict."""

    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int
    errors: int = 0
    unscored: int = 0
    not_applicable: int = 0  # samples the metric does not apply to (neither n nor errors)
    aggregate: str = "mean"
    kind: MetricKind = MetricKind.CUSTOM
    scale: tuple[float, float | None] = (0.0, 1.0)
    normalises: str | None = None  # a judge's [0, 1] twin names the 1-5 metric it restates
    restates: Restatement | None = None  # a metric restated over a subset of the samples
    # Which way it improves. A report written before directions reads as higher (or lower
    # where it said ``lower_is_better``).
    direction: Direction = Direction.HIGHER

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return _legacy_direction(data)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only a restated metric says what it restates; the others' report.json is unchanged.
        data: dict[str, Any] = handler(self)
        if data.get("restates") is None:
            data.pop("restates", None)
        return data

    @property
    def lower_is_better(self) -> bool:
        return self.direction is Direction.LOWER
