"""`rag-judge retrieval` with trec_eval's further measures and -M, against pytrec_eval on the
same files, and every metric name the kernels know accepted by the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import pytrec_eval

from rag_judge.cli import main
from rag_judge.data.ranking import Run
from rag_judge.data.trec import write_qrels, write_run
from rag_judge.metrics.retrieval import METRIC_FAMILIES
from tests.metrics.test_retrieval_trec_eval import random_collection
from tests.metrics.test_retrieval_trec_measures import top

NAMES = {"bpref": "bpref", "infap": "infAP", "iprec@0.1": "iprec_at_recall_0.10",
         "11pt_avg": "11pt_avg", "set_f1": "set_F", "rprec_mult@0.6": "Rprec_mult_0.60",
         "num_rel_ret": "num_rel_ret", "num_ret": "num_ret"}  # fmt: skip


def files(tmp_path: Path) -> tuple[str, str, dict, dict]:
    qrels, run = random_collection(3)
    run = {q: d for q, d in run.items() if d}  # a TREC file cannot hold an empty ranking
    write_qrels(qrels, tmp_path / "qrels.txt")
    write_run(Run.from_dict(run), tmp_path / "run.txt")
    return str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), qrels, run


@pytest.mark.parametrize("max_docs", [None, 5])
def test_measures_and_max_docs_equal_pytrec_eval(tmp_path, capsys, max_docs) -> None:
    qrels_path, run_path, qrels, run = files(tmp_path)
    args = ["retrieval", qrels_path, run_path, "--format", "json", "--per-query"]
    args += [a for name in [*NAMES, "gm_map"] for a in ("-m", name)]
    args += ["-M", str(max_docs)] if max_docs else []
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    # what the files hold, as pytrec_eval reads it (scores written with repr round-trip)
    measures = {"bpref", "infAP", "iprec_at_recall", "11pt_avg", "set_F", "Rprec_mult",
                "num_rel_ret", "num_ret", "gm_map"}  # fmt: skip
    ref = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(top(run, max_docs))
    for q, values in out["per_query"].items():
        for ours, theirs in NAMES.items():
            assert values[ours] == pytest.approx(ref[q][theirs], abs=1e-12), (q, ours)
    logs = [ref[q]["gm_map"] for q in out["per_query"]]
    assert out["metrics"]["gm_map"] == pytest.approx(math.exp(sum(logs) / len(logs)), rel=1e-12)


def test_table_prints_the_geometric_all_line(tmp_path, capsys) -> None:
    qrels_path, run_path, _, _ = files(tmp_path)
    assert main(["retrieval", qrels_path, run_path, "-m", "gm_map", "--format", "json"]) == 0
    value = json.loads(capsys.readouterr().out)["metrics"]["gm_map"]
    assert main(["retrieval", qrels_path, run_path, "-m", "gm_map"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("gm_map")]
    assert line == [f"gm_map\tall\t{value:.4f}"] and value > 0


def test_every_family_is_accepted(tmp_path, capsys) -> None:
    qrels_path, run_path, _, _ = files(tmp_path)
    example = {"yes": "@3", "opt": "", "no": "", "level": "@0.5", "mult": "@1.2"}
    for family, need in METRIC_FAMILIES.items():
        assert main(["retrieval", qrels_path, run_path, "-m", family + example[need]]) == 0
        assert capsys.readouterr().out.count("\tall\t") == 2  # num_q and the metric


def test_bad_max_docs_and_names_exit_2(tmp_path, capsys) -> None:
    qrels_path, run_path, _, _ = files(tmp_path)
    assert main(["retrieval", qrels_path, run_path, "-m", "map", "-M", "0"]) == 2
    assert "max_docs must be a positive integer" in capsys.readouterr().err
    assert main(["retrieval", qrels_path, run_path, "-m", "iprec@2"]) == 2
    assert "recall level must be in [0, 1]" in capsys.readouterr().err


def test_stale_qrels_warn_on_stderr(tmp_path, capsys) -> None:
    # qrels made for the old index: one of the five retrieved ids is still known
    (tmp_path / "qrels.txt").write_text("q1 0 old 1\nq1 0 gone 2\n")
    run = "".join(f"q1 Q0 new{r} {r + 1} {10 - r} x\n" for r in range(4)) + "q1 Q0 old 5 1 x\n"
    (tmp_path / "run.txt").write_text(run)
    args = ["retrieval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt")]
    assert main([*args, "-m", "ndcg@5"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("rag-judge: warning: judged@5 is 0.200: only 20% of the top 5")
    assert main([*args, "-m", "ndcg@5", "-M", "4"]) == 0  # the top 4 hold no judged one
    assert "judged@5 is 0.000" in capsys.readouterr().err
    (tmp_path / "qrels.txt").write_text("".join(f"q1 0 new{r} 0\n" for r in range(4)))
    assert main([*args, "-m", "ndcg@5"]) == 0
    assert capsys.readouterr().err == ""  # 4 of 5 judged: 0.8 is enough


def test_counts_are_integer_sums_as_trec_eval_prints_them(tmp_path, capsys) -> None:
    """trec_eval's all line sums the counts (its own test files: ``num_ret all 1500``, three
    queries of 500); they printed as a mean, ``500.0000``."""
    qrels_path, run_path, qrels, run = files(tmp_path)
    counts = ["num_rel", "num_rel_ret", "num_ret"]
    ref = pytrec_eval.RelevanceEvaluator(qrels, set(counts)).evaluate(run)
    total = {m: pytrec_eval.compute_aggregated_measure(m, [v[m] for v in ref.values()])
             for m in counts}  # fmt: skip
    assert total["num_ret"] > max(v["num_ret"] for v in ref.values())  # a sum, not a mean
    args = ["retrieval", qrels_path, run_path, "--per-query"]
    args += [a for m in counts for a in ("-m", m)]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"] == {m: int(total[m]) for m in counts}
    assert all(type(v) is int for q in out["per_query"].values() for v in q.values())
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [x for x in lines if "\tall\t" in x][1:] == [
        f"{m:<11}\tall\t{int(total[m])}" for m in counts
    ]
    q = next(iter(ref))
    assert f"num_ret    \t{q}\t{int(ref[q]['num_ret'])}" in lines


def test_c_names_the_missing_queries_not_stale_qrels(tmp_path, capsys) -> None:
    """-c with judged queries the run lacks: their empty rankings are no sign of stale qrels,
    and what pulls the numbers down is said instead."""
    (tmp_path / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(5)))
    (tmp_path / "run.txt").write_text("q0 Q0 d0 1 2 x\nq1 Q0 d1 1 2 x\n")  # q2..q4 missing
    args = ["retrieval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), "-m", "map"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "map\tall\t1.0000" in captured.out  # without -c: q0, q1
    assert main([*args, "-c"]) == 0
    captured = capsys.readouterr()
    assert "map\tall\t0.4000" in captured.out
    assert captured.err == (
        "rag-judge: warning: 3 of the 5 judged queries are missing from the run; -c counts "
        "them as zeros in every metric\n"
    )  # and no judged@10 warning: every document the run gave is judged
