"""The command line: golden numbers through `rag-judge retrieval`, and `rag-judge run`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from rag_judge.cli import main
from rag_judge.cli.run import dry_run_table
from rag_judge.evaluators.base import DryRun
from rag_judge.text import is_abstention
from tests import REPO


def trec_files(tmp_path: Path, queries: dict[str, list[int]], n_rel: dict[str, int] | None = None):
    """Write a run whose list order is the given one, and qrels with those grades.

    ``n_rel`` adds unretrieved relevant documents to a query's judgments.
    """
    qrels, run = [], []
    for q, grades in queries.items():
        for r, g in enumerate(grades):
            run.append(f"{q} Q0 {q}-d{r} {r + 1} {100 - r} test")
            qrels.append(f"{q} 0 {q}-d{r} {g}")
        for extra in range((n_rel or {}).get(q, 0)):
            qrels.append(f"{q} 0 {q}-x{extra} 1")
    (tmp_path / "qrels.txt").write_text("\n".join(qrels) + "\n")
    (tmp_path / "run.txt").write_text("\n".join(run) + "\n")
    return str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt")


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["retrieval", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("grades", "metric", "value"),
    [
        ([3, 2, 0, 1], "ndcg@4", 0.985442),
        ([1, 3, 0, 2, 2], "ndcg@5", 0.795401),
        ([3, 2, 3, 0, 1], "ndcg@5", 0.972364),
        ([3, 2, 3, 0, 1], "ndcg_exp@5", 0.957478),
        ([5, 3, 5, 0, 2], "dcg@3", 9.3928),
        ([5, 3, 5, 0, 2], "idcg@5", 10.5160),
        ([5, 3, 5, 0, 2], "ndcg@3", 0.972877),
        ([5, 3, 5, 0, 2], "ndcg@5", 0.966764),
    ],
)
def test_graded_golden_numbers_through_the_cli(tmp_path, capsys, grades, metric, value) -> None:
    qrels, run = trec_files(tmp_path, {"q": grades})
    out = cli_json(capsys, qrels, run, "-m", metric)
    assert out["metrics"][metric] == pytest.approx(value, abs=5e-5)


def test_binary_golden_numbers_through_the_cli(tmp_path, capsys) -> None:
    # 001: relevant at ranks 1, 3, 5 of 5; 10 relevant in all (7 unretrieved).
    qrels, run = trec_files(tmp_path, {"q": [1, 0, 1, 0, 1]}, n_rel={"q": 7})
    out = cli_json(capsys, qrels, run, "-m", "precision@2", "-m", "recall@3", "-m",
                   "precision@3", "-m", "f1@3", "-m", "map")  # fmt: skip
    assert out["metrics"] == pytest.approx(
        {"precision@2": 0.5, "recall@3": 0.2, "precision@3": 2 / 3, "f1@3": 0.307692,
         "map": 0.226667}, abs=1e-6)  # fmt: skip


def test_mrr_and_per_query_output(tmp_path, capsys) -> None:
    qrels, run = trec_files(tmp_path, {"q1": [1, 0], "q2": [0, 1]})
    out = cli_json(capsys, qrels, run, "-m", "mrr", "--per-query")
    assert out == {"metrics": {"mrr": 0.75}, "per_query": {"q1": {"mrr": 1.0}, "q2": {"mrr": 0.5}}}


def test_table_format_lists_num_q_and_means(tmp_path, capsys) -> None:
    qrels, run = trec_files(tmp_path, {"q1": [1, 0], "q2": [0, 1]})
    assert main(["retrieval", qrels, run, "-m", "mrr", "--per-query"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].split() == ["num_q", "all", "2"]
    assert lines[-1].split() == ["mrr", "all", "0.7500"]
    assert ["mrr", "q2", "0.5000"] in [ln.split() for ln in lines]


@pytest.mark.parametrize(
    ("metric", "needle"),
    [("ndgc@10", "unknown retrieval metric 'ndgc@10'; valid metrics:"),
     ("ndcg@-1", "k must be a positive integer"), ("map@x", "k must be a positive integer")],
)  # fmt: skip
def test_bad_metric_is_a_clear_error(tmp_path, capsys, metric, needle) -> None:
    qrels, run = trec_files(tmp_path, {"q": [1]})
    assert main(["retrieval", qrels, run, "-m", metric]) == 2
    assert needle in capsys.readouterr().err


def test_run_command_writes_reports(tmp_path: Path) -> None:
    # A real subprocess through the installed console entry point's module.
    proc = subprocess.run(
        [sys.executable, "-m", "rag_judge.cli", "run", "configs/demo.yaml", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "| ndcg@5 |" in proc.stdout
    assert "values failed" not in proc.stderr  # nothing failed: no failure summary
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["mrr"]["n"] == len(report["samples"])


def test_run_with_a_bad_dataset_override(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n{"id": 1, "contexts": 3}\n')
    code = main(["run", "configs/demo.yaml", "--dataset", str(bad), "--out", str(tmp_path)])
    assert code == 2
    assert f"{bad}:2: field 'contexts'" in capsys.readouterr().err


def dry_run_rows(out: str) -> dict[str, dict[str, str]]:
    """The rows of `rag-judge run --dry-run`'s table: evaluator -> column -> cell."""
    header, rule, *rows = out.strip().splitlines()
    assert set(rule) == {"-", " "}
    titles = re.split(r"\s{2,}", header.strip())
    return {cells[0]: dict(zip(titles, cells, strict=True))
            for cells in (re.split(r"\s{2,}", row.strip()) for row in rows)}  # fmt: skip


def test_dry_run_counts_judge_prompts_and_calls_nothing(tmp_path: Path, capsys) -> None:
    assert main(["run", "configs/demo.yaml", "--dry-run", "--out", str(tmp_path)]) == 0
    rows = dry_run_rows(capsys.readouterr().out)
    # one row per evaluator that would call a model: the judge and grounding (the others
    # return None)
    assert list(rows) == ["evaluators[4] (judge)", "evaluators[5] (grounding)"]
    row = rows["evaluators[4] (judge)"]
    assert list(row) == ["evaluator", "prompts", "skipped", "requests", "cache hits",
                         "prompt tokens", "max completion tokens", "cost"]  # fmt: skip
    assert len(row) == 1 + len(fields(DryRun))  # a column for every estimate
    # 34 samples x 4 single-request rubrics + one request per retrieved context
    samples = [json.loads(x) for x in (REPO / "configs/data/demo.jsonl").read_text().splitlines()]
    contexts = sum(len(s["contexts"]) for s in samples)
    assert int(row["prompts"].replace(",", "")) == 34 * 4 + contexts
    assert int(row["prompt tokens"].replace(",", "")) > 0
    assert row["cost"] == "no price set"  # the demo's stub judge has no prices
    # grounding: a claim list per answer, and a verdict request per answer that does not
    # abstain (estimated from its sentences): 34 + 31
    grounding = rows["evaluators[5] (grounding)"]
    answering = sum(not is_abstention(s["answer"]) for s in samples)
    assert answering == 31
    assert int(grounding["prompts"]) == 34 + answering
    assert not (tmp_path / "report.json").exists()


def test_dry_run_table_cost_and_no_judge(tmp_path: Path, capsys) -> None:
    estimate = DryRun(prompts=1200, skipped=3, requests=1100, cache_hits=100,
                      prompt_tokens_estimate=123456, completion_tokens_max=600,
                      cost_estimate=0.25)  # fmt: skip
    rows = dry_run_rows(dry_run_table([("evaluators[0] (judge)", estimate)]))
    assert rows["evaluators[0] (judge)"] == {
        "evaluator": "evaluators[0] (judge)", "prompts": "1,200", "skipped": "3",
        "requests": "1,100", "cache hits": "100", "prompt tokens": "123,456",
        "max completion tokens": "600", "cost": "$0.2500"}  # fmt: skip
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"dataset: {REPO / 'configs/data/demo.jsonl'}\nevaluators: [{{type: bleu}}]\n"
    )
    assert main(["run", str(config), "--dry-run"]) == 0
    assert (
        capsys.readouterr().out.strip()
        == "no judge calls: no evaluator of this config calls a model"
    )


def test_compare_two_runs_end_to_end(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "configs/demo.yaml", "--out", str(a)]) == 0
    assert main(["run", "configs/demo.yaml", "--out", str(b)]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "-m", "ndcg@5", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ndcg = out["comparisons"][0]["metrics"]["ndcg@5"]
    assert (ndcg["diff"], ndcg["p_value"], ndcg["n"]) == (0.0, 1.0, 34)


def test_gate_exit_codes_through_main(tmp_path: Path, capsys) -> None:
    assert main(["run", "configs/demo.yaml", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path), "--fail-under", "ndcg@5=0.56"]) == 0
    assert main(["gate", str(tmp_path), "--fail-under", "ndcg@5=0.57"]) == 1
    assert "FAIL ndcg@5 = 0.5607 (needs >= 0.57)" in capsys.readouterr().out
    assert main(["gate", str(tmp_path), "--threshold", "ndcg@5=>0.6"]) == 2


def test_headings_and_header_come_before_their_steps(tmp_path: Path) -> None:
    """stdout and stderr in one stream, as a terminal or a CI log shows them: each matrix
    heading, then the header naming the judge, then that variant's progress lines."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join((REPO / "configs/data/demo.jsonl").read_text().splitlines(True)[:3]))
    config = tmp_path / "m.yaml"
    config.write_text(
        f"name: m\ndataset: {data}\nevaluators:\n  - {{type: bleu}}\n"
        "  - {type: judge, rubrics: [faithfulness], cache: null}\n"
        "matrix:\n  s:\n    a: {seed: 1}\n    b: {seed: 2}\n"
    )
    both = io.StringIO()  # not a terminal: a line per finished step
    with contextlib.redirect_stdout(both), contextlib.redirect_stderr(both):
        assert main(["run", str(config), "--out", str(tmp_path / "r")]) == 0
    lines = both.getvalue().splitlines()
    header = "rag-judge: evaluators: bleu, judge · judge: stub/stub-lexical-support"
    step = [i for i, line in enumerate(lines) if line.startswith("evaluators[")]
    assert len(step) == 4, lines
    a, b = lines.index("## s=a"), lines.index("## s=b")
    assert a < lines.index(header, a) < step[0] < step[1] < b
    assert b < lines.index(header, b) < step[2] < step[3]
    assert "rag-judge: 3 samples evaluated" in lines[step[3] :]
