"""CSV, Parquet and ragas-layout loaders: the same samples as the JSONL they came from, and
errors that name file, line (or row) and field."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rag_judge.data.jsonl import read_jsonl
from rag_judge.data.readers import load_dataset, read_csv, read_parquet
from rag_judge.data.sample import Sample
from rag_judge.errors import DataError
from tests import REPO

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

DEMO = REPO / "configs" / "data" / "demo.jsonl"


def demo_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def demo() -> tuple[Sample, ...]:
    return read_jsonl(DEMO).samples


def test_jsonl_goes_through_read_jsonl(demo: tuple[Sample, ...]) -> None:
    assert load_dataset(DEMO).samples == demo


def test_csv_with_json_cells_equals_the_jsonl(tmp_path: Path, demo: tuple[Sample, ...]) -> None:
    df = pd.read_json(DEMO, lines=True, dtype=False)
    for col in ("contexts", "references", "relevance"):
        df[col] = df[col].map(json.dumps)
    df.to_csv(tmp_path / "demo.csv", index=False)
    ds = load_dataset(tmp_path / "demo.csv")
    assert ds.samples == demo
    assert ds.source == str(tmp_path / "demo.csv")


def test_csv_as_pandas_writes_lists_equals_the_jsonl(
    tmp_path: Path, demo: tuple[Sample, ...]
) -> None:
    # Without json.dumps pandas writes Python reprs ([{'id': 'd001', ...}]); those load too.
    pd.read_json(DEMO, lines=True, dtype=False).to_csv(tmp_path / "demo.csv", index=False)
    assert read_csv(tmp_path / "demo.csv").samples == demo


def test_parquet_equals_the_jsonl(tmp_path: Path, demo: tuple[Sample, ...]) -> None:
    # Arrow infers relevance as a struct of every doc id in the file: absent ones read as null.
    pq.write_table(pa.Table.from_pylist(demo_rows()), tmp_path / "a.parquet")
    assert load_dataset(tmp_path / "a.parquet").samples == demo
    pd.read_json(DEMO, lines=True, dtype=False).to_parquet(tmp_path / "b.parquet")
    assert load_dataset(tmp_path / "b.parquet").samples == demo


def test_parquet_map_column_and_json_text_cells(tmp_path: Path) -> None:
    table = pa.table(
        {
            "id": ["a", "b"],
            "relevance": pa.array([[("d1", 2.0)], []], type=pa.map_(pa.string(), pa.float64())),
            "contexts": ['[{"id": "d1", "text": "x", "score": 0.5}]', None],
            "references": ['["r1", "r2"]', "just one"],
        }
    )
    pq.write_table(table, tmp_path / "m.parquet")
    a, b = read_parquet(tmp_path / "m.parquet").samples
    assert a.relevance == {"d1": 2.0} and a.contexts[0].score == 0.5
    assert a.references == ("r1", "r2")
    assert b.relevance == {} and b.contexts == () and b.references == ("just one",)


RAGAS = [
    {
        "user_input": "Which ocean is the largest?",
        "retrieved_contexts": ["The Pacific is the largest.", "The Sahara is a desert."],
        "response": "The Pacific.",
        "reference": "The Pacific Ocean.",
        "reference_contexts": ["The Pacific is the largest."],
    },
    {
        "user_input": "What is 2+2?",
        "retrieved_contexts": [],
        "response": "4",
        "reference": "[4] is the answer",  # one reference, never parsed as a list
        "reference_contexts": [],
    },
]


def check_ragas(samples: tuple[Sample, ...]) -> None:
    a, b = samples
    assert (a.id, b.id) == ("row-1", "row-2")
    assert a.question == "Which ocean is the largest?" and a.answer == "The Pacific."
    assert [c.text for c in a.contexts] == RAGAS[0]["retrieved_contexts"]
    assert a.references == ("The Pacific Ocean.",) and a.relevance is None
    assert a.metadata == {"reference_contexts": ["The Pacific is the largest."]}
    assert b.contexts == () and b.references == ("[4] is the answer",)


def test_ragas_layout_in_every_format(tmp_path: Path) -> None:
    pd.DataFrame(RAGAS).to_csv(tmp_path / "r.csv", index=False)  # lists as Python reprs
    check_ragas(load_dataset(tmp_path / "r.csv").samples)
    pd.DataFrame(RAGAS).to_parquet(tmp_path / "r.parquet")
    check_ragas(load_dataset(tmp_path / "r.parquet").samples)
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in RAGAS) + "\n")
    check_ragas(load_dataset(tmp_path / "r.jsonl").samples)


def test_ragas_context_ids_become_ids_and_judgments(tmp_path: Path) -> None:
    row = {
        "id": "q7",
        "user_input": "q",
        "retrieved_contexts": ["x", "y"],
        "retrieved_context_ids": ["d1", 2],
        "reference_context_ids": ["d1", "d9"],
    }
    (tmp_path / "r.jsonl").write_text(json.dumps(row) + "\n")
    (s,) = load_dataset(tmp_path / "r.jsonl", layout="ragas").samples
    assert s.id == "q7" and [c.id for c in s.contexts] == ["d1", "2"]
    assert s.relevance == {"d1": 1.0, "d9": 1.0} and s.ranked_grades() == [1.0, 0.0]
    row["retrieved_context_ids"] = ["d1"]
    (tmp_path / "r.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"r\.jsonl:1: field 'retrieved_context_ids': 1 ids"):
        load_dataset(tmp_path / "r.jsonl")


BAD_CSV = (
    "id,question,contexts\n"
    'q1,"a question\nover two lines","[""ctx""]"\n'  # lines 2-3
    "q2,fine,\n"  # line 4
    'q3,broken,"[{""id"": ""d1"",]"\n'  # line 5
)


def test_bad_csv_json_cell_names_file_line_field(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text(BAD_CSV)
    with pytest.raises(DataError) as err:
        load_dataset(tmp_path / "data.csv")
    assert str(err.value).startswith(f"{tmp_path / 'data.csv'}:5: field 'contexts': not valid JSON")
    assert "Expecting" in str(err.value)


def test_csv_skip_invalid_warns_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text(BAD_CSV + "q1,duplicate,\n")
    with pytest.warns(UserWarning) as record:
        ds = load_dataset(tmp_path / "data.csv", skip_invalid=True)
    assert [s.id for s in ds] == ["q1", "q2"]
    assert ds[0].question == "a question\nover two lines" and ds[1].contexts == ()
    messages = [str(w.message) for w in record]
    assert ":5: field 'contexts'" in messages[0]
    assert ":6: field 'id': sample id 'q1' already used on line 2" in messages[1]


@pytest.mark.parametrize(
    ("column", "values", "needle"),
    [
        # An Arrow column has one type; a bad cell is a bad type for the whole column.
        ("contexts", [None, 7], "row 2: field 'contexts': Input should be a valid tuple"),
        ("relevance", ['{"d1": 1}', '{"d1": "high"}'], "row 2: field 'relevance.d1'"),
        (
            "references",
            [None, [{"a": 1}]],
            r"row 2: field 'references\[0\]': Input should be a "
            "valid string",
        ),
    ],
)
def test_bad_parquet_type_names_row_and_field(
    tmp_path: Path, column: str, values: list[Any], needle: str
) -> None:
    pq.write_table(pa.table({"id": ["a", "b"], column: values}), tmp_path / "d.parquet")
    with pytest.raises(DataError, match=f"d\\.parquet:{needle}"):
        read_parquet(tmp_path / "d.parquet")


def test_parquet_skip_invalid(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"id": ["a", "b", "c"], "contexts": [None, 7, None]}), tmp_path / "d.pq"
    )
    with pytest.warns(UserWarning, match=r"d\.pq:row 2"):
        assert [s.id for s in load_dataset(tmp_path / "d.pq", skip_invalid=True)] == ["a", "c"]


def test_ragas_errors_name_the_ragas_column(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"user_input": "q", "retrieved_contexts": [["nested"]]}) + "\n"
    )
    with pytest.raises(DataError, match=r"r\.jsonl:1: field 'retrieved_contexts\[0\]"):
        load_dataset(tmp_path / "r.jsonl")


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "needle"),
    [
        (
            "d.csv",
            "id,refrences\nq,x\n",
            {},
            r"d\.csv:1: unknown column 'refrences' for the "
            r"rag-judge layout; valid columns: id, question",
        ),
        ("d.csv", "id,question,user_input\nq,x,y\n", {}, "mix the rag-judge layout"),
        ("d.csv", "id,question\n", {}, "contains no samples"),
        ("d.csv", "id,question\nq1,a,extra\n", {}, r"d\.csv:2: expected 2 cells"),
        ("d.txt", "", {}, r"cannot tell the format from the extension '\.txt'"),
        (
            "d.csv",
            "id\nq\n",
            {"format": "xlsx"},
            "unknown dataset format 'xlsx'; valid formats: csv, jsonl, parquet",
        ),
        ("d.csv", "id\nq\n", {"layout": "deepeval"}, "valid layouts: rag-judge, ragas"),
        ("d.jsonl", '{"user_input": "q", "contxt": 1}\n', {}, "unknown key 'contxt' for the ragas"),
        ("d.data", "id,question\nq,x\n", {"format": "csv"}, None),
    ],
)
def test_clear_errors(
    tmp_path: Path, name: str, text: str, kwargs: dict[str, Any], needle: str | None
) -> None:
    (tmp_path / name).write_text(text)
    if needle is None:
        assert load_dataset(tmp_path / name, **kwargs)[0].question == "x"
        return
    with pytest.raises(DataError, match=needle):
        load_dataset(tmp_path / name, **kwargs)


def test_missing_files_and_missing_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("no.csv", "no.parquet", "no.jsonl"):
        with pytest.raises(DataError, match="file not found"):
            load_dataset(tmp_path / name)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        load_dataset(tmp_path / "bad.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DataError, match=r"pip install 'rag-judge\[parquet\]'"):
        load_dataset(tmp_path / "bad.parquet")
