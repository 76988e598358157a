"""TREC files are read as trec_eval 10 reads them: ``#`` comment lines are skipped, fields after a
run's tag are ignored, and everything else that is malformed is an error naming file:line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

import rag_judge.data.trec as trec
from rag_judge.data.ranking import Qrels, Rankings, Run, rankings_for
from rag_judge.data.trec import read_qrels, read_run
from rag_judge.errors import ConfigError, DataError
from rag_judge.metrics.retrieval import compute

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d1 2\nq2 0 d3 1\n"
RUN = "q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8 t\nq2 Q0 d3 1 0.7 t\nq2 Q0 d1 2 0.6 t\n"


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def same_run(a: Run, b: Run) -> bool:
    return a.to_dict() == b.to_dict() and a.ordered() == b.ordered() and a.name == b.name


def with_comments(text: str, kinds: str, fake: str) -> str:
    """``text`` with comment lines: at the start (s), between lines (m: a few in a row, one of
    them ``fake``, a line that would be data without its '#'), at the end without a final
    newline (e), and indented (i: only a run takes that as a comment)."""
    lines = text.splitlines()
    out = ["# a header"] if "s" in kinds else []
    for n, line in enumerate(lines):
        out.append(line)
        if "m" in kinds and n == 1:
            out += ["#comment", fake, "#", ""]
        if "i" in kinds and n == 2:
            out.append("  \t" + fake)
    return "\n".join(out) + ("\n# the end" if "e" in kinds else "\n")


# --- qrels ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kinds", ["s", "m", "e", "sme"])
def test_qrels_comment_lines_are_skipped(tmp_path: Path, kinds: str) -> None:
    expected = read_qrels(write(tmp_path, QRELS, "plain.txt"))
    commented = with_comments(QRELS, kinds, fake="#q1 0 d9 3")
    assert read_qrels(write(tmp_path, commented, "qrels.txt")) == expected


def test_qrels_comment_lines_are_skipped_in_a_non_ascii_file(tmp_path: Path) -> None:
    text = "# jugé à la main\nqé 0 dé 1\n#\nqé 0 d2 0\n"
    assert read_qrels(write(tmp_path, text, "qrels.txt")) == {"qé": {"dé": 1, "d2": 0}}


def test_an_indented_hash_is_a_qrels_judgment_as_in_trec_eval(tmp_path: Path) -> None:
    # trec_eval 10 takes '#' as a comment only in the first column of a qrels line.
    qrels = read_qrels(write(tmp_path, "q1 0 d1 1\n  #q 0 d1 2\n", "qrels.txt"))
    assert qrels == {"q1": {"d1": 1}, "#q": {"d1": 2}}


def test_only_comments_is_no_judgments(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="contains no judgments"):
        read_qrels(write(tmp_path, "# nothing judged yet\n#\n", "qrels.txt"))
    with pytest.raises(DataError, match="contains no results"):
        read_run(write(tmp_path, "# nothing retrieved\n  # indented\n", "run.txt"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("# c\nq1 0 d1 1 x\n", ":2: a qrels .* line has 4 columns, found 5"),  # not ignored
        ("# c\n#\nq1 0 d1\n", ":3: a qrels .* line has 4 columns, found 3"),
        ("# c\nq1 0 d1 1\n# c\nq1 0 d2 high\n", ":4: field 'grade': 'high' is not an integer"),
        ("#c\nq1 0 d1 1\n\n# c\nq1 0 d1 2\n", ":5: query 'q1' judges doc 'd1' twice"),
        ("  # a note\nq1 0 d1 1\n", ":1: a qrels .* line has 4 columns, found 3"),
    ],
)
def test_bad_qrels_lines_are_named_counting_comment_lines(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = write(tmp_path, text, "qrels.txt")
    with pytest.raises(DataError, match=needle) as err:
        read_qrels(path)
    assert str(err.value).startswith(str(path))


# --- runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        lambda n, line: line + " extra",  # every line
        lambda n, line: line + " a b\tc" if n % 2 else line,  # some lines, several fields
        lambda n, line: line + "  # a trailing remark",
    ],
    ids=["every line", "some lines", "a remark"],
)
def test_run_fields_after_the_tag_are_ignored(tmp_path: Path, extra) -> None:
    expected = read_run(write(tmp_path, RUN, "plain.txt"))
    text = "\n".join(extra(n, line) for n, line in enumerate(RUN.splitlines())) + "\n"
    got = read_run(write(tmp_path, text, "run.txt"))
    assert same_run(got, expected)
    assert got.name == "t"


@pytest.mark.parametrize("kinds", ["s", "m", "e", "i", "smei"])
def test_run_comment_lines_are_skipped(tmp_path: Path, kinds: str) -> None:
    expected = read_run(write(tmp_path, RUN, "plain.txt"))
    commented = with_comments(RUN, kinds, fake="#q1 Q0 d9 1 5.0 t")
    got = read_run(write(tmp_path, commented, "run.txt"))
    assert same_run(got, expected)


def test_run_extra_fields_and_comments_in_a_non_ascii_file(tmp_path: Path) -> None:
    text = "# exécution\nqé Q0 dé 1 0.9 t x\n  # ü\nqé Q0 d2 2 0.8 t\n"
    run = read_run(write(tmp_path, text, "run.txt"))
    assert run.ordered() == {"qé": [("dé", 0.9), ("d2", 0.8)]}


def test_run_extra_fields_and_comments_in_a_later_slice(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(trec, "_CHUNK", 40)  # about two lines per slice
    lines = [f"q{i // 10} Q0 d{i} {i} {1 - i / 100} t" for i in range(60)]
    expected = read_run(write(tmp_path, "\n".join(lines) + "\n", "plain.txt"))
    lines[31] += " extra"
    lines[47] = "# a comment\n" + lines[47] + " x y"
    got = read_run(write(tmp_path, "\n".join(lines) + "\n", "run.txt"))
    assert same_run(got, expected)
    lines[55] = lines[55].replace(" t", "")
    with pytest.raises(DataError, match=r":57: a run .* line has 6 columns, found 5"):
        read_run(write(tmp_path, "\n".join(lines) + "\n", "bad.txt"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("# c\nq1 Q0 d1 1 0.5 t x\nq1 Q0 d2 2 0.4\n", ":3: a run .* line has 6 columns, found 5"),
        ("# c\nq1 Q0 d1 1 0.5 t x\n  # c\nq1 Q0 d2 2 abc t\n", ":4: field 'score': 'abc'"),
        ("#\nq1 Q0 d1 1 0.5 t x\n#\nq1 Q0 d1 2 0.4 t\n", ":4: query 'q1' retrieves doc 'd1' twice"),
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 1 x t y\n", ":2: field 'score': 'x' is not a number"),
    ],
)
def test_bad_run_lines_are_named_counting_comment_lines(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = write(tmp_path, text, "run.txt")
    with pytest.raises(DataError, match=needle) as err:
        read_run(path)
    assert str(err.value).startswith(str(path))


@pytest.mark.parametrize(
    ("read", "data", "needle"),
    [
        (read_qrels, b"q1 0 d1 1\nq1 0 caf\xe9 1\n", ":2: field 'docid': not UTF-8 .* column 9,"),
        (read_qrels, b"# c\r\nq1 0 d1 1\r\nq\xff 0 d2 1\r\n", ":3: field 'qid': not UTF-8"),
        (read_qrels, b"q1 0 d1 1\n# \xe9t\xe9\n", ":2: a comment line: not UTF-8"),
        (read_run, b"q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4 \xfft\n", ":2: field 'tag': not UTF-8"),
        (read_run, b"q1 Q0 d1 1 0.5 \xc3\xa9t \xff\n", ":1: field 7 \\(past the 6 a line"),
    ],
)
def test_a_byte_that_is_not_utf8_is_named_by_line_and_field(
    tmp_path: Path, read, data: bytes, needle: str
) -> None:
    """Before: ``qrels.txt: not UTF-8 text (invalid continuation byte at byte 19)``."""
    path = tmp_path / "trec.txt"
    path.write_bytes(data)
    with pytest.raises(DataError, match=needle) as err:
        read(path)
    assert str(err.value).startswith(f"{path}:")


# --- the fast path --------------------------------------------------------------------------


def test_plain_files_take_the_fast_path(tmp_path: Path, monkeypatch) -> None:
    def per_line(*args: object) -> None:
        raise AssertionError("a plain file took the per-line path")

    monkeypatch.setattr(trec._Layout, "lines", per_line)
    assert read_qrels(write(tmp_path, QRELS, "qrels.txt"))["q2"] == {"d1": 2, "d3": 1}
    run = read_run(write(tmp_path, RUN.replace(" d", " d#"), "run.txt"))  # '#' inside an id
    assert run.doc_ids == ("d#1", "d#2", "d#3")


def test_a_comment_line_shaped_like_data_is_still_a_comment(tmp_path: Path) -> None:
    # As many fields as a data line: only the '#' tells the fast check that it is a comment.
    qrels = read_qrels(write(tmp_path, "#q1 0 d9 3\n" + QRELS, "qrels.txt"))
    assert qrels == read_qrels(write(tmp_path, QRELS, "plain_qrels.txt"))
    run = read_run(write(tmp_path, RUN + "#q1 Q0 d9 1 5.0 t\n", "run.txt"))
    assert same_run(run, read_run(write(tmp_path, RUN, "plain_run.txt")))


# --- end to end -----------------------------------------------------------------------------


def random_trec(seed: int) -> tuple[Qrels, dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(40):
        docs = rng.choice(60, size=30, replace=False)
        qrels[f"q{q}"] = {f"d{d}": int(rng.integers(0, 4)) for d in docs[: rng.integers(1, 15)]}
        scores = np.round(rng.random(int(rng.integers(1, 20))), 2)  # rounding makes ties
        run[f"q{q}"] = {f"d{d}": float(s) for d, s in zip(docs[5:], scores)}
    return qrels, run


def messy_files(
    tmp_path: Path, qrels: Qrels, run: dict[str, dict[str, float]]
) -> tuple[Path, Path]:
    """TREC files trec_eval 10 reads, with comment lines and fields after the run tag."""
    q_lines, r_lines = ["# qrels of a test collection"], ["# run: bm25", ""]
    for n, (qid, docs) in enumerate(qrels.items()):
        q_lines += [f"{qid}\t0 {d}  {g}" for d, g in docs.items()]
        if n % 7 == 3:
            q_lines.append(f"# {qid} done")
    for n, (qid, docs) in enumerate(run.items()):
        for rank, (d, s) in enumerate(docs.items(), start=1):
            r_lines.append(
                f"{qid} Q0 {d} {rank} {s!r} bm25" + (" k1=0.9 b=0.4" if rank % 3 else "")
            )
        if n % 5 == 1:
            r_lines.append(f"   # {qid} done")
    return (
        write(tmp_path, "\n".join(q_lines) + "\n", "qrels.txt"),
        write(tmp_path, "\n".join(r_lines) + "\n", "run.txt"),
    )


@pytest.mark.parametrize("seed", range(3))
def test_same_numbers_as_pytrec_eval_through_messy_files(tmp_path: Path, seed: int) -> None:
    qrels, run = random_trec(seed)
    qrels_path, run_path = messy_files(tmp_path, qrels, run)
    got_qrels, got_run = read_qrels(qrels_path), read_run(run_path)
    assert got_qrels == qrels
    assert got_run.to_dict() == run

    measures = {"map": "map", "ndcg@10": "ndcg_cut_10", "precision@5": "P_5", "mrr": "recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"map", "ndcg_cut.10", "P.5", "recip_rank"})
    expected = evaluator.evaluate(run)
    qids, rankings = rankings_for(got_qrels, got_run)
    assert qids == sorted(expected)
    values = compute(rankings, list(measures))
    for ours, theirs in measures.items():
        for i, q in enumerate(qids):
            assert values[ours][i] == pytest.approx(expected[q][theirs], abs=1e-9), (ours, q)


# --- the join's judgment mask ----------------------------------------------------------------


@pytest.mark.parametrize("join", ["dense", "search"])
def test_rankings_for_marks_which_ranked_documents_are_judged(join: str, monkeypatch) -> None:
    if join == "search":  # the binary-search join used for huge key spaces or odd grades
        monkeypatch.setattr("rag_judge.data.ranking._DENSE_LIMIT", 0)
    qrels = {"a": {"d1": 0, "d2": -1, "d3": 2}, "b": {"d9": 1}}
    run = Run.from_dict({"a": {"d4": 9.0, "d3": 8.0, "d2": 7.0, "d1": 6.0}, "b": {"d1": 1.0}})
    qids, rankings = rankings_for(qrels, run)
    assert qids == ["a", "b"]
    assert rankings.known is not None
    # zero and negative grades are judgments too; the padding of "b" is not
    assert rankings.known.tolist() == [[False, True, True, True], [False, False, False, False]]
    assert np.array_equal(rankings.ranked[0], [0.0, 2.0, -1.0, 0.0])
    got = compute(rankings, ["judged@2", "judged@10", "num_ret"])
    assert got["judged@2"].tolist() == [0.5, 0.0]
    assert got["judged@10"].tolist() == [0.75, 0.0]
    assert got["num_ret"].tolist() == [4.0, 1.0]


def test_known_defaults_to_every_ranked_document_and_is_checked() -> None:
    plain = Rankings.from_lists([[1, 0], [2]], [[1], [2]])
    assert plain.known is None
    assert compute(plain, ["judged@3"])["judged@3"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="known has shape"):
        Rankings(plain.ranked, plain.judged, np.ones((2, 3), dtype=bool))


def test_max_docs_reads_the_top_in_trec_eval_order() -> None:
    # trec_eval order: d3 (2.0), then the float32 tie d9 > d10 by doc id descending
    run = Run.from_dict({"q": {"d10": 1.0 + 1e-12, "d9": 1.0, "d3": 2.0}})
    _, rankings = rankings_for({"q": {"d9": 1, "d10": 0}}, run)
    got = compute(rankings, ["num_ret", "num_rel_ret", "set_precision", "bpref"], max_docs=2)
    assert got["num_ret"].tolist() == [2.0]
    assert got["num_rel_ret"].tolist() == [1.0]
    assert got["set_precision"].tolist() == [0.5]
    assert got["bpref"].tolist() == [1.0]  # d10, the judged non-relevant one, is cut off
    with pytest.raises(ConfigError, match="max_docs must be a positive integer"):
        compute(rankings, ["map"], max_docs=0)
