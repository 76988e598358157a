"""The data model and its readers: every bad input is a clear error naming file, line, field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_judge.data.jsonl import read_jsonl, write_jsonl
from rag_judge.data.sample import Context, Sample
from rag_judge.data.stream import JsonlSource
from rag_judge.data.trec import (
    qrels_from_samples,
    read_qrels,
    read_run,
    run_from_samples,
    samples_from_trec,
)
from rag_judge.errors import DataError

GOOD = {
    "id": "q1",
    "question": "Which ocean is the largest?",
    "contexts": [{"id": "d3", "text": "The Pacific is the largest."}, {"id": "d9", "text": "x"}],
    "answer": "The Pacific.",
    "references": ["The Pacific Ocean is the largest."],
    "relevance": {"d3": 3, "d7": 2},
}


def write(tmp_path: Path, *lines: str, name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reads_the_design_example(tmp_path: Path) -> None:
    ds = read_jsonl(write(tmp_path, json.dumps(GOOD), "", json.dumps({"id": 7})))
    assert [s.id for s in ds] == ["q1", "7"]  # numeric ids are read as strings
    assert ds[0].ranked_grades() == [3.0, 0.0]
    assert sorted(ds[0].ideal_grades()) == [2.0, 3.0]
    assert ds[1].judged_grades() is None


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object (one sample per line), got a list"),
        ('{"question": "no id"}', "field 'id': required but missing (expected a non-empty string)"),
        ('{"id": "a", "contexts": [{"id": "d1", "text": 5.5j}]}', "invalid JSON"),
        (
            '{"id": "a", "contexts": [{"id": "d1", "text": ["x"]}]}',
            "field 'contexts[0].text': expected a string, got a list",
        ),
        (
            '{"id": "a", "relevance": {"d1": "high"}}',
            "field 'relevance.d1': expected a number (the doc's relevance grade), "
            "got the string 'high'",
        ),
        (
            '{"id": "a", "refrences": ["typo"]}',
            "unknown key 'refrences' (did you mean 'references'?); legal keys: id, question, "
            "contexts, answer, references, relevance, qrels, answerable, metadata, turns, "
            "expected_tools, goal",
        ),
        (
            '{"id": "a", "contexts": [{"id": "d1"}, {"id": "d1"}]}',
            "doc id 'd1' appears twice in the ranking of query 'a'",
        ),
        # A string where a boolean or a number belongs is an error, not a guess: lax parsing
        # read "no" as false and "3" as a grade.
        (
            '{"id": "a", "answerable": "no"}',
            "field 'answerable': expected true or false (whether the question can be answered "
            "from the material), got the string 'no'",
        ),
        (
            '{"id": "a", "answerable": 1}',
            "field 'answerable': expected true or false (whether the question can be answered "
            "from the material), got the number 1",
        ),
        (
            '{"id": "a", "relevance": {"d1": "3"}}',
            "field 'relevance.d1': expected a number (the doc's relevance grade), got the "
            "string '3'",
        ),
        (
            '{"id": "a", "contexts": [{"id": "d1", "score": "0.5", "relevance": true}]}',
            "field 'contexts[0].score': expected a number (the retrieval score), got the string "
            "'0.5'; field 'contexts[0].relevance': expected a number (the context's relevance "
            "grade), got true",
        ),
        (
            '{"id": "a", "qrels": [{"doc_id": "x", "relevance": "2", "start": "0", "end": 4}]}',
            "field 'qrels[0].relevance': expected a number (the span's or document's relevance "
            "grade), got the string '2'; field 'qrels[0].start': expected a character offset "
            "into the document (an integer >= 0), got the string '0'",
        ),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path: Path, line: str, needle: str) -> None:
    path = write(tmp_path, json.dumps(GOOD), line)
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    assert str(err.value).startswith(f"{path}:2: ")
    assert needle in str(err.value)
    if needle != "invalid JSON":  # the rest of the message is all ours
        assert str(err.value) == f"{path}:2: {needle}"


def test_numbers_stay_numbers(tmp_path: Path) -> None:
    """An integer is a number (a grade, a score); an integral float is an offset (pandas writes
    an integer column with gaps as floats)."""
    line = {
        "id": "a",
        "contexts": [{"id": "d1", "score": 2, "doc_id": "x", "start": 0.0, "end": 4.0}],
        "qrels": [{"doc_id": "x", "relevance": 1, "start": 0, "end": 4}],
        "relevance": {"d1": 2},
        "answerable": False,
    }
    sample = read_jsonl(write(tmp_path, json.dumps(line)))[0]
    assert (sample.contexts[0].score, sample.contexts[0].start, sample.contexts[0].end) == (2, 0, 4)
    assert isinstance(sample.contexts[0].start, int) and sample.relevance == {"d1": 2.0}
    assert sample.answerable is False and sample.qrels is not None
    assert sample.qrels[0].relevance == 1.0
    # From Python, a numpy scalar (a retriever's float32 score, pandas' bool_) is its value.
    ctx = Context(doc_id="x", score=np.float32(0.5), start=np.int64(2), end=np.float64(9.0))
    assert (ctx.score, ctx.start, ctx.end) == (0.5, 2, 9) and type(ctx.start) is int
    assert Sample(id="a", answerable=np.bool_(True)).answerable is True


@pytest.mark.parametrize(
    ("line", "column", "cut"),
    [
        ('{"id": "a", "question": "Which ocean"', 38, True),  # just past the last character
        ('{"id": "a", "question": "Which oc', 25, True),  # where the open string starts
        ('{"id": "a",, "question": "x"}', 12, False),  # mid-line: not said to be cut short
    ],
)
def test_a_truncated_line_names_the_column_where_it_stops(
    tmp_path: Path, line: str, column: int, cut: bool
) -> None:
    # The line break was parsed with the line: every error at its end read "column 1".
    path = write(tmp_path, json.dumps(GOOD), line, json.dumps({"id": "q2"}))
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: invalid JSON: ")
    assert f"(column {column})" in message
    assert ("cut short" in message) is cut
    # The streaming reader a run uses says the same.
    with pytest.raises(DataError) as streamed:
        list(JsonlSource(path).chunks(10))
    assert str(streamed.value) == message


def test_duplicate_sample_ids(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r":2: field 'id': sample id 'q1' already used on line 1"):
        read_jsonl(write(tmp_path, json.dumps(GOOD), json.dumps(GOOD)))


def test_skip_invalid_warns_and_keeps_the_rest(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(GOOD), "{oops", json.dumps({"id": "q2"}))
    with pytest.warns(UserWarning, match=r"data.jsonl:2: invalid JSON"):
        ds = read_jsonl(path, skip_invalid=True)
    assert [s.id for s in ds] == ["q1", "q2"]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="contains no samples"):
        read_jsonl(write(tmp_path, "", "  "))
    with pytest.raises(DataError, match="file not found"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match="contains no judgments"):
        read_qrels(write(tmp_path, "", name="q.txt"))
    with pytest.raises(DataError, match="contains no results"):
        read_run(write(tmp_path, "", name="r.txt"))


def test_jsonl_round_trip(tmp_path: Path) -> None:
    sample = Sample.model_validate(GOOD)
    write_jsonl([sample], tmp_path / "out.jsonl")
    assert read_jsonl(tmp_path / "out.jsonl")[0] == sample


def test_contexts_as_plain_strings_and_single_reference() -> None:
    s = Sample.model_validate({"id": "a", "contexts": ["one", "two"], "references": "gold"})
    assert [c.text for c in s.contexts] == ["one", "two"]
    assert s.references == ("gold",)


def test_context_grade_wins_over_the_table() -> None:
    s = Sample.model_validate(
        {"id": "a", "contexts": [{"id": "d1", "relevance": 2}], "relevance": {"d1": 1, "d2": 3}}
    )
    assert s.ranked_grades() == [2.0]
    assert s.judged_grades() == {"d1": 2, "d2": 3}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("q1 0 d1\n", "has 4 columns, found 3"),
        ("q1 0 d1 high\n", "field 'grade': 'high' is not an integer"),
        ("q1 0 d1 1\nq1 0 d1 2\n", ":2: query 'q1' judges doc 'd1' twice"),
    ],
)
def test_bad_qrels(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(DataError, match=needle) as err:
        read_qrels(path)
    assert str(err.value).startswith(str(path))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("q1 Q0 d1 1 0.5\n", "has 6 columns, found 5"),
        (
            "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4\nq1 Q0 d3 3 0.3 t x\n",
            ":2: a run .* line has 6 columns, found 5",
        ),
        ("qé Q0 d1 1 0.5 t\n\nqé Q0 dé 1 0.5\n", ":3: a run .* line has 6 columns, found 5"),
        ("q1 Q0 d1 1 0.5 t\n\nq1 Q0 d2 1 x t\n", ":3: field 'score': 'x' is not a number"),
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 abc t\n", ":2: field 'score': 'abc' is not a number"),
        (
            "q1 Q0 d1 1 0.5 t\nq2 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n",
            ":3: query 'q1' retrieves doc 'd1' twice",
        ),
    ],
)
def test_bad_runs(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "run.txt"
    path.write_text(text)
    with pytest.raises(DataError, match=needle):
        read_run(path)


def test_samples_and_trec_convert_both_ways() -> None:
    sample = Sample.model_validate(GOOD)
    qrels, run = qrels_from_samples([sample]), run_from_samples([sample])
    assert qrels == {"q1": {"d3": 3, "d7": 2}}
    back = samples_from_trec(qrels, run)[0]
    assert [c.id for c in back.contexts] == ["d3", "d9"]  # list order survives trec_eval sorting
    assert back.ranked_grades() == sample.ranked_grades()
    with pytest.raises(DataError, match="every context needs an id"):
        run_from_samples([Sample(id="x", contexts=("no id",))])  # type: ignore[arg-type]
