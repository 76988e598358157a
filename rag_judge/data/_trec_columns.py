"""The fast path of the TREC readers: a plain file read column-wise by pyarrow's CSV reader.

Python never sees a line: pyarrow splits the buffer on its threads, parses the numbers in C++
and dictionary-encodes the ids (about 4x faster than splitting the text in Python). The exact
reader in ``rag_judge.data.trec`` stays the definition of the format; this path answers only
where its answer is certainly the same, and otherwise returns None:

- the file is "plain": ASCII with no control byte but the separator, ``\\n`` and ``\\r`` (both
  end a line, in pyarrow as in a text-mode read); one separator kind (space or tab); no line
  starting with ``#``; no separator doubled or at either end of a line. On such text
  pyarrow's split equals ``str.split()``. Other spacing is not always a line of the wrong
  field count: ``q1 Q0 d1 1 1 `` (a tag missing, a separator left) is six fields to pyarrow,
  the last one empty, and five to the exact reader, which refuses it;
- pyarrow accepts every line (exactly ``width`` fields) and every number. It refuses some
  numbers Python takes (``1_0``, ``+3`` as a grade); those go to the exact reader too;
- no score is NaN: pyarrow also reads ``nan(1)``, which Python refuses.

pyarrow is optional (the ``parquet`` extra): without it every file takes the exact reader.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["RunColumns", "available", "qrels_columns", "run_columns"]

# Bytes a plain file may hold: printable ASCII, the two separators and line ends.
_PLAIN = bytes(range(32, 127)) + b"\t\n\r"

RunColumns = tuple[tuple[str, ...], NDArray[np.int64], tuple[str, ...], NDArray[np.int64],
                   NDArray[np.float64], str]  # fmt: skip
"""Query ids and codes, doc ids and codes (first-appearance order), scores, first tag."""


def available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def _separator(data: bytes) -> str | None:
    """The one separator of a plain file, or None when it is not plain."""
    if data.translate(None, _PLAIN) or data.startswith(b"#") or b"\n#" in data:
        return None
    separator = b" "
    if b"\t" in data:
        if b" " in data:
            return None
        separator = b"\t"
    edges = (separator * 2, b"\n" + separator, separator + b"\n", b"\r" + separator,
             separator + b"\r")  # fmt: skip
    if data.startswith(separator) or data.endswith(separator) or any(e in data for e in edges):
        return None  # an empty field to pyarrow, none to str.split()
    return separator.decode()


def _read(data: bytes, names: list[str], types: dict[str, Any]) -> Any:
    """The columns ``types`` names, or None where the file is not plain or pyarrow refuses it."""
    separator = _separator(data)
    if separator is None:
        return None
    import pyarrow as pa
    from pyarrow import csv

    try:
        return csv.read_csv(
            pa.BufferReader(data),
            read_options=csv.ReadOptions(column_names=names),
            parse_options=csv.ParseOptions(
                delimiter=separator, quote_char=False, double_quote=False, escape_char=False
            ),
            convert_options=csv.ConvertOptions(
                column_types={name: getattr(pa, kind)() for name, kind in types.items()},
                include_columns=list(types),
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=False,  # plain files are ASCII
            ),
        )
    except pa.ArrowInvalid:  # a line of another field count, a number it will not take
        return None


def _numpy(column: Any, dtype: Any) -> Any:
    """A column without nulls as a numpy array, read from its buffer: pyarrow's own
    ``to_numpy`` imports pandas where installed, a quarter second of a CLI run."""
    array = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    width = np.dtype(dtype).itemsize
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * width
    )


def _codes(column: Any) -> tuple[tuple[str, ...], NDArray[np.int64]]:
    """Distinct values in first-appearance order (pyarrow's dictionary order) and the codes."""
    encoded = column.combine_chunks().dictionary_encode()
    codes = _numpy(encoded.indices, np.dtype(f"int{encoded.indices.type.bit_width}"))
    return tuple(encoded.dictionary.to_pylist()), codes.astype(np.int64)


def run_columns(data: bytes) -> RunColumns | None:
    """``qid Q0 docid rank score tag`` lines as columns, or None for the exact reader."""
    table = _read(data, ["qid", "q0", "docid", "rank", "score", "tag"],
                  {"qid": "string", "docid": "string", "score": "float64"})  # fmt: skip
    if table is None:
        return None
    scores = _numpy(table["score"], np.float64).copy()  # writable, and frees pyarrow's table
    if np.isnan(scores).any():
        return None
    query_ids, q = _codes(table["qid"])
    doc_ids, d = _codes(table["docid"])
    return query_ids, q, doc_ids, d, scores, _first_tag(data) if len(scores) else ""


def _first_tag(data: bytes) -> str:
    """The tag of the first line (leading blank lines are skipped), without copying the file."""
    start = 0
    while data[start : start + 1] in (b"\n", b"\r"):
        start += 1
    end = data.find(b"\n", start)
    return data[start : len(data) if end < 0 else end].split()[5].decode()


def qrels_columns(data: bytes) -> tuple[list[str], list[str], list[int]] | None:
    """``qid iter docid grade`` lines as (qids, docids, grades), or None for the exact reader."""
    table = _read(data, ["qid", "iter", "docid", "grade"],
                  {"qid": "string", "docid": "string", "grade": "int64"})  # fmt: skip
    if table is None:
        return None
    return (table["qid"].to_pylist(), table["docid"].to_pylist(), table["grade"].to_pylist())
