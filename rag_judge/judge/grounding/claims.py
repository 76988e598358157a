"""Claim-level grounding through the judge: the two requests and the models their replies
parse into.

1. *Claims* (``_claims.j2``): the answer split into atomic claims, and whether it abstains:
   ``{"abstention": false, "claims": ["...", ...]}`` → :class:`ClaimList`.
2. *Verdicts* (``_claim_verdicts.j2``): each claim checked against the numbered contexts:
   ``{"verdicts": [{"claim": 1, "verdict": "supported", "contexts": [2], "reason": "..."}]}``
   → a list of :class:`ClaimVerdict`, one per claim, in claim order.
3. *Citation support* (``_citation_support.j2``, ``citations: {mode: alce}`` only): each
   answer sentence that cites against the contexts it cites, ALCE's two questions:
   ``{"statements": [{"statement": 1, "entailed": true, "alone": [2], "without": [],
   "reason": "..."}]}`` → a list of :class:`StatementVerdict`, in statement order.

A reply is read as leniently as a rubric verdict (fenced code, text around the JSON, single
quotes, trailing commas), then validated; what does not hold is an ``Unscored`` whose reason
is quoted back on the re-ask: a missing key, a verdict outside the three, a claim judged twice
or not at all, a context number out of range, a "supported" verdict that names no context.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rag_judge.judge.reply_json import FENCE, braced, lenient_loads
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion
from rag_judge.report.model import CLAIM_VERDICTS

__all__ = [
    "CITATIONS_RUBRIC",
    "CITATIONS_SCHEMA",
    "CITATIONS_SHAPE",
    "CLAIMS_RUBRIC",
    "CLAIMS_SCHEMA",
    "CLAIMS_SHAPE",
    "VERDICTS_RUBRIC",
    "VERDICTS_SCHEMA",
    "VERDICTS_SHAPE",
    "ClaimList",
    "ClaimVerdict",
    "StatementVerdict",
    "read_claims",
    "read_statements",
    "read_verdicts",
]

VerdictName = Literal["supported", "contradicted", "unsupported"]

# The two prompts, as rubrics so that the renderer compiles and hashes them like any other.
CLAIMS_RUBRIC = Rubric(name="claims", inputs=("question", "answer"), template="_claims.j2")
VERDICTS_RUBRIC = Rubric(
    name="claim_verdicts", inputs=("question", "contexts"), template="_claim_verdicts.j2"
)
CITATIONS_RUBRIC = Rubric(
    name="citation_support", inputs=("question", "contexts"), template="_citation_support.j2"
)

CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "abstention": {"type": "boolean"},
        "claims": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["abstention", "claims"],
    "additionalProperties": False,
}
CLAIMS_SHAPE = '{"abstention": <true|false>, "claims": ["<claim>", ...]}'

VERDICTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "claim": {"type": "integer"},
                    "verdict": {"type": "string", "enum": list(CLAIM_VERDICTS)},
                    "contexts": {"type": "array", "items": {"type": "integer"}},
                    "reason": {"type": "string"},
                },
                "required": ["claim", "verdict", "contexts", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}
VERDICTS_SHAPE = (
    '{"verdicts": [{"claim": <claim number>, "verdict": "supported" | "contradicted" | '
    '"unsupported", "contexts": [<context numbers>], "reason": "<one sentence>"}, ...]}'
)

_NUMBERS = {"type": "array", "items": {"type": "integer"}}
CITATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "statements": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "statement": {"type": "integer"},
                    "entailed": {"type": "boolean"},
                    "alone": _NUMBERS,
                    "without": _NUMBERS,
                    "reason": {"type": "string"},
                },
                "required": ["statement", "entailed", "alone", "without", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["statements"],
    "additionalProperties": False,
}
CITATIONS_SHAPE = (
    '{"statements": [{"statement": <statement number>, "entailed": <true|false>, '
    '"alone": [<context numbers>], "without": [<context numbers>], "reason": "<one sentence>"}'
    ", ...]}"
)


class ClaimList(BaseModel):
    """The answer's claims, and whether it declines to answer (then it has none)."""

    model_config = ConfigDict(frozen=True)

    abstention: bool
    claims: tuple[str, ...] = ()

    @field_validator("claims", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        # A claim given as {"claim": "..."} or {"text": "..."} is still a claim; blanks are not.
        if not isinstance(value, list):
            return value
        out = []
        for item in value:
            if isinstance(item, dict):
                item = next((item[k] for k in ("claim", "text", "statement") if k in item), item)
            if isinstance(item, str):
                item = item.strip()
                if not item:
                    continue
            out.append(item)
        return out


class ClaimVerdict(BaseModel):
    """One claim's verdict: the contexts (1-based numbers as shown) that entail it, or for a
    contradicted claim contradict it, and the judge's reason."""

    model_config = ConfigDict(frozen=True)

    claim: int = Field(ge=1)
    verdict: VerdictName
    contexts: tuple[int, ...] = ()
    reason: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _spelling(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = re.sub(r"[\s_-]+", " ", value.strip().lower())
            return "unsupported" if value == "not supported" else value
        return value

    @field_validator("contexts", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return _context_numbers(value)


class StatementVerdict(BaseModel):
    """ALCE's questions about one answer sentence and the contexts it cites: whether they
    jointly entail it, which of them entail it ``alone``, and those ``without`` which the
    others still entail it (1-based context numbers, as shown)."""

    model_config = ConfigDict(frozen=True)

    statement: int = Field(ge=1)
    entailed: bool
    alone: tuple[int, ...] = ()
    without: tuple[int, ...] = ()
    reason: str = ""

    @field_validator("alone", "without", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return _context_numbers(value)


def _context_numbers(value: Any) -> Any:
    # "CONTEXT 2", "[2]" and "2" all name context 2.
    if isinstance(value, int | str):
        value = [value]
    if isinstance(value, list):
        return [_number(v) for v in value]
    return value


def _number(value: Any) -> Any:
    if isinstance(value, str):
        found = re.fullmatch(r"\s*(?:context\s*)?\[?\s*(\d+)\s*\]?\s*", value, re.IGNORECASE)
        return int(found.group(1)) if found else value
    return value


def _object(text: str, key: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` with ``key``: whole reply, fenced blocks, any {...}."""
    chunks = [text, *(m.group(1) for m in FENCE.finditer(text))]
    chunks += [c for c, _ in braced(text)]
    for chunk in chunks:
        obj = lenient_loads(chunk)
        if isinstance(obj, dict) and key in obj:
            return obj
    return None


def _listed(text: str, key: str) -> list[Any] | Unscored:
    """The list under ``key`` of the first JSON object that has one, or Unscored saying why
    there is none (the verdict and statement replies start alike)."""
    if not text.strip():
        return Unscored(reason="empty reply", raw=text)
    obj = _object(text, key)
    if obj is None or not isinstance(obj[key], list):
        return Unscored(reason=f"no JSON object with a '{key}' list in the reply", raw=text)
    items: list[Any] = obj[key]
    return items


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def read_claims(completion: Completion) -> ClaimList | Unscored:
    """The claim list of a reply, or Unscored saying what is wrong with it."""
    text = completion.text
    if not text.strip():
        return Unscored(reason="empty reply", raw=text)
    obj = _object(text, "claims")
    if obj is None:
        return Unscored(reason="no JSON object with 'claims' in the reply", raw=text)
    if isinstance(obj.get("abstention"), str):
        obj["abstention"] = {"true": True, "false": False}.get(obj["abstention"].lower())
    try:
        found = ClaimList.model_validate(obj)
    except ValidationError as exc:
        return Unscored(reason=_problem(exc), raw=text)
    if found.abstention and found.claims:
        return found.model_copy(update={"claims": ()})  # an abstention states nothing to check
    return found


def read_verdicts(
    completion: Completion, claims: int, contexts: int
) -> list[ClaimVerdict] | Unscored:
    """One verdict per claim, in claim order, from a reply judging ``claims`` claims against
    ``contexts`` contexts; or Unscored saying what is wrong with it."""
    text = completion.text
    items = _listed(text, "verdicts")
    if isinstance(items, Unscored):
        return items
    if len(items) == claims and all(isinstance(v, dict) and "claim" not in v for v in items):
        items = [{**v, "claim": i} for i, v in enumerate(items, start=1)]  # given in order
    try:
        verdicts = [ClaimVerdict.model_validate(v) for v in items]
    except ValidationError as exc:
        return Unscored(reason=f"verdicts: {_problem(exc)}", raw=text)
    problem = _check(verdicts, claims, contexts)
    if problem:
        return Unscored(reason=problem, raw=text)
    return sorted(verdicts, key=lambda v: v.claim)


def _numbering(numbers: list[int], count: int, what: str) -> str | None:
    """What is wrong with the numbers a reply gave its ``count`` items (``what``), or None."""
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    if twice:
        return f"{what} {twice[0]} is judged more than once"
    extra = [n for n in numbers if n > count]
    if extra:
        return f"there is no {what} {extra[0]}: the {what}s are numbered 1 to {count}"
    missing = [n for n in range(1, count + 1) if n not in numbers]
    if missing:
        return f"{what} {missing[0]} has no verdict: give one verdict for each of the {count}"
    return None


def _check(verdicts: list[ClaimVerdict], claims: int, contexts: int) -> str | None:
    problem = _numbering([v.claim for v in verdicts], claims, "claim")
    if problem:
        return problem
    for v in verdicts:
        wrong = [c for c in v.contexts if not 1 <= c <= contexts]
        if wrong:
            return (
                f"claim {v.claim} names context {wrong[0]}: the contexts are numbered 1 to "
                f"{contexts}"
            )
        if v.verdict == "supported" and not v.contexts:
            return f"claim {v.claim} is 'supported' but names no context that supports it"
    return None


def read_statements(
    completion: Completion, cited: list[tuple[int, ...]]
) -> list[StatementVerdict] | Unscored:
    """One verdict per statement, in statement order, from a reply judging the statements
    whose cited context numbers are ``cited``; or Unscored saying what is wrong with it."""
    text = completion.text
    items = _listed(text, "statements")
    if isinstance(items, Unscored):
        return items
    try:
        verdicts = [StatementVerdict.model_validate(v) for v in items]
    except ValidationError as exc:
        return Unscored(reason=f"statements: {_problem(exc)}", raw=text)
    problem = _numbering([v.statement for v in verdicts], len(cited), "statement")
    for v in verdicts if problem is None else ():
        allowed = cited[v.statement - 1]
        wrong = [c for c in (*v.alone, *v.without) if c not in allowed]
        if wrong:
            problem = (
                f"statement {v.statement} names context {wrong[0]}, which it does not cite: "
                f"it cites {', '.join(map(str, allowed))}"
            )
        elif (v.alone or v.without) and not v.entailed:
            problem = (
                f"statement {v.statement}: 'alone' or 'without' says some of its contexts "
                "entail it, so the contexts it cites entail it: 'entailed' must be true"
            )
        if problem:
            break
    if problem:
        return Unscored(reason=problem, raw=text)
    return sorted(verdicts, key=lambda v: v.statement)
