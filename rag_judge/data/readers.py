"""Dataset loaders for JSONL, CSV and Parquet, in rag-judge's own layout or in ragas' layout,
and OpenTelemetry trace exports (OTLP-JSON: ``rag_judge.data.otel``).

Every reader ends in :class:`rag_judge.data.Sample` validation, so one set of rules holds for all
formats; errors name ``file:line`` (JSONL, CSV) or ``file:row N`` (Parquet) and the field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

from rag_judge.data._cells import Source
from rag_judge.data.jsonl import gather_samples, json_lines, read_jsonl, read_lines, read_text
from rag_judge.data.layouts import (
    LAYOUTS,
    Layout,
    check_columns,
    detect_layout,
    first_turn_keys,
    row_sample,
    unknown_key,
)
from rag_judge.data.otel import is_otlp, read_otlp
from rag_judge.data.sample import Dataset, Sample
from rag_judge.errors import DataError

__all__ = ["FORMATS", "LAYOUTS", "load_dataset", "read_csv", "read_parquet"]

Format = Literal["jsonl", "csv", "parquet", "otlp"]
FORMATS: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def load_dataset(
    path: str | Path,
    *,
    format: str | None = None,
    layout: str | None = None,
    skip_invalid: bool = False,
) -> Dataset:
    """Read a dataset; the format comes from the extension unless given, the layout from the
    column names (``user_input``/``retrieved_contexts``/``response``/``reference`` = ragas)
    unless given (``turns`` whose items have a ``role`` = DeepEval; see
    ``rag_judge.data.layouts``). With ``skip_invalid`` a bad sample is skipped with a
    warning."""
    path = Path(path)
    fmt = _format_of(path, format)
    lay = _check_layout(layout)
    if fmt == "otlp":
        return _read_otlp(path, lay, skip_invalid)
    if fmt == "csv":
        return read_csv(path, layout=lay, skip_invalid=skip_invalid)
    if fmt == "parquet":
        return read_parquet(path, layout=lay, skip_invalid=skip_invalid)
    if lay is None:
        lay = _jsonl_layout(path)
    if lay == "rag-judge":
        return read_jsonl(path, skip_invalid=skip_invalid)
    return _collect(path, _jsonl_rows(path, lay), lay, "json", skip_invalid)


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
    first = rows[0][2]
    lay = _check_layout(layout) or detect_layout(
        list(first), path, first_turn_keys(first.get("turns"))
    )
    check_columns(list(first), lay, f"{path}:1")
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
    lay = _check_layout(layout) or detect_layout(columns, path, _parquet_turn_keys(pfile, columns))
    check_columns(columns, lay, str(path))

    def rows() -> Iterator[tuple[str, int, dict[str, Any]]]:
        n = 0
        for batch in pfile.iter_batches(columns=columns):
            for record in batch.to_pylist():
                n += 1
                yield f"row {n}", n, record

    return _collect(path, rows(), lay, "arrow", skip_invalid)


# --- format and layout -----------------------------------------------------------------------


def _format_of(path: Path, format: str | None) -> Format:
    valid: list[Format] = [*sorted(set(FORMATS.values())), "otlp"]
    if format is not None:
        for known in valid:
            if format == known:
                return known
        raise DataError(f"unknown dataset format {format!r}; valid formats: {', '.join(valid)}")
    # A trace export is told by its first key: it is named .json or .jsonl like any JSON.
    if path.suffix.lower() in (".json", ".jsonl", ".ndjson") and is_otlp(path):
        return "otlp"
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(
            f"{path}: cannot tell the format from the extension {path.suffix!r}; name the file "
            f"{', '.join(FORMATS)} (or .json for OpenTelemetry traces) or pass a format "
            f"({', '.join(valid)})"
        )
    return fmt


def _read_otlp(path: Path, layout: Layout | None, skip_invalid: bool) -> Dataset:
    if layout is not None:
        raise DataError(f"{path}: OpenTelemetry traces have no layout; leave dataset_layout out")
    return read_otlp(path, skip_invalid=skip_invalid)


def _check_layout(layout: str | None) -> Layout | None:
    for known in LAYOUTS:
        if layout == known:
            return known
    if layout is not None:
        raise DataError(f"unknown dataset layout {layout!r}; valid layouts: {', '.join(LAYOUTS)}")
    return None


def _parquet_turn_keys(pfile: Any, columns: list[str]) -> list[str]:
    """The keys of the first row's first turn, where the file has a ``turns`` column."""
    if "turns" not in columns:
        return []
    for batch in pfile.iter_batches(batch_size=1, columns=["turns"]):
        return first_turn_keys(_present(batch.to_pylist()[0]["turns"]))
    return []


def _present(turns: Any) -> Any:
    # An Arrow struct has every field of its type: a key a turn lacks comes back as None.
    if isinstance(turns, list):
        return [{k: v for k, v in t.items() if v is not None} if isinstance(t, dict) else t
                for t in turns]  # fmt: skip
    return turns


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
            if isinstance(obj, DataError):
                return "rag-judge"
            return detect_layout(list(obj), path, first_turn_keys(obj.get("turns")))
    finally:
        lines.close()  # the first object decides: the rest of the file is not read
    return "rag-judge"


def _jsonl_rows(
    path: Path, layout: Layout
) -> Iterator[tuple[str, int, dict[str, Any] | DataError]]:
    n = 0
    for lineno, obj in json_lines(read_lines(path)):
        n += 1
        if isinstance(obj, DataError):
            yield str(lineno), n, obj
            continue
        yield str(lineno), n, unknown_key(list(obj), layout) or obj


# --- rows to samples -------------------------------------------------------------------------


def _collect(
    path: Path,
    rows: Iterable[tuple[str, int, dict[str, Any] | DataError]],
    layout: Layout,
    source: Source,
    skip_invalid: bool,
) -> Dataset:
    parsed = ((where, partial(_row_sample, cells, n, layout, source)) for where, n, cells in rows)
    return gather_samples(path, parsed, skip_invalid=skip_invalid)


def _row_sample(
    cells: dict[str, Any] | DataError, n: int, layout: Layout, source: Source
) -> Sample:
    if isinstance(cells, DataError):  # a line that is not a JSON object
        raise cells
    return row_sample(cells, n, layout, source)
