"""Samples, contexts and datasets: the validated models every reader produces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Context", "Dataset", "Sample", "duplicate_id"]

_MODEL_CONFIG = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)

# What a field of a sample takes, in JSON's words, where its type does not say it all: for
# rag_judge.errors.input_problems, by field pattern.
SAMPLE_EXPECTED = {
    "id": "a non-empty string",
    "contexts": "a list of strings or of objects with keys id, text, score, relevance",
    "contexts[]": "a string or an object with keys id, text, score, relevance",
    "contexts[].id": "a doc id (a string or a number)",
    "contexts[].score": "a number (the retrieval score)",
    "contexts[].relevance": "a number (the context's relevance grade)",
    "references": "a string or a list of strings",
    "relevance": 'an object of doc id to grade, for every judged doc ({"d1": 2, "d7": 0})',
    "relevance.*": "a number (the doc's relevance grade)",
    "answerable": "true or false (whether the question can be answered from the material)",
}


class Context(BaseModel):
    """One retrieved chunk. ``relevance`` is its own graded judgment, when the data carries one."""

    model_config = _MODEL_CONFIG

    id: str | None = None
    text: str = ""
    score: float | None = None
    relevance: float | None = None


class Sample(BaseModel):
    """One question with what the RAG system retrieved and answered, and the gold data.

    ``contexts`` are in rank order. ``relevance`` maps doc id -> grade for every judged document
    of the query, retrieved or not; ``None`` means the sample carries no judgments at all, while
    ``{}`` means it was judged and nothing is relevant.
    """

    model_config = _MODEL_CONFIG

    id: str = Field(min_length=1)
    question: str | None = None
    contexts: tuple[Context, ...] = ()
    answer: str | None = None
    references: tuple[str, ...] = ()
    relevance: dict[str, float] | None = None
    answerable: bool | None = None  # whether the material holds an answer (None: not said)
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
