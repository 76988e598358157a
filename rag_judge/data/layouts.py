"""The layouts a dataset's rows may come in, and each row as a :class:`Sample`.

- ``rag-judge``: the sample's own field names (``question``, ``contexts``, ``turns``, ...);
- ``ragas``: ``user_input``, ``retrieved_contexts``, ``response``, ``reference``, ... (a
  SingleTurnSample), or ``user_input`` as a list of messages (a MultiTurnSample, read by
  ``rag_judge.data.conversation_layouts``);
- ``deepeval``: a ConversationalTestCase, ``turns`` of ``{role, content, ...}``.

A layout is told by a row's keys: ragas' and DeepEval's own keys, or turns that have a
``role``. Errors name the field in the user's words where the layout renames it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from rag_judge.data._cells import (
    Source,
    flag,
    id_list,
    missing_to_none,
    or_default,
    references,
    structured,
)
from rag_judge.data.conversation_layouts import Converted, deepeval_fields, ragas_fields
from rag_judge.data.sample import SAMPLE_EXPECTED, Sample
from rag_judge.errors import DataError
from rag_judge.messages import describe_value, did_you_mean, input_problems

__all__ = [
    "LAYOUTS",
    "Layout",
    "check_columns",
    "columns_of",
    "detect_layout",
    "first_turn_keys",
    "row_sample",
    "unknown_key",
]

Layout = Literal["rag-judge", "ragas", "deepeval"]
LAYOUTS: tuple[Layout, ...] = ("rag-judge", "ragas", "deepeval")

# Columns of each layout. A ragas or DeepEval column that rag-judge has no field for is kept in
# metadata.
_OWN_COLUMNS = (
    "id", "question", "answer", "references", "contexts", "relevance", "qrels", "answerable",
    "metadata", "turns", "expected_tools", "goal",
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
_RAGAS_MULTI_TURN = ("reference_tool_calls", "reference_topics")
_RAGAS_COLUMNS = ("id", *_RAGAS_RENAMES, *_RAGAS_IDS, *_RAGAS_EXTRAS, *_RAGAS_MULTI_TURN)
_DEEPEVAL_COLUMNS = (
    "id", "turns", "scenario", "expected_outcome", "user_description", "chatbot_role", "context",
    "name", "comments", "tags", "metadata", "additional_metadata", "custom_column_key_values",
)  # fmt: skip
_DEEPEVAL_ONLY = tuple(c for c in _DEEPEVAL_COLUMNS if c not in _OWN_COLUMNS)
_COLUMNS: dict[Layout, tuple[str, ...]] = {
    "rag-judge": _OWN_COLUMNS,
    "ragas": _RAGAS_COLUMNS,
    "deepeval": _DEEPEVAL_COLUMNS,
}
# What a ragas column takes, by the pattern of the sample field it becomes (see _ragas_field).
_RAGAS_EXPECTED = {
    **SAMPLE_EXPECTED,
    "contexts": "a list of strings",
    "contexts[]": "a string",
    "contexts[].text": "a string",
    "references[]": "a string",
}


def columns_of(layout: Layout) -> tuple[str, ...]:
    """The columns (keys) a row of ``layout`` may have."""
    return _COLUMNS[layout]


def first_turn_keys(turns: Any) -> list[str]:
    """The keys of the first turn of a ``turns`` cell (JSON text or a list), or none."""
    if isinstance(turns, str):
        try:
            turns = structured(turns, "turns", "text")
        except DataError:
            return []
    if isinstance(turns, list) and turns and isinstance(turns[0], dict):
        return list(turns[0])
    return []


def detect_layout(columns: Sequence[str], path: Path, turn_keys: Sequence[str] = ()) -> Layout:
    """The layout of rows with ``columns`` whose first turn has ``turn_keys``; an error when
    the columns mix layouts. DeepEval's turns have a ``role``, rag-judge's a ``question``."""
    deepeval = any(c in _DEEPEVAL_ONLY for c in columns) or "role" in turn_keys
    found: list[tuple[Layout, list[str]]] = [
        (
            "rag-judge",
            [c for c in columns if c in _OWN_COLUMNS and not (deepeval and c in _DEEPEVAL_COLUMNS)],
        ),
        ("ragas", [c for c in columns if c in _RAGAS_COLUMNS]),
        ("deepeval", [c for c in columns if c in _DEEPEVAL_COLUMNS] if deepeval else []),
    ]
    used = [(lay, [c for c in cols if c != "id"]) for lay, cols in found]
    used = [(lay, cols) for lay, cols in used if cols]
    if len(used) > 1:
        (a, a_cols), (b, b_cols) = used[:2]
        raise DataError(
            f"{path}: the columns mix the {a} layout ({', '.join(a_cols)}) and the {b} layout "
            f"({', '.join(b_cols)}); use one"
        )
    return used[0][0] if used else "rag-judge"


def check_columns(columns: Sequence[str], layout: Layout, where: str) -> None:
    valid = _COLUMNS[layout]
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


def unknown_key(keys: Sequence[str], layout: Layout) -> DataError | None:
    """The error for a JSON row of ``layout`` with a key the layout does not have, or None."""
    valid = _COLUMNS[layout]
    unknown = [k for k in keys if k not in valid]
    if not unknown:
        return None
    return DataError(
        f"unknown key {unknown[0]!r}{_near(unknown[0], valid)} for the {layout} layout; "
        f"valid keys: {', '.join(valid)}"
    )


def _near(name: str, valid: tuple[str, ...]) -> str:
    match = did_you_mean(name, valid)
    return f" (did you mean {match!r}?)" if match else ""


# --- rows to samples -------------------------------------------------------------------------


def row_sample(cells: dict[str, Any], n: int, layout: Layout, source: Source) -> Sample:
    """The sample of one row (the ``n``-th, for a row without an id)."""
    cells = {k: missing_to_none(v, source) for k, v in cells.items()}
    if layout == "rag-judge":
        return _validate(_own_fields(cells, n, source), "rag-judge")
    if layout == "deepeval":
        return _validate_converted(deepeval_fields(cells, n, source))
    if isinstance(cells.get("user_input"), list):  # ragas' MultiTurnSample
        return _validate_converted(ragas_fields(cells, n, source))
    return _validate(_ragas_single_turn(cells, n, source), "ragas")


def _own_fields(cells: dict[str, Any], n: int, source: Source) -> dict[str, Any]:
    get = cells.get
    return {
        "id": get("id", f"row-{n}"),
        "question": get("question"),
        "answer": get("answer"),
        "references": references(get("references"), source),
        "contexts": or_default(structured(get("contexts"), "contexts", source), ()),
        "relevance": structured(get("relevance"), "relevance", source),
        "qrels": structured(get("qrels"), "qrels", source),
        "answerable": flag(get("answerable"), source),
        "metadata": or_default(structured(get("metadata"), "metadata", source), {}),
        "turns": structured(get("turns"), "turns", source),
        "expected_tools": structured(get("expected_tools"), "expected_tools", source),
        "goal": get("goal"),
    }


def _ragas_single_turn(cells: dict[str, Any], n: int, source: Source) -> dict[str, Any]:
    get = cells.get
    for col in _RAGAS_MULTI_TURN:
        if get(col) is not None:
            raise DataError(
                f"field {col!r}: belongs to a multi-turn sample, whose 'user_input' is a list of "
                f"messages (a CSV cell is text: read multi-turn samples from JSONL or Parquet); "
                f"got 'user_input' {describe_value(get('user_input'))}"
            )
    fields: dict[str, Any] = {"id": get("id", f"row-{n}")}
    fields["question"] = get("user_input")
    fields["answer"] = get("response")
    ref = get("reference")
    fields["references"] = () if ref is None else (ref,)  # one free-text reference
    contexts = or_default(structured(get("retrieved_contexts"), "retrieved_contexts", source), [])
    ids = id_list(get("retrieved_context_ids"), "retrieved_context_ids", source)
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
    gold = id_list(get("reference_context_ids"), "reference_context_ids", source)
    if gold is not None:  # ragas' id-based metrics treat these as the relevant docs
        for j, doc in enumerate(gold):
            if isinstance(doc, bool) or not isinstance(doc, str | int | float):
                raise DataError(
                    f"field 'reference_context_ids[{j}]': expected a doc id (a string or a "
                    f"number), got {describe_value(doc)}"
                )
        fields["relevance"] = {str(i): 1.0 for i in gold}
    fields["metadata"] = {
        col: structured(get(col), col, source) if col in _RAGAS_STRUCTURED else get(col)
        for col in _RAGAS_EXTRAS
        if get(col) is not None
    }
    return fields


def _validate(fields: dict[str, Any], layout: Layout) -> Sample:
    try:
        return Sample.model_validate(fields)
    except ValidationError as exc:
        if layout == "ragas":
            names = {v: k for k, v in _RAGAS_RENAMES.items()}
            problems = [
                p._replace(field=_ragas_field(p.field, names))
                for p in input_problems(exc, Sample, expected=_RAGAS_EXPECTED)
            ]
        else:
            problems = input_problems(exc, Sample, expected=SAMPLE_EXPECTED)
        raise DataError("; ".join(map(str, problems))) from None


def _validate_converted(converted: Converted) -> Sample:
    """A sample converted from another layout; a problem left for validation names the
    sample's field and where in the row it came from."""
    try:
        return Sample.model_validate(converted.fields)
    except ValidationError as exc:
        problems = input_problems(exc, Sample, expected=SAMPLE_EXPECTED)
        raise DataError("; ".join(converted.describe(p) for p in problems)) from None


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
