"""Pairwise verdicts: reading "which answer is better" replies and mapping two orders to A/B.

A verdict is ``{"reason": ..., "winner": "1" | "2" | "tie"}``; the tolerant reader also accepts
fenced JSON, JSON inside prose and "Winner: 2". A client that scores labels (the local model)
is asked for the next token after ``Winner: `` instead, and the verdict is the most likely of
the labels "1", "2", "tie" under its distribution (recorded with the verdict), so nothing is
generated. Asked in both orders, two verdicts that disagree count as a tie (the verdict
followed the position, not the answer).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from rag_judge.judge.reply_json import FENCE, braced, lenient_loads
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion

__all__ = [
    "PAIRWISE_SCHEMA",
    "PAIRWISE_SHAPE",
    "WINNER_LABELS",
    "WINNER_PREFIX",
    "Order",
    "Preference",
    "Side",
    "Winner",
    "combine",
    "outcome_values",
    "parse_preference",
    "read_preference",
    "to_side",
]

Winner = Literal["1", "2", "tie"]
Side = Literal["A", "B", "tie"]
Order = Literal["AB", "BA"]

PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "winner": {"type": "string", "enum": ["1", "2", "tie"]},
    },
    "required": ["reason", "winner"],
    "additionalProperties": False,
}
PAIRWISE_SHAPE = '{"reason": "<one or two sentences>", "winner": "1" | "2" | "tie"}'
# A scoring client reads its distribution over these labels at the token after WINNER_PREFIX.
WINNER_LABELS: tuple[Winner, ...] = ("1", "2", "tie")
WINNER_PREFIX = "Winner: "

# ---- reading a verdict ------------------------------------------------------------------------

_KEYS = {"winner", "better", "preferred", "preference", "choice"}
_WORDS: dict[str, Winner] = {"1": "1", "2": "2", "tie": "tie", "draw": "tie", "equal": "tie"}
_PREFIX = re.compile(r"^(?:answer|response)[\s_#-]*")
_PROSE = re.compile(
    r"\b(?:winner|better answer)\b\**\s*(?:is|=|:)?\s*\**\s*[\"']?(?:answer\s*)?(1|2|tie|draw)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Preference:
    """A readable verdict: the position that won (or a tie), the judge's reason, and for a
    scoring client its distribution over "1", "2", "tie"."""

    winner: Winner
    reason: str
    probs: dict[str, float] | None = None


def _winner(value: Any) -> Winner | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value in (1, 2):
        return "1" if value == 1 else "2"
    if isinstance(value, str):
        return _WORDS.get(_PREFIX.sub("", value.strip().strip("*\"'. ").lower()))
    return None


def parse_preference(text: str) -> Preference | Unscored:
    """Read a ``{"reason", "winner": "1"|"2"|"tie"}`` reply tolerantly (fences, text around the
    JSON, single quotes, trailing commas, ``Winner: 2`` prose). Never raises."""
    if not text or not text.strip():
        return Unscored(reason="empty reply", raw=text)
    chunks = [text, *(m.group(1) for m in FENCE.finditer(text)), *(c for c, _ in braced(text))]
    for chunk in chunks:
        obj = lenient_loads(chunk)
        key = (
            next((k for k in obj if str(k).strip().lower() in _KEYS), None)
            if isinstance(obj, dict)
            else None
        )
        if obj is None or key is None:
            continue
        reason = next((v for k, v in obj.items() if str(k).lower() in {"reason", "reasoning"}), "")
        reason = reason if isinstance(reason, str) else json.dumps(reason, ensure_ascii=False)
        winner = _winner(obj[key])
        if winner is None:
            return Unscored(reason=f'winner {obj[key]!r} is not one of "1", "2", "tie"', raw=text)
        return Preference(winner, reason.strip())
    bare = _winner(text)
    found = {_winner(m.group(1)) for m in _PROSE.finditer(text)} if bare is None else {bare}
    if not found:
        return Unscored(
            reason="no JSON object with a 'winner' and no 'Winner: 1|2|tie' in the reply", raw=text
        )
    if len(found) > 1:
        listed = ", ".join(sorted(str(w) for w in found))
        return Unscored(reason=f"ambiguous: the reply names several winners ({listed})", raw=text)
    winner = found.pop()
    assert winner is not None  # the prose pattern only captures readable winners
    return Preference(winner, text.strip() if bare is None else "")


def read_preference(completion: Completion) -> Preference | Unscored:
    """One reply as a verdict: from the client's distribution over the winner labels when it
    sent one, else from its text (``parse_preference``)."""
    probs = _winner_probs(completion.score_probs or {})
    if probs is None:
        return parse_preference(completion.text)
    winner = max(WINNER_LABELS, key=lambda w: probs[w])  # ties go to the earlier label
    shown = ", ".join(f"{w} {p:.2f}" for w, p in probs.items())
    return Preference(winner, f"most likely verdict; P({shown})", probs)


def _winner_probs(probs: Mapping[str, float]) -> dict[str, float] | None:
    """The distribution over "1", "2", "tie", renormalised; None without mass on them."""
    mass = {w: float(probs.get(w, 0.0)) for w in WINNER_LABELS}
    mass = {w: p if p > 0 and math.isfinite(p) else 0.0 for w, p in mass.items()}
    total = math.fsum(mass.values())
    return {w: p / total for w, p in mass.items()} if total > 0 else None


# ---- outcomes ---------------------------------------------------------------------------------


def to_side(winner: Winner, order: Order) -> Side:
    """The variant a positional verdict names: in order "BA", ANSWER 1 is B."""
    if winner == "tie":
        return "tie"
    first_is_a = (order == "AB") == (winner == "1")
    return "A" if first_is_a else "B"


def combine(ab: Side, ba: Side) -> tuple[Side, bool]:
    """The pair's outcome from its two mapped verdicts, and whether they agree. Disagreement
    (the verdict changed with the order) is a tie: neither answer won on its merits."""
    return (ab, True) if ab == ba else ("tie", False)


def outcome_values(outcomes: Sequence[Side]) -> NDArray[np.float64]:
    """Per pair: 1 for a B win, 0.5 for a tie, 0 for an A win (their mean is B's win rate)."""
    points = {"B": 1.0, "tie": 0.5, "A": 0.0}
    return np.array([points[o] for o in outcomes], dtype=np.float64)
