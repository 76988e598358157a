"""Exceptions raised for bad user input. Each message names where the problem is.

The messages that translate pydantic's errors into a user's words are in
``rag_judge.messages``.
"""

from __future__ import annotations

__all__ = ["ConfigError", "DataError", "RagJudgeError", "format_loc"]


class RagJudgeError(Exception):
    """Base class of every error rag-judge raises on purpose."""


class DataError(RagJudgeError, ValueError):
    """A dataset, qrels or run file that cannot be read as given."""


class ConfigError(RagJudgeError, ValueError):
    """An experiment config or evaluator option that is not valid.

    ``loc`` is the key path of the option at fault, where it is known. An evaluator gives
    ``("client", "api_key_env")``. Once the pipeline has said which evaluator, it reads
    ``("evaluators", 3, "client", "api_key_env")``. A caller that knows the YAML file can then
    add its line.
    """

    def __init__(self, message: str, *, loc: tuple[int | str, ...] = ()) -> None:
        super().__init__(message)
        self.loc = loc


def format_loc(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a dotted path with list indices: ``contexts[0].id``.
    The object itself (an empty location) is ""."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
