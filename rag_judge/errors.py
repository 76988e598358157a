"""Exceptions raised for bad user input. Each message names where the problem is."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

__all__ = [
    "ConfigError",
    "DataError",
    "RagJudgeError",
    "cli_error",
    "format_loc",
    "friendly_message",
    "validation_messages",
]


class RagJudgeError(Exception):
    """Base class of every error rag-judge raises on purpose."""


class DataError(RagJudgeError, ValueError):
    """A dataset, qrels or run file that cannot be read as given."""


class ConfigError(RagJudgeError, ValueError):
    """An experiment config or evaluator option that is not valid.

    ``loc`` is the key path of the option at fault where it is known (``("client",
    "api_key_env")`` from an evaluator, ``("evaluators", 3, "client", "api_key_env")`` once the
    pipeline has said which evaluator), so a caller that knows the YAML file can add its line.
    """

    def __init__(self, message: str, *, loc: tuple[int | str, ...] = ()) -> None:
        super().__init__(message)
        self.loc = loc


def format_loc(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a dotted path with list indices: ``contexts[0].id``;
    "" for the object itself (an empty location)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# pydantic's words for a wrong type, in the words of YAML and JSON, which have lists and
# mappings (not tuples, sets, dictionaries or model instances).
_LIST_TYPES = {"list_type", "tuple_type", "set_type", "frozen_set_type", "iterable_type"}
_MAPPING_TYPES = {"dict_type", "model_type", "model_attributes_type", "dataclass_type"}


def friendly_message(err: Mapping[str, Any]) -> str:
    """One pydantic error's message for a user: no "Value error, " prefix, no tuple, set or
    class names (YAML and JSON have lists and mappings)."""
    msg = _message(err)
    kind = err.get("type")
    if kind in _LIST_TYPES:
        return "expected a list"
    if kind in _MAPPING_TYPES:
        return "expected a mapping of keys to values"
    if kind in ("too_short", "too_long"):
        msg = re.sub(r"^(Tuple|Set|Frozenset)\b", "List", msg)
        msg = msg.replace(" after validation", "")
    return msg


def validation_messages(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) for every problem in a pydantic ValidationError, in pydantic's
    words; the path is "<root>" for the object itself."""
    return [
        (format_loc(tuple(err["loc"])) or "<root>", _message(err))
        for err in exc.errors(include_url=False)
    ]


def _message(err: Mapping[str, Any]) -> str:
    """pydantic's message without the "Value error, " its validators' errors get."""
    return str(err["msg"]).removeprefix("Value error, ")


def cli_error(exc: ValidationError, options: Mapping[str, str] | None = None) -> ConfigError:
    """A ConfigError naming the command-line option behind each problem of a model built from
    options: the option ``options`` maps the field to, by default ``--field-name`` for field
    ``field_name``; a problem of the whole object is its message alone."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        msg = friendly_message(err)
        if not loc:
            problems.append(msg)
            continue
        field = str(loc[0])
        option = (options or {}).get(field) or "--" + field.replace("_", "-")
        rest = format_loc(loc[1:])
        problems.append(f"{option}{'.' + rest if rest and rest[0] != '[' else rest}: {msg}")
    return ConfigError("; ".join(problems))
