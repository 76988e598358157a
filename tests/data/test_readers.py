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
from tests import assert_plain as plain

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
        (
            "contexts",
            [None, 7],
            "row 2: field 'contexts': expected a list of strings or of objects with keys id, "
            "text, score, relevance, doc_id, start, end, got the number 7$",
        ),
        (
            "relevance",
            ['{"d1": 1}', '{"d1": "high"}'],
            "row 2: field 'relevance.d1': expected a number \\(the doc's relevance grade\\), "
            "got the string 'high'$",
        ),
        (
            "references",
            [None, [{"a": 1}]],
            r"row 2: field 'references\[0\]': expected a string, got an object$",
        ),
    ],
)
def test_bad_parquet_type_names_row_and_field(
    tmp_path: Path, column: str, values: list[Any], needle: str
) -> None:
    pq.write_table(pa.table({"id": ["a", "b"], column: values}), tmp_path / "d.parquet")
    with pytest.raises(DataError, match=f"d\\.parquet:{needle}"):
        read_parquet(tmp_path / "d.parquet")


def test_csv_answerable_is_true_or_false_and_nothing_else(tmp_path: Path) -> None:
    # CSV cells are text: true/false in any case (pandas writes True and False) is a boolean,
    # an empty cell is "not said"; "no" or "1" is an error, not a guess.
    (tmp_path / "d.csv").write_text("id,answerable\na,True\nb, false \nc,\nd,TRUE\n")
    assert [s.answerable for s in read_csv(tmp_path / "d.csv")] == [True, False, None, True]
    for cell in ("no", "1", "yes"):
        (tmp_path / "d.csv").write_text(f"id,answerable\na,true\nb,{cell}\n")
        with pytest.raises(DataError) as err:
            read_csv(tmp_path / "d.csv")
        assert str(err.value) == (
            f"{tmp_path / 'd.csv'}:3: field 'answerable': expected true or false (whether the "
            f"question can be answered from the material), got the string {cell!r}"
        )


def test_csv_json_cells_and_parquet_keep_numbers_strict(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text('id,relevance\na,"{""d1"": ""3""}"\n')
    with pytest.raises(DataError, match=r"d\.csv:2: field 'relevance\.d1': expected a number "):
        read_csv(tmp_path / "d.csv")
    # Parquet has typed columns: a boolean column is read, a text one is not guessed at.
    pq.write_table(pa.table({"id": ["a", "b"], "answerable": [True, None]}), tmp_path / "b.pq")
    assert [s.answerable for s in read_parquet(tmp_path / "b.pq")] == [True, None]
    pq.write_table(pa.table({"id": ["a"], "answerable": ["no"]}), tmp_path / "s.pq")
    with pytest.raises(DataError, match=r"s\.pq:row 1: field 'answerable': expected true or "):
        read_parquet(tmp_path / "s.pq")


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
            r"d\.csv:1: unknown column 'refrences' \(did you mean 'references'\?\) for the "
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
        ("d.csv", "id\nq\n", {"layout": "langsmith"}, "valid layouts: rag-judge, ragas, deepeval"),
        (
            "d.jsonl",
            '{"user_input": "q", "retrieved_context": 1}\n',
            {},
            r"unknown key 'retrieved_context' \(did you mean 'retrieved_contexts'\?\) for the "
            "ragas",
        ),
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


# ---- every message is in the words of the file: no pydantic internals -----------------------


def assert_plain(message: str) -> None:
    plain(message, "Context", "Sample", "Dataset")


OK_LINE = json.dumps({"id": "q0", "question": "q", "answer": "a"})

# (file name, content, the error after "file:"): wrong types for each field of a sample, unknown
# and misspelt keys, lines that are not objects, bad grades, in each format and layout.
BAD_DATASETS = [
    (
        "d.jsonl",
        {"id": "q1", "contexts": "some text"},
        "2: field 'contexts': expected a list of strings or of objects with keys id, text, "
        "score, relevance, doc_id, start, end, got the string 'some text'",
    ),
    (
        "d.jsonl",
        {"id": "q1", "contexts": ["a", 3]},
        "2: field 'contexts[1]': expected a string or an object with keys id, text, score, "
        "relevance, doc_id, start, end, got the number 3",
    ),
    (
        "d.jsonl",
        {"id": "q1", "contexts": [{"id": "d1", "txt": "x"}]},
        "2: field 'contexts[0]': unknown key 'txt' (did you mean 'text'?); legal keys: id, "
        "text, score, relevance, doc_id, start, end",
    ),
    (
        "d.jsonl",
        {"id": "q1", "contexts": [{"id": "d1", "score": "high"}]},
        "2: field 'contexts[0].score': expected a number (the retrieval score), got the string "
        "'high'",
    ),
    (
        "d.jsonl",
        {"id": "q1", "contexts": [{"id": ["d1"], "relevance": [1]}]},
        "2: field 'contexts[0].id': expected a doc id (a string or a number), got a list; field "
        "'contexts[0].relevance': expected a number (the context's relevance grade), got a list",
    ),
    (
        "d.jsonl",
        {"id": "q1", "refrences": ["x"]},
        "2: unknown key 'refrences' (did you mean 'references'?); legal keys: id, question, "
        "contexts, answer, references, relevance, qrels, answerable, metadata, turns, "
        "expected_tools, goal",
    ),
    ("d.jsonl", "[1, 2]", "2: expected a JSON object (one sample per line), got a list"),
    ("d.jsonl", '"q1"', "2: expected a JSON object (one sample per line), got the string 'q1'"),
    ("d.jsonl", "", "contains no samples"),
    (
        "d.jsonl",
        {"id": "q1", "relevance": ["d1"]},
        "2: field 'relevance': expected an object of doc id to grade, for every judged doc "
        '({"d1": 2, "d7": 0}), got a list',
    ),
    (
        "d.jsonl",
        {"id": "q1", "relevance": {"d1": "high", "d2": None}},
        "2: field 'relevance.d1': expected a number (the doc's relevance grade), got the string "
        "'high'; field 'relevance.d2': expected a number (the doc's relevance grade), got null",
    ),
    (
        "d.jsonl",
        {"id": "q1", "question": ["q"], "answer": True, "references": 3, "metadata": "x"},
        "2: field 'question': expected a string, got a list; field 'answer': expected a string, "
        "got true; field 'references': expected a string or a list of strings, got the number 3;"
        " field 'metadata': expected an object, got the string 'x'",
    ),
    ("d.jsonl", {"id": ""}, "2: field 'id': must not be empty"),
    ("d.jsonl", {"id": None}, "2: field 'id': expected a non-empty string, got null"),
    (
        "d.jsonl",
        {"question": "q"},
        "2: field 'id': required but missing (expected a non-empty string)",
    ),
    (
        "d.jsonl",
        {"user_input": "q", "retrieved_contexts": "one string", "reference": ["a"]},
        "1: field 'retrieved_contexts': expected a list of strings, got the string 'one string'"
        "; field 'reference': expected a string, got a list",
    ),
    (
        "d.jsonl",
        {"user_input": "q", "retrieved_contexts": ["x"], "retrieved_context_ids": [["d1"]]},
        "1: field 'retrieved_context_ids[0]': expected a doc id (a string or a number), got a list",
    ),
    (
        "d.jsonl",
        {"user_input": "q", "retrieved_contexts": ["x"], "retrieved_context_ids": "d1"},
        "1: field 'retrieved_context_ids': expected a list of doc ids, got the string 'd1'",
    ),
    (
        "d.jsonl",
        {"user_input": "q", "reference_context_ids": 5},
        "1: field 'reference_context_ids': expected a list of doc ids, got the number 5",
    ),
    (
        "d.csv",
        'id,question,contexts\nq1,x,"{""a"": 1}"\n',
        "2: field 'contexts': expected a list of strings or of objects with keys id, text, "
        "score, relevance, doc_id, start, end, got an object",
    ),
    (
        "d.csv",
        'id,relevance,metadata\nq1,"{""d1"": ""high""}","[1]"\n',
        "2: field 'relevance.d1': expected a number (the doc's relevance grade), got the string "
        "'high'; field 'metadata': expected an object, got a list",
    ),
    (
        "d.csv",
        "id,questoin\nq1,x\n",
        "1: unknown column 'questoin' (did you mean 'question'?) for the rag-judge layout; "
        "valid columns: id, question, answer, references, contexts, relevance, qrels, answerable, "
        "metadata, turns, expected_tools, goal",
    ),
]


def write_bad(tmp_path: Path, name: str, content: dict[str, Any] | str) -> Path:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        text = json.dumps(content) if isinstance(content, dict) else content
        ragas = isinstance(content, dict) and "user_input" in content
        path.write_text(text + "\n" if ragas else f"{OK_LINE}\n{text}\n" if text else "")
    else:
        path.write_text(str(content))
    return path


@pytest.mark.parametrize(("name", "content", "expected"), BAD_DATASETS)
def test_bad_datasets_speak_json_not_pydantic(
    tmp_path: Path, name: str, content: dict[str, Any] | str, expected: str
) -> None:
    path = write_bad(tmp_path, name, content)
    with pytest.raises(DataError) as err:
        load_dataset(path)
    want = f"{path}:{expected}" if expected[0].isdigit() else f"{path}: {expected}"
    assert str(err.value) == want
    assert_plain(str(err.value))


# A wrong value of every kind in every field of a sample, at every depth.
WRONG_VALUES: list[Any] = ["x", "", 7, 2.5, True, None, [], ["x"], [1], [[1]], {}, {"a": 1}, [{}]]
PLACES = [
    ("id",),
    ("question",),
    ("answer",),
    ("contexts",),
    ("contexts", 0),
    ("contexts", 0, "id"),
    ("contexts", 0, "text"),
    ("contexts", 0, "score"),
    ("contexts", 0, "relevance"),
    ("contexts", 0, "txt"),
    ("references",),
    ("references", 0),
    ("relevance",),
    ("relevance", "d1"),
    ("metadata",),
    ("refrences",),
]


def _with(place: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {"id": "q1", "contexts": [{"id": "d1"}], "relevance": {"d1": 1}}
    sample["references"] = ["r"]
    node: Any = sample
    for part in place[:-1]:
        node = node[part]
    node[place[-1]] = value
    return sample


def test_no_message_about_any_bad_value_leaks_pydantic(tmp_path: Path) -> None:
    messages = []
    for place in PLACES:
        for value in WRONG_VALUES:
            sample = _with(place, value)
            jsonl = tmp_path / "d.jsonl"
            jsonl.write_text(f"{OK_LINE}\n{json.dumps(sample)}\n")
            csv_path = tmp_path / "d.csv"
            pd.DataFrame(
                [{k: v if isinstance(v, str) else json.dumps(v) for k, v in sample.items()}]
            ).to_csv(csv_path, index=False)
            ragas = {"user_input": "q", "retrieved_contexts": value, "reference": value}
            ragas_path = tmp_path / "r.jsonl"
            ragas_path.write_text(json.dumps(ragas) + "\n")
            for path in (jsonl, csv_path, ragas_path):
                try:
                    load_dataset(path)
                except DataError as exc:
                    messages.append(str(exc))
                    assert str(exc).startswith(f"{path}:"), str(exc)
    assert len(messages) > 150
    for message in messages:
        assert_plain(message)
        assert " field '" in message or "unknown " in message, message


def test_parquet_and_cli_messages_are_plain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for column, values in [
        ("contexts", [None, 7]),
        ("references", [None, [{"a": 1}]]),
        ("metadata", ['{"a": 1}', "[1]"]),
        ("relevance", ['{"d1": 1}', '{"d1": [2]}']),
    ]:
        pq.write_table(pa.table({"id": ["a", "b"], column: values}), tmp_path / "d.parquet")
        with pytest.raises(DataError) as err:
            read_parquet(tmp_path / "d.parquet")
        assert f"d.parquet:row 2: field '{column}" in str(err.value)
        assert_plain(str(err.value))
    from rag_judge.cli import main

    (tmp_path / "d.jsonl").write_text(f'{OK_LINE}\n{{"id": "q1", "contexts": "some text"}}\n')
    (tmp_path / "c.yaml").write_text(
        "dataset: d.jsonl\nevaluators:\n  - type: retrieval\n    metrics: [mrr]\n"
    )
    assert main(["run", str(tmp_path / "c.yaml"), "--quiet", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == (
        f"rag-judge: error: {tmp_path / 'd.jsonl'}:2: field 'contexts': expected a list of "
        "strings or of objects with keys id, text, score, relevance, doc_id, start, end, got the "
        "string 'some text'\n"
    )


def test_jsonl_is_read_line_by_line_with_the_bad_line_named(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"id": "a", "answer": "ok"}\r\n{"id": "b", "answer": "caf\xe9"}\n'
    )
    with pytest.raises(DataError, match=r"d\.jsonl:2: not UTF-8 text \(invalid continuation"):
        load_dataset(path)
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "answer": "ok"}\r\n{"id": "b"}\n')
    assert [s.id for s in load_dataset(path).samples] == ["a", "b"]
