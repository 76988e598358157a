"""JSON inside a judge's reply, whatever the reply was asked for: a rubric score, a pairwise
winner, claims.

It finds fenced blocks and balanced ``{...}`` (braces inside strings skipped). It closes the
object a reply cut off at ``max_tokens`` left open. It repairs near-JSON (single quotes,
trailing commas). ``schema_valid`` tells whether a whole reply is JSON that a schema accepts,
for the subset of JSON Schema the judge's schemas use. None of it knows what a score is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FENCE",
    "JSON_START",
    "Cut",
    "braced",
    "conforms",
    "lenient_loads",
    "scan",
    "schema_valid",
]

FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Cut:
    """The top-level object a cut-off reply leaves open: ``text`` from its ``{`` on, with a
    string cut mid-way closed (a dangling escape dropped), and how many braces are open."""

    text: str
    offset: int
    depth: int

    def closed(self) -> tuple[str, str]:
        """The object closed as it stands, and with a dangling key (``, "score":``) dropped;
        ``lenient_loads`` drops a trailing comma."""
        braces = "}" * self.depth
        return self.text + braces, _DANGLING_KEY.sub("", self.text) + braces


JSON_START = re.compile(r"""\{\s*["']""")
# A key left without its value at the end of a cut-off object: `, "score":` or `, "sco"`.
_DANGLING_KEY = re.compile(r"""(?:,|(?<=\{))\s*(?:"[^"]*"|'[^']*')\s*:?\s*$""")


def scan(text: str) -> tuple[list[tuple[str, int]], Cut | None]:
    """Balanced top-level ``{...}`` substrings with their offsets, skipping braces inside quoted
    strings, and the object left open at the end of the text (None when all are closed)."""
    out, depth, start, quote, escaped = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'" and depth > 0:
            quote = ch
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append((text[start : i + 1], start))
    if depth == 0:
        return out, None
    tail = text[start:-1] if escaped else text[start:]
    tail = tail + quote if quote else tail.rstrip()
    return out, Cut(tail, start, depth)


def braced(text: str) -> list[tuple[str, int]]:
    """Balanced top-level ``{...}`` substrings, skipping braces inside quoted strings."""
    return scan(text)[0]


def lenient_loads(chunk: str) -> Any:
    """The object ``chunk`` holds, read as JSON or as repaired near-JSON; None when it is no
    ``{...}`` or cannot be read."""
    chunk = chunk.strip()
    if not chunk.startswith("{"):
        return None
    for attempt in (chunk, _repair(chunk)):
        try:
            return json.loads(attempt)
        except ValueError:
            continue
    return None


def _repair(chunk: str) -> str:
    """Cheap fixes for near-JSON: trailing commas, single quotes when no double quote is used."""
    fixed = re.sub(r",\s*([}\]])", r"\1", chunk)
    if '"' not in fixed:
        fixed = fixed.replace("'", '"')
    return fixed


_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "number": int | float,
    "integer": int | float,
    "boolean": bool,
}


def conforms(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether a parsed JSON value conforms to ``schema``: ``type``, ``properties``,
    ``required``, ``additionalProperties: false`` and ``enum``."""
    kind = schema.get("type")
    if isinstance(kind, str):
        expected = _TYPES.get(kind)
        if expected is not None and not isinstance(value, expected):
            return False
        if kind in {"number", "integer"} and isinstance(value, bool):
            return False
        if kind == "integer" and not float(value).is_integer():
            return False
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return False
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        if any(key not in value for key in schema.get("required") or ()):
            return False
        if schema.get("additionalProperties") is False and any(k not in properties for k in value):
            return False
        return all(conforms(value[k], sub) for k, sub in properties.items() if k in value)
    return True


def schema_valid(text: str, schema: Mapping[str, Any]) -> bool:
    """Whether the whole of ``text`` is JSON that ``schema`` accepts: a reply that needed
    none of the lenient reading. The schema is read as ``conforms`` reads it."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return conforms(value, schema)


def _same(value: Any, option: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    return isinstance(value, bool) == isinstance(option, bool) and value == option
