"""The pyarrow fast path of the TREC readers gives what the exact reader gives, or steps aside.

Every file is read twice, with the fast path on and off: the two must agree on the result or
raise the same error. The generated files mix what the fast path must refuse (comments, odd
spacing, tabs beside spaces, numbers only Python takes, NaN, non-ASCII) with plain lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_judge.data import _trec_columns
from rag_judge.data.trec import read_qrels, read_run
from rag_judge.errors import DataError

pytest.importorskip("pyarrow")

# Half the files are drawn from plain pieces only, so that most of those take the fast path.
PLAIN_IDS = ["q1", "q2", "d1", "d2", "d10", "D1", "a#b", "NA", "null"]
IDS = [*PLAIN_IDS, "#x", "é"]
PLAIN_SCORES = ["1", "0.5", "-2.25", "1e3", ".5", "1.", "+1", "-0", "-inf", "Inf", "1e-400"]
SCORES = [*PLAIN_SCORES, "1_0", "nan", "0x1", "1,5", "x"]
PLAIN_GRADES = ["0", "1", "3", "-1", "03"]
GRADES = [*PLAIN_GRADES, "+2", "1_0", "1.0", "x"]
KINDS = ["data"] * 6 + ["blank", "comment", "indented", "short"]


@st.composite
def files(draw: st.DrawFn, run: bool) -> str:
    plain = draw(st.booleans())
    ids = st.sampled_from(PLAIN_IDS if plain else IDS)
    separator = draw(st.sampled_from([" ", "\t"]))
    separators = st.just(separator) if plain else st.sampled_from([" ", "\t", "  ", " \t"])
    ends = st.sampled_from(["\n", "\r\n", "\r"] if plain else ["\n", "\r\n", " \n"])
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(KINDS[:7] if plain else KINDS))
        if run:
            score = st.sampled_from(PLAIN_SCORES if plain else SCORES)
            fields = [draw(ids), "Q0", draw(ids), draw(st.sampled_from(["1", "2"])),
                      draw(score), draw(st.sampled_from(["tag", "t2"]))]  # fmt: skip
            fields += [] if plain else draw(st.lists(st.just("extra"), max_size=1))
        else:
            fields = [
                draw(ids),
                "0",
                draw(ids),
                draw(st.sampled_from(PLAIN_GRADES if plain else GRADES)),
            ]
        if kind == "comment":
            fields[0] = "#" + fields[0]
        elif kind == "short":
            fields = fields[:-1]
        line = draw(separators).join(fields) if kind != "blank" else ""
        lines.append(("  " if kind == "indented" else "") + line + draw(ends))
    return "".join(lines)


def both_ways(read, path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    outcomes = []
    for fast in (True, False):
        monkeypatch.setattr(_trec_columns, "available", lambda fast=fast: fast)
        try:
            outcomes.append(read(path))
        except DataError as exc:
            outcomes.append(str(exc))
    return outcomes


SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(text=files(run=True))
def test_run_fast_path_agrees_with_the_exact_reader(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.txt"
    path.write_bytes(text.encode())
    fast, exact = both_ways(read_run, path, monkeypatch)
    if isinstance(exact, str):
        assert fast == exact
        return
    assert (fast.query_ids, fast.doc_ids, fast.name) == (exact.query_ids, exact.doc_ids, exact.name)
    assert np.array_equal(fast.q, exact.q) and np.array_equal(fast.d, exact.d)
    assert fast.scores.tobytes() == exact.scores.tobytes()  # bit for bit, -0.0 and NaN too
    assert fast.doc_index == exact.doc_index


@SETTINGS
@given(text=files(run=False))
def test_qrels_fast_path_agrees_with_the_exact_reader(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "qrels.txt"
    path.write_bytes(text.encode())
    fast, exact = both_ways(read_qrels, path, monkeypatch)
    assert fast == exact
    if not isinstance(exact, str):
        assert list(fast) == list(exact)  # query order too


PLAIN_RUN = b"q1 Q0 d1 1 0.5 tag\nq1 Q0 d2 2 0.25 tag\n\nq2 Q0 d1 1 1e3 tag\r\n"


def test_a_plain_run_takes_the_fast_path() -> None:
    columns = _trec_columns.run_columns(PLAIN_RUN)
    assert columns is not None
    query_ids, q, doc_ids, d, scores, tag = columns
    assert (query_ids, doc_ids, tag) == (("q1", "q2"), ("d1", "d2"), "tag")
    assert q.tolist() == [0, 0, 1] and d.tolist() == [0, 1, 0]
    assert scores.tolist() == [0.5, 0.25, 1000.0]
    assert scores.flags.writeable
    tabs = PLAIN_RUN.replace(b" ", b"\t")
    assert _trec_columns.run_columns(tabs) is not None


@pytest.mark.parametrize(
    "data",
    [
        b"# a comment\n" + PLAIN_RUN,  # comments: the exact reader skips them
        PLAIN_RUN.replace(b"d1 1", b"d1  1"),  # a doubled separator
        PLAIN_RUN.replace(b"q2 Q0", b"q2\tQ0"),  # tabs beside spaces
        PLAIN_RUN + b" q3 Q0 d1 1 0.5 tag\n",  # leading blank
        PLAIN_RUN + b"q3 Q0 d1 1 0.5 tag extra\n",  # trec_eval ignores fields after the tag
        PLAIN_RUN + b"q3 Q0 d1 1 nan tag\n",  # pyarrow also reads nan(1), Python does not
        PLAIN_RUN + b"q3 Q0 d1 1 1_0 tag\n",  # Python reads 1_0, pyarrow does not
        PLAIN_RUN + "q3 Q0 dé 1 0.5 tag\n".encode(),  # non-ASCII
        PLAIN_RUN + b"q3 Q0 d\x0b1 1 0.5 tag\n",  # a separator only str.split() knows
        b"",
    ],
)
def test_anything_not_plain_goes_to_the_exact_reader(data: bytes) -> None:
    assert _trec_columns.run_columns(data) is None


def test_qrels_fast_path_refuses_a_grade_python_reads_differently() -> None:
    assert _trec_columns.qrels_columns(b"q1 0 d1 1\nq1 0 d2 0\n") == (
        ["q1", "q1"], ["d1", "d2"], [1, 0],
    )  # fmt: skip
    assert _trec_columns.qrels_columns(b"q1 0 d1 +1\n") is None


@pytest.mark.slow
def test_rag_judge_retrieval_imports_no_pydantic(tmp_path: Path) -> None:
    """The CLI imports only the subcommand it runs: `retrieval` needs no pydantic, judge or
    report (a third of a large run's time went to imports)."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 0.5 tag\n")
    code = (
        "import sys; from rag_judge.cli import main; "
        f"main(['retrieval', {str(tmp_path / 'qrels.txt')!r}, {str(tmp_path / 'run.txt')!r}, "
        "'-m', 'map']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'jinja2', 'yaml', 'pandas') or m.startswith('rag_judge.evaluators')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"
    assert "map\tall\t1.0000" in out.stdout
