"""Exceptions raised for bad user input. Each message names where the problem is."""

from __future__ import annotations

from pydantic import ValidationError


class RagJudgeError(Exception):
    """Base class of every error rag-judge raises on purpose."""


class DataError(RagJudgeError, ValueError):
    """A dataset, qrels or run file that cannot be read as given."""


class ConfigError(RagJudgeError, ValueError):
    """An experiment config or evaluator option that is not valid."""


def format_loc(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a dotted path with list indices: ``contexts[0].id``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def validation_messages(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) for every problem in a pydantic ValidationError."""
    items = []
    for err in exc.errors(include_url=False):
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        items.append((format_loc(tuple(err["loc"])), msg))
    return items
