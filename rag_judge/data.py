"""Samples, contexts and datasets, and the JSONL reader whose errors name file, line and field."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rag_judge.errors import DataError, validation_messages

__all__ = [
    "Context",
    "Dataset",
    "Sample",
    "gather_samples",
    "json_lines",
    "read_jsonl",
    "read_text",
    "write_jsonl",
]

_MODEL_CONFIG = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)


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
        seen: set[str] = set()
        for sample in self.samples:
            if sample.id in seen:
                raise ValueError(f"sample id {sample.id!r} appears twice")
            seen.add(sample.id)
        return self

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:  # type: ignore[override]
        return iter(self.samples)

    def __getitem__(self, index: int) -> Sample:
        return self.samples[index]

    @classmethod
    def from_samples(cls, samples: Sequence[Sample | dict[str, Any]]) -> Dataset:
        parsed = [s if isinstance(s, Sample) else Sample.model_validate(s) for s in samples]
        return cls(samples=tuple(parsed))


def read_text(path: Path) -> str:
    """A UTF-8 text file, with errors that name it."""
    try:
        return path.read_text(encoding="utf-8-sig")  # -sig: a byte-order mark is not data
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_jsonl(path: str | Path, *, skip_invalid: bool = False) -> Dataset:
    """Read one sample per line. Errors name ``file:line`` and the field.

    With ``skip_invalid`` a bad line is skipped with a warning instead of raising.
    """
    path = Path(path)
    parsed = ((str(n), partial(_to_sample, obj)) for n, obj in json_lines(read_text(path)))
    return gather_samples(path, parsed, skip_invalid=skip_invalid)


def gather_samples(
    path: Path, parsed: Iterable[tuple[str, Callable[[], Sample]]], *, skip_invalid: bool
) -> Dataset:
    """A dataset from (location, parse) pairs, where a location is a line number ("12") or a
    row ("row 3"). A parse that raises DataError, or a repeated sample id, is an error naming
    ``file:location``, or with ``skip_invalid`` a warning and a skipped sample."""
    samples: list[Sample] = []
    where_of: dict[str, str] = {}
    for where, parse in parsed:
        try:
            sample = parse()
            if sample.id in where_of:
                raise DataError(
                    f"field 'id': sample id {sample.id!r} already used on {where_of[sample.id]}"
                )
        except DataError as exc:
            message = f"{path}:{where}: {exc}"
            if not skip_invalid:
                raise DataError(message) from None
            warnings.warn(f"skipping invalid sample: {message}", stacklevel=3)
            continue
        where_of[sample.id] = where if where.startswith("row") else f"line {where}"
        samples.append(sample)
    if not samples:
        raise DataError(f"{path}: contains no samples")
    return Dataset(samples=tuple(samples), source=str(path))


def json_lines(text: str) -> Iterator[tuple[int, dict[str, Any] | DataError]]:
    """(line number, object) for each non-blank line of a JSON Lines text; a line that is not
    a JSON object comes as a DataError saying why, for the caller to place or skip."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, DataError(f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if isinstance(obj, dict):
            yield lineno, obj
        else:
            yield lineno, DataError(f"expected a JSON object, got {type(obj).__name__}")


def _to_sample(obj: dict[str, Any] | DataError) -> Sample:
    if isinstance(obj, DataError):
        raise obj
    try:
        return Sample.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(f"field '{loc}': {msg}" for loc, msg in validation_messages(exc))
        raise DataError(problems) from None


def write_jsonl(samples: Sequence[Sample], path: str | Path) -> None:
    """Write samples one per line, omitting fields left at their defaults."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for sample in samples:
            fh.write(sample.model_dump_json(exclude_defaults=True) + "\n")
