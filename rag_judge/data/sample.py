"""Samples, contexts and datasets: the validated models every reader produces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

__all__ = ["Context", "Dataset", "Qrel", "Sample", "duplicate_id"]

_MODEL_CONFIG = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)

# What a field of a sample takes, in JSON's words, where its type does not say it all: for
# rag_judge.messages.input_problems, by field pattern.
SAMPLE_EXPECTED = {
    "id": "a non-empty string",
    "contexts": "a list of strings or of objects with keys id, text, score, relevance, "
    "doc_id, start, end",
    "contexts[]": "a string or an object with keys id, text, score, relevance, doc_id, start, end",
    "contexts[].id": "a doc id (a string or a number)",
    "contexts[].doc_id": "the id of the document the chunk was cut from",
    "contexts[].start": "a character offset into the document (an integer >= 0)",
    "contexts[].end": "a character offset into the document, past the chunk's last character",
    "contexts[].score": "a number (the retrieval score)",
    "contexts[].relevance": "a number (the context's relevance grade)",
    "references": "a string or a list of strings",
    "relevance": 'an object of doc id to grade, for every judged doc ({"d1": 2, "d7": 0})',
    "relevance.*": "a number (the doc's relevance grade)",
    "qrels": "a list of objects with keys doc_id, relevance and optionally start, end",
    "qrels[]": 'an object {"doc_id": "d1", "relevance": 2} or with "start" and "end" offsets',
    "qrels[].doc_id": "a document id (a string or a number)",
    "qrels[].relevance": "a number (the span's or document's relevance grade)",
    "qrels[].start": "a character offset into the document (an integer >= 0)",
    "qrels[].end": "a character offset into the document, past the span's last character",
    "answerable": "true or false (whether the question can be answered from the material)",
}


def _unset(value: object) -> bool:
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

    model_config = _MODEL_CONFIG

    id: str | None = None
    text: str = ""
    score: Number | None = None
    relevance: Number | None = None
    # Left out of a dump when unset, so reports of data without them stay as they were.
    doc_id: str | None = Field(default=None, exclude_if=_unset)
    start: Offset | None = Field(default=None, exclude_if=_unset)
    end: Offset | None = Field(default=None, exclude_if=_unset)

    @model_validator(mode="after")
    def _span(self) -> Context:
        _check_span("a context", self.doc_id, self.start, self.end)
        return self


class Qrel(BaseModel):
    """A relevance label on a whole document (no offsets) or on the characters
    ``[start, end)`` of one; mapped onto the retrieved chunks at run time."""

    model_config = _MODEL_CONFIG

    doc_id: str = Field(min_length=1)
    relevance: Number
    start: Offset | None = Field(default=None, exclude_if=_unset)
    end: Offset | None = Field(default=None, exclude_if=_unset)

    @model_validator(mode="after")
    def _span(self) -> Qrel:
        _check_span("a qrel", self.doc_id, self.start, self.end)
        return self


class Sample(BaseModel):
    """One question with what the RAG system retrieved and answered, and the gold data.

    ``contexts`` are in rank order. ``relevance`` maps doc id -> grade for every judged document
    of the query, retrieved or not; ``None`` means the sample carries no judgments at all, while
    ``{}`` means it was judged and nothing is relevant. ``qrels`` label documents or character
    spans of them instead (``rag_judge.data.chunks`` maps them onto the chunks).
    """

    model_config = _MODEL_CONFIG

    id: str = Field(min_length=1)
    question: str | None = None
    contexts: tuple[Context, ...] = ()
    answer: str | None = None
    references: tuple[str, ...] = ()
    relevance: dict[str, Number] | None = None
    qrels: tuple[Qrel, ...] | None = Field(default=None, exclude_if=_unset)
    answerable: Flag | None = None  # whether the material holds an answer (None: not said)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("contexts", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        # A list of plain strings is a common shape (ragas, LangChain): accept it as texts.
        if isinstance(value, list | tuple):
            return [{"text": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("references", mode="before")
    @classmethod
    def _single_reference(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique_context_ids(self) -> Sample:
        seen: set[str] = set()
        for ctx in self.contexts:
            if ctx.id is None:
                continue
            if ctx.id in seen:
                raise ValueError(
                    f"doc id {ctx.id!r} appears twice in the ranking of query {self.id!r}"
                )
            seen.add(ctx.id)
        return self

    def has_judgments(self) -> bool:
        """Whether anything grades the sample's retrieval: ``qrels``, ``relevance`` or a
        context's own ``relevance``."""
        return self.qrels is not None or self.judged_grades() is not None

    def judged_grades(self) -> dict[str, float] | None:
        """All judgments of the query: ``relevance`` plus grades carried by the contexts.

        ``None`` when neither the sample nor any of its contexts carries a judgment.
        """
        own = {
            c.id: c.relevance for c in self.contexts if c.id is not None and c.relevance is not None
        }
        if self.relevance is None and not own and not self._unnamed_grades():
            return None
        # A context's own grade is the more specific judgment, so it wins over the table.
        return {**(self.relevance or {}), **own}

    def _unnamed_grades(self) -> list[float]:
        return [c.relevance for c in self.contexts if c.id is None and c.relevance is not None]

    def ranked_grades(self) -> list[float]:
        """The grade of each retrieved context in rank order; unjudged contexts get 0."""
        table = self.relevance or {}
        out = []
        for ctx in self.contexts:
            if ctx.relevance is not None:
                out.append(float(ctx.relevance))
            else:
                out.append(float(table.get(ctx.id, 0.0)) if ctx.id is not None else 0.0)
        return out

    def ideal_grades(self) -> list[float]:
        """Every judged grade of the query, including contexts without an id that carry one."""
        return list((self.judged_grades() or {}).values()) + self._unnamed_grades()


class Dataset(BaseModel):
    """An ordered collection of samples with unique ids."""

    model_config = ConfigDict(frozen=True)

    samples: tuple[Sample, ...]
    source: str | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> Dataset:
        dup = duplicate_id(s.id for s in self.samples)
        if dup is not None:
            raise ValueError(f"sample id {dup!r} appears twice")
        return self

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:  # type: ignore[override]
        return iter(self.samples)

    def __getitem__(self, index: int) -> Sample:
        return self.samples[index]


def duplicate_id(ids: Iterable[str]) -> str | None:
    """The first id that appears a second time, or None when all are unique."""
    seen: set[str] = set()
    for sid in ids:
        if sid in seen:
            return sid
        seen.add(sid)
    return None
