"""The stub judge's rule for the tools evaluator's ``args: judge`` requests: two calls'
arguments are equivalent when they are equal after a light normalisation.

Deterministic and free, it checks the plumbing; it knows no synonyms ("SF" is not "San
Francisco" to it). The normalisation, applied to every value inside the arguments:

- a string is case-folded, its runs of whitespace made one space, and trimmed;
- a string that reads as a JSON number is that number (``"10"`` is ``10``);
- an integral number is an integer (``2.0`` is ``2``);
- keys are compared as they are; ``true`` is not ``1``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rag_judge.llm.base import CompletionRequest
from rag_judge.llm.sections import parse_sections

__all__ = ["CALLED", "EXPECTED", "arguments_stub", "asks_arguments", "loose"]

# The sections the arguments prompt shows (prompts/_tool_arguments.j2).
CALLED, EXPECTED = "CALLED ARGUMENTS", "EXPECTED ARGUMENTS"
_SPACE = re.compile(r"\s+")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _prompt(request: CompletionRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def asks_arguments(request: CompletionRequest) -> bool:
    """Whether ``request`` asks if two calls' arguments are equivalent: its JSON schema has an
    ``equivalent``, or, without a schema, its prompt shows both arguments sections."""
    if request.json_schema is not None:
        return "equivalent" in (request.json_schema.get("properties") or {})
    sections = parse_sections(_prompt(request))
    return CALLED in sections and EXPECTED in sections


def loose(value: Any) -> Any:
    """``value`` normalised as the module says."""
    if isinstance(value, dict):
        return {k: loose(v) for k, v in value.items()}
    if isinstance(value, list):
        return [loose(v) for v in value]
    if isinstance(value, str):
        text = _SPACE.sub(" ", value).strip()
        return loose(json.loads(text)) if _JSON_NUMBER.fullmatch(text) else text.casefold()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def arguments_stub(request: CompletionRequest) -> str:
    """``{"reason", "equivalent"}``: equivalent when both sections hold JSON objects that
    are equal after ``loose``; the reason names the first argument that differs."""
    sections = parse_sections(_prompt(request))
    try:
        called = loose(json.loads(sections.get(CALLED, "")))
        expected = loose(json.loads(sections.get(EXPECTED, "")))
    except ValueError:
        return json.dumps({"reason": "the arguments are not JSON", "equivalent": False})
    if not isinstance(called, dict) or not isinstance(expected, dict):
        return json.dumps({"reason": "the arguments are not JSON objects", "equivalent": False})
    if _text(called) == _text(expected):
        reason = "equal after normalising case, spacing and number formatting"
        return json.dumps({"reason": reason, "equivalent": True})
    keys = sorted(set(called) | set(expected))
    differs = next(k for k in keys if _text(called.get(k)) != _text(expected.get(k)))
    if differs not in called or differs not in expected:
        reason = f"argument {differs!r} is given in only one of the calls"
    else:
        reason = f"argument {differs!r} differs after normalising case, spacing and numbers"
    return json.dumps({"reason": reason, "equivalent": False}, ensure_ascii=False)
