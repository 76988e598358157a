"""Judge reply → a ``JudgeVerdict`` (score, reason, what it rests on) or ``Unscored(reason, raw)``.

The judge is asked for ``{"reason": "...", "score": <1-5>}`` (with a JSON schema where the server
supports structured output). Servers that ignore the schema get a tolerant parser: fenced code,
text around the JSON, single quotes and trailing commas, prose such as ``Score: 4`` or
``score = 4/5``, bullet lines (``- score: 4``, ``* Score: 4/5``, ``• score 4``), and a JSON
object cut off before its closing brace (``{"reason": "...", "score": 4``: a reply stopped at
``max_tokens``) once its score is complete. The JSON-level reading is ``reply_json``'s; its
``schema_valid(text, VERDICT_SCHEMA)`` tells whether a reply needed none of that.

Scale rule: a score must be an integer 1..5. ``4.0`` counts as 4, but ``3.5`` is *unscored*, as
are 0 and 7: half points are not on the scale and rounding or clipping would invent a verdict
the judge did not give. A reply is never turned into a silent 0.

Probability-weighted scores (G-Eval): ``Σ s·p(s)`` over the judge's distribution on "1".."5",
renormalised over those five labels, from the score token's top logprobs or from a client that
returns the distribution directly.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag_judge.judge.reply_json import FENCE, JSON_START, Cut, lenient_loads, scan
from rag_judge.llm.base import Completion

__all__ = [
    "SCORE_LABELS",
    "VERDICT_SCHEMA",
    "VERDICT_SHAPE",
    "JudgeVerdict",
    "Scoring",
    "Unscored",
    "normalise_probs",
    "parse_verdict",
    "read_completion",
    "score_probs_from_logprobs",
    "weighted_score",
]

SCORE_LABELS = ("1", "2", "3", "4", "5")

# Sent as request.json_schema. ``enum`` rather than minimum/maximum: strict structured-output
# modes accept enum everywhere.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
    },
    "required": ["reason", "score"],
    "additionalProperties": False,
}
# The same, as the prompts and the re-ask spell it out to the judge.
VERDICT_SHAPE = '{"reason": "<one or two sentences>", "score": <integer 1-5>}'


Scoring = Literal["json", "logprobs", "distribution"]


class JudgeVerdict(BaseModel):
    """A usable verdict: ``score`` is the metric (the judge's stated integer, or a weighted
    mean), with what it rests on where the scoring mode says more (the fields a judgment
    records beside score and reason; None: not this mode)."""

    model_config = ConfigDict(frozen=True)

    score: float = Field(ge=1, le=5)
    reason: str = ""
    verdict: int | None = None  # the stated score, where ``score`` is probability-weighted
    probs: dict[str, float] | None = None  # distribution over "1".."5" (logprobs or labels)
    scores: list[float] | None = None  # the n sampled verdicts (n > 1)
    spread: float | None = None  # their population standard deviation
    unscored_choices: int | None = None  # sampled choices that could not be read
    logprobs_missing: bool | None = None  # logprobs asked, none usable: the stated score
    # Character offsets of the score in the reply, to find its token among the logprobs.
    span: tuple[int, int] | None = Field(default=None, exclude=True, repr=False)

    def details(self) -> dict[str, Any]:
        """What a judgment records beside score and reason (absent where None)."""
        return self.model_dump(exclude={"score", "reason"}, exclude_none=True)


class Unscored(BaseModel):
    """A reply that carries no usable score, with why (quoted back to the judge on a re-ask)."""

    model_config = ConfigDict(frozen=True)

    reason: str
    raw: str
    # The reply states a verdict that is not a valid score (off the scale, not a number): a
    # longer reply would not have fixed it, so a stop at max_tokens is not the reason.
    stated: bool = False


_NUMBER = r"(-?\d+(?:\.\d+)?)"
_PROSE = re.compile(
    r"(final\s+)?\b(?:score|rating)\b\**\s*(?:is|of|=|:)?\s*\**\s*"
    + _NUMBER
    + r"(?:\s*(?:/|out\s+of)\s*(\d+))?",
    re.IGNORECASE,
)
_BARE = re.compile(r"\s*\**" + _NUMBER + r"(?:\s*/\s*(\d+))?\**\s*\.?\s*")


def parse_verdict(text: str) -> JudgeVerdict | Unscored:
    """Read one judge reply. Never raises; a reply without a usable score is ``Unscored``."""
    if not text or not text.strip():
        return Unscored(reason="empty reply", raw=text)
    # A reply that is one JSON object with a score, the usual one: what the search below would
    # find first (the whole reply, at offset 0, nothing cut off), without scanning it.
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and _score_key(whole) is not None:
        return _from_object(whole, text, 0)
    return _searched(text)


def _searched(text: str) -> JudgeVerdict | Unscored:
    """A non-empty reply read by searching it for a JSON object with a score, else prose."""
    complete, cut = scan(text)
    obj, offset = _find_object(text, complete, cut)
    if obj is not None:
        found = _from_object(obj, text, offset)
        if cut is not None and offset == cut.offset and isinstance(found, Unscored):
            # The object was cut off: its score may be cut short too, so it is not "stated".
            return found.model_copy(update={"stated": False})
        return found
    if cut is not None and JSON_START.match(text, cut.offset):
        # A JSON object cut off before its score: a "score: 3" inside its reason is not the
        # verdict (the judge may have been weighing it), so only the prose before it counts.
        found = _from_prose(text, end=cut.offset)
        if isinstance(found, JudgeVerdict):
            return found
        return Unscored(
            reason="the reply's JSON object is cut off before a complete 'score'", raw=text
        )
    return _from_prose(text)


def _find_object(
    text: str, complete: list[tuple[str, int]], cut: Cut | None
) -> tuple[dict[str, Any] | None, int]:
    """The first JSON object with a score-like key: whole reply, fenced blocks, any {...}, then
    the object a cut-off reply left open."""
    candidates: list[tuple[str, int]] = [(text, 0)]
    candidates += [(m.group(1), m.start(1)) for m in FENCE.finditer(text)]
    candidates += complete
    if cut is not None:
        candidates += [(chunk, cut.offset) for chunk in cut.closed()]
    for chunk, offset in candidates:
        obj = lenient_loads(chunk)
        if isinstance(obj, dict) and _score_key(obj) is not None:
            return obj, offset
    return None, 0


def _score_key(obj: Mapping[str, Any]) -> str | None:
    for key in obj:
        if isinstance(key, str) and key.strip().lower() in {"score", "rating"}:
            return key
    return None


def _from_object(obj: dict[str, Any], text: str, offset: int) -> JudgeVerdict | Unscored:
    key = _score_key(obj)
    assert key is not None  # _find_object only returns objects with a score key
    reason = next((v for k, v in obj.items() if str(k).lower() in {"reason", "reasoning"}), "")
    reason = reason if isinstance(reason, str) else json.dumps(reason, ensure_ascii=False)
    value = obj[key]
    if isinstance(value, str):
        bare = _BARE.fullmatch(value)
        if bare is None:
            return _invalid(f"score {value!r} is not a number", text)
        value, denom = bare.group(1), bare.group(2)
        if denom is not None and denom != "5":
            return _invalid(f"score {value}/{denom} is not on the 1-5 scale", text)
    problem = _scale_problem(value)
    if problem:
        return _invalid(problem, text)
    score = int(float(value))
    return JudgeVerdict(score=score, reason=reason.strip(), span=_span_after(text, key, offset))


def _span_after(text: str, key: str, offset: int) -> tuple[int, int] | None:
    """Offsets of the score digit following the score key (for logprob lookup)."""
    quoted = r"""(?<!\\)["']""" + re.escape(key) + r"""["']\s*:\s*["']?\s*(-?\d+)"""
    m = re.compile(quoted).search(text, offset)
    return (m.start(1), m.end(1)) if m else None


def _from_prose(text: str, end: int | None = None) -> JudgeVerdict | Unscored:
    """A score stated in prose, read from ``text[:end]`` (``raw`` stays the whole reply)."""
    searched = text if end is None else text[:end]
    # (value, denominator, span of the number, span of the whole match, says "final")
    bare = _BARE.fullmatch(searched)
    matches = [(bare.group(1), bare.group(2), bare.span(1), bare.span(0), False)] if bare else []
    if not matches:
        matches = [
            (m.group(2), m.group(3), m.span(2), m.span(0), bool(m.group(1)))
            for m in _PROSE.finditer(searched)
        ]
    if not matches:
        return Unscored(
            reason="no JSON object with a 'score' and no 'Score: N' in the reply", raw=text
        )
    chosen = [m for m in matches if m[4]] or matches
    values = {(v, d) for v, d, *_ in chosen}
    if len(values) > 1:
        listed = ", ".join(sorted(v if d is None else f"{v}/{d}" for v, d in values))
        return Unscored(reason=f"ambiguous: the reply gives several scores ({listed})", raw=text)
    value, denom, span, whole, _ = chosen[-1]
    if denom is not None and denom != "5":
        return _invalid(f"score {value}/{denom} is not on the 1-5 scale", text)
    problem = _scale_problem(value)
    if problem:
        return _invalid(problem, text)
    return JudgeVerdict(score=int(float(value)), reason=_prose_reason(searched, whole), span=span)


# A list marker opening a line ("- ", "* ", "• ", "2. ", "3) "), and a "Reason:" label.
_MARK = r"(?:[-*+\u2022\u2023\u25e6\u00b7]|\d{1,2}[.)])"
_LINE_MARK = re.compile(r"^[ \t]*" + _MARK + r"[ \t]+", re.MULTILINE)
_MARKED = re.compile(r"[ \t]*" + _MARK + r"[ \t]+\**[ \t]*")
_REASON_LABEL = re.compile(
    r"^[ \t]*\**(?:reason|reasoning|explanation|justification)\**[ \t]*:\**[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)


def _prose_reason(text: str, whole: tuple[int, int]) -> str:
    """The reply without its score phrase (and the list marker opening the score's line),
    list markers and a "Reason:" label dropped from the start of each line."""
    start = text.rfind("\n", 0, whole[0]) + 1
    if _MARKED.fullmatch(text, start, whole[0]):
        whole = (start, whole[1])
    reason = text[: whole[0]] + " " + text[whole[1] :]
    reason = _REASON_LABEL.sub("", _LINE_MARK.sub("", reason))
    return reason.strip(" *:=\n\t").lstrip(". ").rstrip(" *:")


def _invalid(reason: str, text: str) -> Unscored:
    return Unscored(reason=reason, raw=text, stated=True)


def _scale_problem(value: Any) -> str | None:
    """Why a score value is not an integer 1..5, or None when it is."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return f"score {value!r} is not a number"
    try:
        number = float(value)
    except ValueError:
        return f"score {value!r} is not a number"
    if not math.isfinite(number):
        return f"score {value!r} is not a number"
    if number != int(number):
        return f"score {value} is not an integer on the 1-5 scale (half points are not used)"
    if not 1 <= number <= 5:
        return f"score {int(number)} is outside the 1-5 scale"
    return None


def weighted_score(probs: Mapping[Any, float]) -> float | None:
    """G-Eval expectation Σ s·p(s), renormalised over the labels 1..5; None without mass."""
    dist = normalise_probs(probs)
    return None if dist is None else math.fsum(s * p for s, p in dist.items())


def normalise_probs(probs: Mapping[Any, float]) -> dict[int, float] | None:
    """The distribution over 1..5 (renormalised), as recorded in a judgment's ``probs``."""
    mass: dict[int, float] = {}
    for label, p in probs.items():
        key = str(label).strip()
        if key in SCORE_LABELS and p > 0 and math.isfinite(p):
            mass[int(key)] = mass.get(int(key), 0.0) + float(p)
    total = math.fsum(mass.values())
    return {s: mass[s] / total for s in sorted(mass)} if total > 0 else None


def score_probs_from_logprobs(
    token_logprobs: Sequence[Mapping[str, float]], text: str, verdict: JudgeVerdict
) -> dict[int, float] | None:
    """The distribution over 1..5 at the reply's score token, from per-token top logprobs.

    The token is located by rebuilding the reply from each position's most likely token and
    finding the one that covers the score's character span; failing that, the last position
    whose most likely token is the parsed digit. Probabilities of variants of one label
    (``"4"``, ``" 4"``) are summed, then renormalised over the five labels.
    """
    if not token_logprobs:
        return None
    position = _token_at(token_logprobs, text, verdict.span)
    if position is None:
        digit = str(int(verdict.score))  # a stated score is a whole number
        hits = [i for i, alts in enumerate(token_logprobs) if alts and _top(alts).strip() == digit]
        position = hits[-1] if hits else None
    if position is None:
        return None
    alts = token_logprobs[position]
    return normalise_probs({k: math.exp(v) for k, v in alts.items() if math.isfinite(v)})


def _top(alts: Mapping[str, float]) -> str:
    return max(alts.items(), key=lambda kv: kv[1])[0]


def _token_at(
    token_logprobs: Sequence[Mapping[str, float]], text: str, span: tuple[int, int] | None
) -> int | None:
    if span is None:
        return None
    pos = 0
    for i, alts in enumerate(token_logprobs):
        token = _top(alts) if alts else ""
        if text[pos : pos + len(token)] != token:
            return None  # sampled tokens differ from the argmax ones: fall back
        if pos <= span[0] < pos + len(token):
            return i if token.strip() in SCORE_LABELS else None
        pos += len(token)
    return None


def read_completion(
    completion: Completion, scoring: Scoring, *, max_tokens: int | None = None
) -> JudgeVerdict | Unscored:
    """One reply (``n`` choices) → a reading, or Unscored with the reason to quote back.

    With ``scoring="logprobs"`` and no usable logprobs in the reply (the server ignored
    ``logprobs``, or sent none for the score token), the stated score is kept and the reading
    says so: ``extra["logprobs_missing"] = True``. A reply that cannot be read and stopped at
    the token limit (``finish_reason == "length"``) says that it was cut off at ``max_tokens``,
    unless it stated a verdict that is invalid as it stands (a score off the scale): a reply
    that rambled on to the limit after ``"score": 7`` is told what is wrong with the 7.
    """
    found = _read(completion, scoring)
    if isinstance(found, Unscored) and completion.finish_reason == "length" and not found.stated:
        limit = "max_tokens" if max_tokens is None else f"max_tokens={max_tokens}"
        reason = (
            f"the reply was cut off at {limit} (finish_reason 'length') before a score could "
            f"be read ({found.reason}); raise max_tokens"
        )
        return Unscored(reason=reason, raw=found.raw)
    return found


def _read(completion: Completion, scoring: Scoring) -> JudgeVerdict | Unscored:
    verdicts = [parse_verdict(text) for text in completion.choices] or [
        Unscored(reason="the reply has no choices", raw="")
    ]
    first = verdicts[0]
    if scoring == "distribution" and completion.score_probs:
        dist = normalise_probs(completion.score_probs)
        if dist is not None:
            reason = first.reason if isinstance(first, JudgeVerdict) else ""
            return JudgeVerdict(score=_weighted(dist), reason=reason, probs=_keyed(dist))
    scored = [v for v in verdicts if isinstance(v, JudgeVerdict)]
    if not scored:
        return first if isinstance(first, Unscored) else Unscored(reason="no verdict", raw="")
    if len(verdicts) > 1:
        values = [v.score for v in scored]
        unread = len(verdicts) - len(scored)
        return JudgeVerdict(
            score=math.fsum(values) / len(values),
            reason=scored[0].reason,
            scores=values,
            spread=statistics.pstdev(values),
            unscored_choices=unread or None,
        )
    verdict = scored[0]
    if scoring == "logprobs":
        dist = score_probs_from_logprobs(completion.token_logprobs or [], completion.text, verdict)
        if dist is None:  # the server sent no usable logprobs: keep the stated score, say so
            return verdict.model_copy(update={"logprobs_missing": True})
        stated = int(verdict.score)
        return JudgeVerdict(
            score=_weighted(dist), reason=verdict.reason, verdict=stated, probs=_keyed(dist)
        )
    return verdict


def _weighted(dist: dict[int, float]) -> float:
    value = weighted_score(dist)  # a distribution from normalise_probs always has mass
    assert value is not None
    return value


def _keyed(dist: dict[int, float]) -> dict[str, float]:
    return {str(k): v for k, v in dist.items()}
