"""Dataset loaders for JSONL, CSV and Parquet, in rag-judge's own layout or in ragas' layout.

Every reader ends in :class:`rag_judge.data.Sample` validation, so one set of rules holds for all
formats; errors name ``file:line`` (JSONL, CSV) or ``file:row N`` (Parquet) and the field.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from rag_judge.data.jsonl import gather_samples, json_lines, read_jsonl, read_lines, read_text
from rag_judge.data.sample import SAMPLE_EXPECTED, Dataset, Sample
from rag_judge.errors import DataError
from rag_judge.messages import describe_value, did_you_mean, input_problems

__all__ = ["FORMATS", "LAYOUTS", "load_dataset", "read_csv", "read_parquet"]

Format = Literal["jsonl", "csv", "parquet"]
Layout = Literal["rag-judge", "ragas"]
FORMATS: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
LAYOUTS: tuple[Layout, ...] = ("rag-judge", "ragas")

# Columns of each layout. A ragas column that rag-judge has no field for is kept in metadata.
_OWN_COLUMNS = (
    "id", "question", "answer", "references", "contexts", "relevance", "qrels", "answerable",
    "metadata",
)  # fmt: skip
_RAGAS_RENAMES = {
    "user_input": "question",
    "response": "answer",
    "retrieved_contexts": "contexts",
    "reference": "references",
}
_RAGAS_IDS = ("retrieved_context_ids", "reference_context_ids")
_RAGAS_EXTRAS = (
    "reference_contexts",
    "multi_responses",
    "rubrics",
    "persona_name",
    "query_style",
    "query_length",
    "synthesizer_name",
)
_RAGAS_STRUCTURED = ("reference_contexts", "multi_responses", "rubrics")
_RAGAS_COLUMNS = ("id", *_RAGAS_RENAMES, *_RAGAS_IDS, *_RAGAS_EXTRAS)
# What a ragas column takes, by the pattern of the sample field it becomes (see _ragas_field).
_RAGAS_EXPECTED = {
    **SAMPLE_EXPECTED,
    "contexts": "a list of strings",
    "contexts[]": "a string",
    "contexts[].text": "a string",
    "references[]": "a string",
}
# Fields holding an object: an empty Arrow map reads back as [], which means {} here.
_OBJECT_FIELDS = ("relevance", "metadata", "rubrics")
# The kind of cell a reader yields: CSV text, decoded JSON, or Arrow values (struct fields that
# a row lacks come back as None, so those are dropped).
_Source = Literal["text", "json", "arrow"]


def load_dataset(
    path: str | Path,
    *,
    format: str | None = None,
    layout: str | None = None,
    skip_invalid: bool = False,
) -> Dataset:
    """Read a dataset; the format comes from the extension unless given, the layout from the
    column names (``user_input``/``retrieved_contexts``/``response``/``reference`` = ragas)
    unless given. With ``skip_invalid`` a bad sample is skipped with a warning."""
    path = Path(path)
    fmt = _format_of(path, format)
    lay = _check_layout(layout)
    if fmt == "csv":
        return read_csv(path, layout=lay, skip_invalid=skip_invalid)
    if fmt == "parquet":
        return read_parquet(path, layout=lay, skip_invalid=skip_invalid)
    if lay is None:
        lay = _jsonl_layout(path)
    if lay == "rag-judge":
        return read_jsonl(path, skip_invalid=skip_invalid)
    return _collect(path, _jsonl_rows(path), "ragas", "json", skip_invalid)


def read_csv(path: str | Path, *, layout: str | None = None, skip_invalid: bool = False) -> Dataset:
    """One sample per row. List and object cells are JSON (a Python literal, as pandas writes
    lists, is accepted too); an empty cell is a missing value. Errors name the row's first
    physical line."""
    path = Path(path)
    text = read_text(path)
    old_limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # a row of long contexts easily passes the 128 KiB default
    try:
        rows = list(_csv_rows(path, text))
    finally:
        csv.field_size_limit(old_limit)
    if not rows:
        raise DataError(f"{path}: contains no samples")
    lay = _check_layout(layout) or _detect_layout(list(rows[0][2]), path)
    _check_columns(list(rows[0][2]), lay, f"{path}:1")
    return _collect(path, rows, lay, "text", skip_invalid)


def read_parquet(
    path: str | Path, *, layout: str | None = None, skip_invalid: bool = False
) -> Dataset:
    """One sample per row; list/struct/map columns or JSON text cells. Errors name the 1-based
    row number and the field."""
    path = Path(path)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(
            f"{path}: reading Parquet needs pyarrow: pip install 'rag-judge[parquet]'"
        ) from None
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        pfile = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a damaged file
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    # pandas stores a non-default index as a column; it is not data.
    columns = [c for c in pfile.schema_arrow.names if not c.startswith("__index_level_")]
    lay = _check_layout(layout) or _detect_layout(columns, path)
    _check_columns(columns, lay, str(path))

    def rows() -> Iterator[tuple[str, int, dict[str, Any]]]:
        n = 0
        for batch in pfile.iter_batches(columns=columns):
            for record in batch.to_pylist():
                n += 1
                yield f"row {n}", n, record

    return _collect(path, rows(), lay, "arrow", skip_invalid)


# --- format and layout -----------------------------------------------------------------------


def _format_of(path: Path, format: str | None) -> Format:
    valid = sorted(set(FORMATS.values()))
    if format is not None:
        if format not in valid:
            raise DataError(f"unknown dataset format {format!r}; valid formats: {', '.join(valid)}")
        return format
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(
            f"{path}: cannot tell the format from the extension {path.suffix!r}; name the file "
            f"{', '.join(FORMATS)} or pass a format ({', '.join(valid)})"
        )
    return fmt


def _check_layout(layout: str | None) -> Layout | None:
    if layout is not None and layout not in LAYOUTS:
        raise DataError(f"unknown dataset layout {layout!r}; valid layouts: {', '.join(LAYOUTS)}")
    return layout


def _detect_layout(columns: list[str], path: Path) -> Layout:
    ragas = [c for c in columns if c in _RAGAS_COLUMNS and c != "id"]
    own = [c for c in columns if c in _OWN_COLUMNS and c != "id"]
    if ragas and own:
        raise DataError(
            f"{path}: the columns mix the rag-judge layout ({', '.join(own)}) and the ragas "
            f"layout ({', '.join(ragas)}); use one"
        )
    return "ragas" if ragas else "rag-judge"


def _check_columns(columns: list[str], layout: Layout, where: str) -> None:
    valid = _OWN_COLUMNS if layout == "rag-judge" else _RAGAS_COLUMNS
    for col in columns:
        if col not in valid:
            raise DataError(
                f"{where}: unknown column {col!r}{_near(col, valid)} for the {layout} layout; "
                f"valid columns: {', '.join(valid)}"
            )
    seen: set[str] = set()
    for col in columns:
        if col in seen:
            raise DataError(f"{where}: column {col!r} appears twice")
        seen.add(col)


def _near(name: str, valid: tuple[str, ...]) -> str:
    match = did_you_mean(name, valid)
    return f" (did you mean {match!r}?)" if match else ""


# --- readers that yield (where, row number, cells) -------------------------------------------


def _csv_rows(path: Path, text: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader, None)
        if header is None:
            return
        header = [h.strip() for h in header]
        n = 0
        end = reader.line_num
        for record in reader:
            start, end = end + 1, reader.line_num  # a quoted cell may span several lines
            if not any(cell.strip() for cell in record):
                continue
            n += 1
            if len(record) != len(header):
                raise DataError(
                    f"{path}:{start}: expected {len(header)} cells (one per header column), "
                    f"found {len(record)}"
                )
            yield str(start), n, dict(zip(header, record))
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None


def _jsonl_layout(path: Path) -> Layout:
    """The layout of the first parseable line; read_jsonl reports any broken line itself."""
    lines = read_lines(path)
    try:
        for _, obj in json_lines(lines):
            return "rag-judge" if isinstance(obj, DataError) else _detect_layout(list(obj), path)
    finally:
        lines.close()  # the first object decides: the rest of the file is not read
    return "rag-judge"


def _jsonl_rows(path: Path) -> Iterator[tuple[str, int, dict[str, Any] | DataError]]:
    n = 0
    for lineno, obj in json_lines(read_lines(path)):
        n += 1
        if isinstance(obj, DataError):
            yield str(lineno), n, obj
            continue
        unknown = [k for k in obj if k not in _RAGAS_COLUMNS]
        if unknown:
            yield (
                str(lineno),
                n,
                DataError(
                    f"unknown key {unknown[0]!r}{_near(unknown[0], _RAGAS_COLUMNS)} for the "
                    f"ragas layout; valid keys: {', '.join(_RAGAS_COLUMNS)}"
                ),
            )
            continue
        yield str(lineno), n, obj


# --- rows to samples -------------------------------------------------------------------------


def _collect(
    path: Path,
    rows: Iterable[tuple[str, int, dict[str, Any] | DataError]],
    layout: Layout,
    source: _Source,
    skip_invalid: bool,
) -> Dataset:
    parsed = ((where, partial(_row_sample, cells, n, layout, source)) for where, n, cells in rows)
    return gather_samples(path, parsed, skip_invalid=skip_invalid)


def _row_sample(
    cells: dict[str, Any] | DataError, n: int, layout: Layout, source: _Source
) -> Sample:
    if isinstance(cells, DataError):  # a line that is not a JSON object
        raise cells
    return _to_sample(cells, n, layout, source)


def _to_sample(cells: dict[str, Any], n: int, layout: Layout, source: _Source) -> Sample:
    cells = {k: _missing_to_none(v, source) for k, v in cells.items()}
    names = {v: k for k, v in _RAGAS_RENAMES.items()} if layout == "ragas" else {}
    fields: dict[str, Any] = {"id": cells.get("id", f"row-{n}")}
    get = cells.get
    if layout == "rag-judge":
        fields["question"] = get("question")
        fields["answer"] = get("answer")
        fields["references"] = _references(get("references"), source)
        fields["contexts"] = _or(_structured(get("contexts"), "contexts", source), ())
        fields["relevance"] = _structured(get("relevance"), "relevance", source)
        fields["qrels"] = _structured(get("qrels"), "qrels", source)
        fields["answerable"] = _flag(get("answerable"), source)
        fields["metadata"] = _or(_structured(get("metadata"), "metadata", source), {})
    else:
        fields["question"] = get("user_input")
        fields["answer"] = get("response")
        ref = get("reference")
        fields["references"] = () if ref is None else (ref,)  # one free-text reference
        contexts = _or(_structured(get("retrieved_contexts"), "retrieved_contexts", source), [])
        ids = _id_list(get("retrieved_context_ids"), "retrieved_context_ids", source)
        if ids is not None:
            if not isinstance(contexts, list):
                raise DataError(
                    f"field 'retrieved_contexts': expected a list of strings, got "
                    f"{describe_value(contexts)}"
                )
            if len(ids) != len(contexts):
                raise DataError(
                    f"field 'retrieved_context_ids': {len(ids)} ids for {len(contexts)} "
                    "retrieved_contexts"
                )
            contexts = [{"id": i, "text": t} for i, t in zip(ids, contexts)]
        fields["contexts"] = contexts
        gold = _id_list(get("reference_context_ids"), "reference_context_ids", source)
        if gold is not None:  # ragas' id-based metrics treat these as the relevant docs
            for j, doc in enumerate(gold):
                if isinstance(doc, bool) or not isinstance(doc, str | int | float):
                    raise DataError(
                        f"field 'reference_context_ids[{j}]': expected a doc id (a string or a "
                        f"number), got {describe_value(doc)}"
                    )
            fields["relevance"] = {str(i): 1.0 for i in gold}
        fields["metadata"] = {
            col: _structured(get(col), col, source) if col in _RAGAS_STRUCTURED else get(col)
            for col in _RAGAS_EXTRAS
            if get(col) is not None
        }
    try:
        return Sample.model_validate(fields)
    except ValidationError as exc:
        if layout == "ragas":
            problems = [
                p._replace(field=_ragas_field(p.field, names))
                for p in input_problems(exc, Sample, expected=_RAGAS_EXPECTED)
            ]
        else:
            problems = input_problems(exc, Sample, expected=SAMPLE_EXPECTED)
        raise DataError("; ".join(map(str, problems))) from None


def _ragas_field(field: str, names: dict[str, str]) -> str:
    """Name a field by the user's column: ``retrieved_contexts[2]`` (not ``contexts[2]`` or
    ``contexts[2].text``), ``retrieved_context_ids[2]`` (not ``contexts[2].id``), ``reference``
    (not ``references[0]``)."""
    item = re.fullmatch(r"contexts\[(\d+)\]\.(id|text)", field)
    if item:
        column = "retrieved_context_ids" if item[2] == "id" else "retrieved_contexts"
        return f"{column}[{item[1]}]"
    if re.fullmatch(r"references(\[0\])?", field):
        return "reference"  # one free-text reference
    head = field.split(".")[0].split("[")[0]
    return names[head] + field[len(head) :] if head in names else field


def _or(value: Any, default: Any) -> Any:
    """``default`` for a missing value; anything else as it is, for validation to judge."""
    return default if value is None else value


def _id_list(value: Any, field: str, source: _Source) -> list[Any] | None:
    """A column of doc ids: a list, or None when missing."""
    ids = _structured(value, field, source)
    if ids is not None and not isinstance(ids, list):
        raise DataError(f"field '{field}': expected a list of doc ids, got {describe_value(ids)}")
    return ids


def _missing_to_none(value: Any, source: _Source) -> Any:
    if source == "text" and isinstance(value, str) and not value.strip():
        return None  # CSV cannot tell an empty string from a missing one
    if isinstance(value, float) and math.isnan(value):
        return None  # pandas writes a missing value of a number column as NaN
    return value


def _flag(value: Any, source: _Source) -> Any:
    """A CSV cell is text: ``true`` or ``false`` in any case (pandas writes True and False) is
    the boolean; anything else is left for validation to name ("no", "1": no guessing)."""
    if source == "text" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _references(value: Any, source: _Source) -> Any:
    # A text cell holds one reference, or several as a JSON list.
    if isinstance(value, str) and value.lstrip().startswith("[") and source != "json":
        return _decode(value, "references")
    return () if value is None else value


def _structured(value: Any, field: str, source: _Source) -> Any:
    """A list or object cell: JSON text in a CSV (or a Parquet string column), else native."""
    if isinstance(value, str) and source != "json":
        value = _decode(value, field)
    if source == "arrow":
        value = _from_arrow(value)
        if value == [] and field in _OBJECT_FIELDS:
            value = {}
    return value


def _decode(text: str, field: str) -> Any:
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
