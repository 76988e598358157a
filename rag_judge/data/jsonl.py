"""JSON-lines datasets: reading (file:line errors, byte-order mark tolerated) and writing."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag_judge.data._files import read_text
from rag_judge.data.sample import SAMPLE_EXPECTED, Dataset, Sample
from rag_judge.errors import DataError
from rag_judge.messages import describe_value, input_problems

__all__ = ["gather_samples", "json_lines", "read_jsonl", "read_lines", "read_text", "write_jsonl"]


def read_lines(path: Path) -> Generator[str, None, None]:
    """The lines of a UTF-8 text file, read as they are consumed (a million-sample file is
    never one string), with errors that name it and the line."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a BOM is not data
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path}:{lineno}: not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from None
            yield line


def read_jsonl(path: str | Path, *, skip_invalid: bool = False) -> Dataset:
    """Read one sample per line. Errors name ``file:line`` and the field.

    With ``skip_invalid`` a bad line is skipped with a warning instead of raising.
    """
    path = Path(path)
    parsed = ((str(n), partial(_to_sample, obj)) for n, obj in json_lines(read_lines(path)))
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


def json_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any] | DataError]]:
    """(line number, object) for each non-blank line of JSON Lines; a line that is not a JSON
    object comes as a DataError saying why, for the caller to place or skip."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        # Without its line break: JSON counts a newline as a line, so an error at the end of a
        # truncated line would read "line 2, column 1" instead of the column where it stops.
        text = line.rstrip("\r\n")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            yield lineno, DataError(_json_error(exc, text))
            continue
        if isinstance(obj, dict):
            yield lineno, obj
        else:
            yield (
                lineno,
                DataError(
                    f"expected a JSON object (one sample per line), got {describe_value(obj)}"
                ),
            )


def _json_error(exc: json.JSONDecodeError, text: str) -> str:
    """``invalid JSON: Expecting ',' delimiter (column 11)``, saying so when the error is at
    the line's end: a line cut short (a partial write, a file truncated while copied)."""
    message = f"invalid JSON: {exc.msg} (column {exc.colno})"
    if exc.msg.startswith("Unterminated string"):
        message += "; the line ends inside that string: is it cut short?"
    elif exc.pos >= len(text.rstrip()):
        message += ", where the line ends: is it cut short?"
    return message


def _to_sample(obj: dict[str, Any] | DataError) -> Sample:
    if isinstance(obj, DataError):
        raise obj
    try:
        return Sample.model_validate(obj)
    except ValidationError as exc:
        problems = input_problems(exc, Sample, expected=SAMPLE_EXPECTED)
        raise DataError("; ".join(map(str, problems))) from None


def write_jsonl(samples: Sequence[Sample], path: str | Path) -> None:
    """Write samples one per line, omitting fields left at their defaults."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for sample in samples:
            fh.write(sample.model_dump_json(exclude_defaults=True) + "\n")
