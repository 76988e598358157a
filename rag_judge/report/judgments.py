"""What a judge said about one sample, as a few typed shapes with a common base:

- :class:`RubricJudgment`: one judge's verdict on a rubric (or on one context of a
  per-context rubric, with its ``rank`` and ``id``);
- :class:`PerContextJudgment`: a per-context rubric's judgment, one verdict per context;
- :class:`JuryJudgment`: a jury's judgment, one verdict per juror;
- :class:`GroundingJudgment`: the answer's claims with their verdicts, or its abstention.

:data:`Judgment` is their union. report.json keeps the field names it always had, so a stored
judgment is read back as its shape by the keys it holds (:func:`read_judgments`).
docs/judges.md lists the shapes and their fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    model_serializer,
)

__all__ = [
    "CLAIM_VERDICTS",
    "GROUNDING",
    "UNCHECKED",
    "BaseJudgment",
    "ClaimJudgment",
    "GroundingJudgment",
    "Judgment",
    "Juror",
    "JuryJudgment",
    "PerContextJudgment",
    "RubricJudgment",
    "grounding_by_key",
    "read_judgments",
]

GROUNDING = "grounding"  # the judgments' key a sample's claims and abstention are kept under
CLAIM_VERDICTS = ("supported", "contradicted", "unsupported")  # what a claim's verdict can be
# A claim never judged (no contexts, the verdict request failed or never parsed): a state of
# its own, so that it is never shown or counted as a verdict.
UNCHECKED = "unchecked"


class ClaimJudgment(BaseModel):
    """One claim of an answer as the grounding judge saw it: its text, its verdict, the
    1-based ranks (and ids) of the retrieved contexts that entail it (or, for a contradicted
    claim, contradict it), the ranks its citation markers point at (0: at nothing retrieved),
    the judge's reason, and where it sits in the answer (character offsets, when found).
    ``sentence`` is the 1-based answer sentence it was mapped to, whose markers it cites."""

    model_config = ConfigDict(extra="forbid")

    text: str
    verdict: str  # one of CLAIM_VERDICTS, or UNCHECKED (reason: why it was not judged)
    support: list[int] = Field(default_factory=list)
    support_ids: list[str | None] | None = None
    cited: list[int] | None = None
    reason: str = ""
    span: tuple[int, int] | None = None
    sentence: int | None = None

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}


# The order of the keys in report.json: the one flat model's field order, kept for every shape.
_KEYS = (
    "score", "reason", "raw", "attempts", "cached", "probs", "verdict", "scores", "spread",
    "unscored_choices", "logprobs_missing", "choices_received", "finish_reason",
    "structured_output", "schema_valid", "label_mass", "rank", "id", "contexts", "claims",
    "abstained", "judge", "jury",
)  # fmt: skip
_PLACE = {key: i for i, key in enumerate(_KEYS)}


class BaseJudgment(BaseModel):
    """What every judgment has. ``score`` is None when unscored or failed (``reason`` says
    why). ``judge`` names the juror ("provider/model") of a verdict a jury keeps."""

    model_config = ConfigDict(extra="forbid")
    shape: ClassVar[str]  # the tag the union is read by

    score: float | None
    reason: str = ""
    raw: str = ""  # the judge's last reply, verbatim
    attempts: int = 1  # requests made for this verdict (1 + re-asks)
    cached: bool = False
    judge: str | None = None

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent extras are left out of report.json; score and reason are always there.
        data: dict[str, Any] = handler(self)
        kept = [(k, v) for k, v in data.items() if v is not None or k in ("score", "reason")]
        return dict(sorted(kept, key=lambda item: _PLACE[item[0]]))

    def parts(self) -> list[BaseJudgment]:
        """The judgments this one is made of: a per-context rubric's contexts, a jury's
        verdicts; none for the others."""
        return []

    def spread_of_verdicts(self) -> float | None:
        """The population standard deviation of the verdicts behind the score (n sampled, or
        a jury's), where there were several."""
        return None

    def distribution(self) -> dict[str, float] | None:
        """The judge's probabilities over "1".."5", where it gave them."""
        return None

    def uncertainty(self) -> float | None:
        """How uncertain the verdict is (higher: more): the spread of a jury's or of n sampled
        verdicts, else the entropy (bits) of the judge's distribution; None where the run
        measured nothing, all verdicts agreed, or there is no score. The review mode's queue
        and the label plan's inclusion probabilities both read it."""
        if self.score is None:
            return None
        spread, probs = self.spread_of_verdicts(), self.distribution()
        if spread is not None:
            return spread if spread > 0 else None
        if probs:
            total = sum(probs.values())
            if total <= 0:
                return None
            entropy = -sum(p / total * math.log2(p / total) for p in probs.values() if p > 0)
            return entropy if entropy > 0 else None
        return None


class RubricJudgment(BaseJudgment):
    """One judge's verdict on a rubric. The optional fields appear only where the scoring
    mode fills them, or where the server did not do what was asked."""

    shape: ClassVar[str] = "rubric"

    probs: dict[str, float] | None = None  # distribution over "1".."5" (logprobs or local)
    verdict: int | None = None  # the stated score, where ``score`` is probability-weighted
    scores: list[float] | None = None  # the n sampled verdicts (n > 1)
    spread: float | None = None  # their population standard deviation
    unscored_choices: int | None = None  # sampled choices that could not be read
    # What the server did, where it differs from what was asked (absent otherwise):
    logprobs_missing: bool | None = None  # logprobs asked, none usable: ``score`` is the verdict
    choices_received: int | None = None  # fewer choices than the ``n`` asked for came back
    finish_reason: str | None = None  # why the reply stopped, when not "stop" (e.g. "length")
    structured_output: bool | None = None  # the request carried a response_format (False: the
    # server refused it and the request was resent without; absent: not asked or not said)
    schema_valid: bool | None = None  # the reply, as a whole, is JSON the verdict schema accepts
    label_mass: float | None = None  # local client: probability mass the model put on "1".."5"
    rank: int | None = None  # one context's verdict: the context's 1-based rank ...
    id: str | None = None  # ... and its id

    def spread_of_verdicts(self) -> float | None:
        return self.spread

    def distribution(self) -> dict[str, float] | None:
        return self.probs


class PerContextJudgment(BaseJudgment):
    """A per-context rubric's judgment: one verdict per retrieved context, in rank order."""

    shape: ClassVar[str] = "contexts"

    contexts: list[RubricJudgment]

    def parts(self) -> list[BaseJudgment]:
        return list(self.contexts)

    def grades(self) -> list[int] | None:
        """Each context's verdict as a 0-3 relevance grade (:func:`relevance_grade`), in rank
        order; None unless every context has a score (a partial grading would rank the rest
        as irrelevant)."""
        scores = [j.score for j in self.contexts]
        if any(s is None for s in scores):
            return None
        return [relevance_grade(s) for s in scores if s is not None]


def relevance_grade(score: float) -> int:
    """A 1–5 context_relevance score as a 0–3 relevance grade: 1→0, 2→0, 3→1, 4→2, 5→3.

    Levels 1 (unrelated) and 2 (on topic, but no help) are both "not relevant"; from 3 up each
    level is one grade. A weighted (non-integer) score is rounded half up first.
    """
    return max(0, math.floor(score + 0.5) - 2)


class GroundingJudgment(BaseJudgment):
    """The grounding judge's judgment: the answer's claims and whether it abstains (neither
    when the claims could not be read)."""

    shape: ClassVar[str] = "grounding"

    claims: list[ClaimJudgment] | None = None
    abstained: bool | None = None


def _shape(value: Any) -> str | None:
    """Which shape ``value`` is: a judgment's own, or a stored one's by the keys it holds."""
    if isinstance(value, BaseJudgment):
        return value.shape
    if not isinstance(value, Mapping):
        return None
    if "jury" in value:
        return JuryJudgment.shape
    if "contexts" in value:
        return PerContextJudgment.shape
    if "claims" in value or "abstained" in value:
        return GroundingJudgment.shape
    return RubricJudgment.shape


# A juror's verdict: on a rubric, or on each context of a per-context rubric.
Juror: TypeAlias = Annotated[
    Annotated[RubricJudgment, Tag(RubricJudgment.shape)]
    | Annotated[PerContextJudgment, Tag(PerContextJudgment.shape)],
    Discriminator(_shape),
]


class JuryJudgment(BaseJudgment):
    """A jury's judgment: every juror's verdict in order, the scores of those that scored and
    their population standard deviation; ``score`` is their aggregate."""

    shape: ClassVar[str] = "jury"

    scores: list[float] | None = None
    spread: float | None = None
    jury: list[Juror]

    def parts(self) -> list[BaseJudgment]:
        return list(self.jury)

    def spread_of_verdicts(self) -> float | None:
        return self.spread


Judgment: TypeAlias = Annotated[
    Annotated[RubricJudgment, Tag(RubricJudgment.shape)]
    | Annotated[PerContextJudgment, Tag(PerContextJudgment.shape)]
    | Annotated[JuryJudgment, Tag(JuryJudgment.shape)]
    | Annotated[GroundingJudgment, Tag(GroundingJudgment.shape)],
    Discriminator(_shape),
]

_BASE_KEYS = frozenset(BaseJudgment.model_fields)
_JUDGMENTS: TypeAdapter[dict[str, Judgment]] = TypeAdapter(dict[str, Judgment])


def grounding_by_key(judgments: Any) -> Any:
    """``judgments`` with a stored grounding judgment that holds no claims (they could not be
    read) read as grounding's: by its key, since its keys are those of any judgment."""
    if not isinstance(judgments, Mapping):
        return judgments
    found = judgments.get(GROUNDING)
    if not isinstance(found, Mapping) or not set(found) <= _BASE_KEYS:
        return judgments
    return {**judgments, GROUNDING: GroundingJudgment.model_validate(found)}


def read_judgments(data: Mapping[str, Any]) -> dict[str, Judgment]:
    """A sample's judgments as stored (report.json, samples.jsonl, a run's spool), each
    read back as its shape."""
    return _JUDGMENTS.validate_python(grounding_by_key(data))
