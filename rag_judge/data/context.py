"""A retrieved chunk (:class:`Context`), a relevance label (:class:`Qrel`), and the strict
number, offset and flag types every data model shares (samples and conversation turns)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

__all__ = [
    "MODEL_CONFIG",
    "Context",
    "Flag",
    "Number",
    "Offset",
    "Qrel",
    "one_or_many",
    "repeated_doc_id",
    "texts_as_contexts",
    "unset",
]

MODEL_CONFIG = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)


def unset(value: object) -> bool:
    """Whether a field is unset: such fields are left out of a dump (``exclude_if``), so data
    without them serializes as it did before they existed."""
    return value is None


def _native(value: Any) -> Any:
    # A numpy scalar (a retriever's float32 score, pandas' bool_) is its Python value.
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def _integral(value: Any) -> Any:
    # An offset written as 3.0 (pandas turns an integer column with gaps into floats) is 3.
    value = _native(value)
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Numbers and booleans come as JSON numbers and booleans. A string where one belongs ("3",
# "no") is an error naming the field, never a guess: lax parsing read "no" as false and "3" as
# a grade. An integer is a number; an integral float is an offset. (CSV cells are text: the CSV
# reader turns an `answerable` cell of true/false into a boolean, and structured cells are JSON.)
Number = Annotated[float, Field(strict=True), BeforeValidator(_native)]
Offset = Annotated[int, Field(strict=True, ge=0), BeforeValidator(_integral)]
Flag = Annotated[bool, Field(strict=True), BeforeValidator(_native)]


def _check_span(owner: str, doc_id: str | None, start: int | None, end: int | None) -> None:
    if (start is None) != (end is None):
        raise ValueError(f"{owner} needs both 'start' and 'end', or neither")
    if start is not None and doc_id is None:
        raise ValueError(f"{owner} with offsets needs the 'doc_id' they point into")
    if start is not None and end is not None and not 0 <= start < end:
        raise ValueError(f"{owner} needs 0 <= start < end, got start={start}, end={end}")


class Context(BaseModel):
    """One retrieved chunk. ``relevance`` is its own graded judgment, when the data carries one;
    ``doc_id`` and the character offsets ``[start, end)`` say where in a document it was cut
    from, so span- and document-level labels (``Sample.qrels``) survive re-chunking."""

    model_config = MODEL_CONFIG

    id: str | None = None
    text: str = ""
    score: Number | None = None
    relevance: Number | None = None
    # Left out of a dump when unset, so reports of data without them stay as they were.
    doc_id: str | None = Field(default=None, exclude_if=unset)
    start: Offset | None = Field(default=None, exclude_if=unset)
    end: Offset | None = Field(default=None, exclude_if=unset)

    @model_validator(mode="after")
    def _span(self) -> Context:
        _check_span("a context", self.doc_id, self.start, self.end)
        return self


class Qrel(BaseModel):
    """A relevance label on a whole document (no offsets) or on the characters
    ``[start, end)`` of one; mapped onto the retrieved chunks at run time."""

    model_config = MODEL_CONFIG

    doc_id: str = Field(min_length=1)
    relevance: Number
    start: Offset | None = Field(default=None, exclude_if=unset)
    end: Offset | None = Field(default=None, exclude_if=unset)

    @model_validator(mode="after")
    def _span(self) -> Qrel:
        _check_span("a qrel", self.doc_id, self.start, self.end)
        return self


def texts_as_contexts(value: Any) -> Any:
    """A list of plain strings is a common shape of contexts (ragas, LangChain): each string is
    a context's text."""
    if isinstance(value, list | tuple):
        return [{"text": v} if isinstance(v, str) else v for v in value]
    return value


def one_or_many(value: Any) -> Any:
    """A single string where a list of strings belongs (``references``) is a list of one."""
    return [value] if isinstance(value, str) else value


def repeated_doc_id(contexts: tuple[Context, ...]) -> str | None:
    """The first doc id that appears twice in a ranking, or None."""
    seen: set[str] = set()
    for ctx in contexts:
        if ctx.id is None:
            continue
        if ctx.id in seen:
            return ctx.id
        seen.add(ctx.id)
    return None
