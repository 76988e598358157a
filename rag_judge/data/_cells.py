"""The cells of a dataset row as Python values: CSV text, decoded JSON or Arrow values made
one shape (missing values None, list and object cells decoded), for validation to judge."""

from __future__ import annotations

import ast
import json
import math
from typing import Any, Literal

from rag_judge.errors import DataError
from rag_judge.messages import describe_value

__all__ = [
    "Source",
    "decode",
    "flag",
    "id_list",
    "missing_to_none",
    "or_default",
    "references",
    "structured",
]

# The kind of cell a reader yields: CSV text, decoded JSON, or Arrow values (struct fields that
# a row lacks come back as None, so those are dropped).
Source = Literal["text", "json", "arrow"]
# Fields holding an object: an empty Arrow map reads back as [], which means {} here.
_OBJECT_FIELDS = ("relevance", "metadata", "rubrics")


def or_default(value: Any, default: Any) -> Any:
    """``default`` for a missing value; anything else as it is, for validation to judge."""
    return default if value is None else value


def id_list(value: Any, field: str, source: Source) -> list[Any] | None:
    """A column of doc ids: a list, or None when missing."""
    ids = structured(value, field, source)
    if ids is not None and not isinstance(ids, list):
        raise DataError(f"field '{field}': expected a list of doc ids, got {describe_value(ids)}")
    return ids


def missing_to_none(value: Any, source: Source) -> Any:
    if source == "text" and isinstance(value, str) and not value.strip():
        return None  # CSV cannot tell an empty string from a missing one
    if isinstance(value, float) and math.isnan(value):
        return None  # pandas writes a missing value of a number column as NaN
    return value


def flag(value: Any, source: Source) -> Any:
    """A CSV cell is text: ``true`` or ``false`` in any case (pandas writes True and False) is
    the boolean; anything else is left for validation to name ("no", "1": no guessing)."""
    if source == "text" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def references(value: Any, source: Source) -> Any:
    # A text cell holds one reference, or several as a JSON list.
    if isinstance(value, str) and value.lstrip().startswith("[") and source != "json":
        return decode(value, "references")
    return () if value is None else value


def structured(value: Any, field: str, source: Source) -> Any:
    """A list or object cell: JSON text in a CSV (or a Parquet string column), else native."""
    if isinstance(value, str) and source != "json":
        value = decode(value, field)
    if source == "arrow":
        value = _from_arrow(value)
        if value == [] and field in _OBJECT_FIELDS:
            value = {}
    return value


def decode(text: str, field: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        error = f"{exc.msg} at column {exc.colno}"
    try:  # pandas' to_csv writes list cells as Python reprs: ['a', 'b']
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise DataError(f"field '{field}': not valid JSON ({error})") from None
    if not isinstance(value, list | dict | tuple):
        raise DataError(f"field '{field}': not valid JSON ({error})")
    return value


def _from_arrow(value: Any) -> Any:
    """Arrow structs come back with every field of the column's type, None where a row lacks
    it; a map comes back as (key, value) pairs. Both become plain dicts of present values."""
    if isinstance(value, dict):
        return {k: _from_arrow(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {k: _from_arrow(v) for k, v in value if v is not None}
        return [_from_arrow(v) for v in value]
    return value
