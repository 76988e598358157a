"""Human chunk grades in a label file: the reserved key ``relevance`` of a line.

A line may grade the sample's ranked chunks on the dataset's 0-3 relevance scale, either by
rank position (``{"id": "q07", "relevance": [2, 0, 1, 0, 3]}``) or by context id
(``{"id": "q07", "relevance": {"doc-12": 2, "doc-7": 0}}``). The rubric labels of the same
line are :func:`rag_judge.analysis.calibration.load_labels`'s, which skips this key. Errors
name ``file:line`` and the field (``relevance[2]``), as the rubric labels' do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_judge.data.jsonl import json_lines, read_text
from rag_judge.data.readers import load_dataset
from rag_judge.errors import DataError
from rag_judge.messages import describe_value

__all__ = [
    "GRADES",
    "RELEVANCE_KEY",
    "ChunkGrades",
    "by_rank",
    "load_relevance",
    "parse_relevance",
    "relevance_from_dataset",
]

RELEVANCE_KEY = "relevance"
GRADES = (0, 1, 2, 3)  # the dataset's relevance scale, as the judge's 1-5 maps onto it


@dataclass(frozen=True)
class ChunkGrades:
    """One query's human grades: a list by rank, or a mapping by context id; ``where`` says
    where they were read (``labels.jsonl:7``), for the messages about them."""

    grades: tuple[int, ...] | Mapping[str, int]
    where: str


def parse_relevance(value: Any) -> tuple[int, ...] | dict[str, int]:
    """A ``relevance`` value checked: a non-empty list or mapping of 0-3 integers."""
    if isinstance(value, list):
        if not value:
            raise DataError(f"field {RELEVANCE_KEY!r}: an empty list grades no chunk")
        return tuple(_grade(f"{RELEVANCE_KEY}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, dict):
        if not value:
            raise DataError(f"field {RELEVANCE_KEY!r}: an empty mapping grades no chunk")
        return {str(k): _grade(f"{RELEVANCE_KEY}[{k!r}]", v) for k, v in value.items()}
    raise DataError(
        f"field {RELEVANCE_KEY!r}: expected a list of 0-3 grades by rank or a mapping of "
        f"context id -> grade, got {describe_value(value)}"
    )


def _grade(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"field {field!r}: expected a grade 0-3 (a number), got {value!r}")
    if not float(value).is_integer() or int(value) not in GRADES:
        raise DataError(f"field {field!r}: {value!r} is not a relevance grade 0-3")
    return int(value)


def load_relevance(path: str | Path) -> dict[str, ChunkGrades]:
    """The ``relevance`` grades of a label file, by sample id (empty when no line has any).
    A CSV file cannot hold them: its header naming ``relevance`` is an error."""
    path = Path(path)
    text = read_text(path)
    if path.suffix.lower() == ".csv":
        header = text.splitlines()[0].split(",") if text else []
        if RELEVANCE_KEY in (h.strip() for h in header):
            raise DataError(
                f"{path}:1: column {RELEVANCE_KEY!r}: chunk grades are a list or a mapping; "
                "write them in a .jsonl label file"
            )
        return {}
    out: dict[str, ChunkGrades] = {}
    for lineno, obj in json_lines(text.splitlines()):
        if isinstance(obj, DataError) or RELEVANCE_KEY not in obj:
            continue  # load_labels reports a bad line
        value = obj[RELEVANCE_KEY]
        if value is None:
            continue
        try:
            grades = parse_relevance(value)
        except DataError as exc:
            raise DataError(f"{path}:{lineno}: {exc}") from None
        sid = obj.get("id")
        out[str(sid)] = ChunkGrades(grades, f"{path}:{lineno}")
    return out


def relevance_from_dataset(path: str | Path, column: str) -> dict[str, ChunkGrades]:
    """The grades kept in the dataset: each sample's ``metadata[column]["relevance"]``."""
    out: dict[str, ChunkGrades] = {}
    for sample in load_dataset(path):
        row = sample.metadata.get(column)
        if not isinstance(row, dict) or row.get(RELEVANCE_KEY) is None:
            continue
        where = f"{path}: sample {sample.id!r}: metadata.{column}"
        try:
            out[sample.id] = ChunkGrades(parse_relevance(row[RELEVANCE_KEY]), where)
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None
    return out


def by_rank(labels: ChunkGrades, context_ids: Sequence[str | None], depth: int) -> list[int]:
    """The human grades of the top ``depth`` ranked chunks (every graded chunk if more), in
    rank order. A DataError (its message for a warning) when they do not cover the top
    ``depth``: a partial grading would count an ungraded chunk as irrelevant."""
    need = min(depth, len(context_ids))
    if isinstance(labels.grades, tuple):
        grades = list(labels.grades)
        if len(grades) > len(context_ids):
            raise DataError(
                f"{labels.where}: field {RELEVANCE_KEY!r}: {len(grades)} grades for "
                f"{len(context_ids)} retrieved chunks"
            )
    else:
        unknown = [c for c in labels.grades if c not in context_ids]
        if unknown:
            raise DataError(
                f"{labels.where}: field {RELEVANCE_KEY}[{unknown[0]!r}]: no retrieved chunk "
                "of the sample has that id"
            )
        grades = []
        for cid in context_ids:
            if cid is None or cid not in labels.grades:
                break
            grades.append(labels.grades[cid])
    if len(grades) < need:
        raise DataError(
            f"{labels.where}: field {RELEVANCE_KEY!r}: grades {len(grades)} of the top {need} "
            f"chunks in rank order; grade every chunk of the top {need}"
        )
    return grades
