"""Retrieval metrics from judge grades corrected with human chunk grades: the label file's
``relevance`` key, a run's estimates (``report.estimates['ndcg@5']``), the grade confusion,
and the gate, compare and calibrate paths that read them."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from rag_judge import DataError, Pipeline, Report
from rag_judge.analysis.calibration import load_labels
from rag_judge.analysis.compare import compare_reports
from rag_judge.analysis.gates import check_gates
from rag_judge.analysis.relevance_labels import load_relevance
from rag_judge.cli import main
from rag_judge.judge.relevance import relevance_grade
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import WarningKind
from rag_judge.stats.ppi import ppi_mean

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
CONFIG = """name: graded
dataset: data.jsonl
seed: 7
labels: labels.jsonl
evaluators:
  - type: judge
    rubrics: [context_relevance]
    cache: null
  - type: retrieval
    metrics: [ndcg@5, precision@5, recall@5, mrr]
    relevance_from: context_relevance
"""


def _dataset(folder: Path, n: int = 20) -> None:
    rng = random.Random(3)
    with (folder / "data.jsonl").open("w") as fh:
        for i in range(n):
            question = " ".join(rng.sample(WORDS, 3))
            contexts = [
                {"id": f"c{i}-{r}", "text": " ".join(rng.sample(WORDS, rng.randint(1, 5)))}
                for r in range(5)
            ]
            row = {"id": f"q{i:02d}", "question": question + "?", "answer": "alpha"}
            fh.write(json.dumps({**row, "contexts": contexts}) + "\n")


def _run(folder: Path, labels: list[dict[str, object]]) -> Report:
    """A run of CONFIG in ``folder`` with ``labels``; its report.json is written there."""
    folder.mkdir(parents=True, exist_ok=True)
    _dataset(folder)
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    (folder / "exp.yaml").write_text(CONFIG)
    report = Pipeline.from_yaml(folder / "exp.yaml").run().report
    (folder / "report.json").write_text(report.to_json())
    return report


def _ndcg(grades: list[int], k: int = 5) -> float:
    """NDCG@k, linear gain, of a ranking graded ``grades`` (the ideal: the same grades sorted)."""

    def dcg(g: list[int]) -> float:
        return sum(x / math.log2(i + 2) for i, x in enumerate(g[:k]))

    ideal = dcg(sorted(grades, reverse=True))
    return dcg(grades) / ideal if ideal else 0.0


def _unbiased(judge: list[float]) -> list[int]:
    """Stricter human grades: the judge's 0-3 grade less one on every other chunk."""
    return [max(0, relevance_grade(s) - (r % 2)) for r, s in enumerate(judge)]


def _labels(folder: Path) -> tuple[Report, list[str], dict[str, list[int]]]:
    """A first run without chunk grades gives the judge's; people grade a seeded subset."""
    first = _run(folder / "first", [{"id": "q00", "context_relevance": 3}])
    ids = random.Random(7).sample(first.ids(), 10)
    human = {}
    for result in first.samples:
        if result.id in ids:
            scores = [c.score for c in result.judgments["context_relevance"].contexts]
            human[result.id] = _unbiased([s for s in scores if s is not None])
    return first, ids, human


def test_a_run_corrects_ndcg_with_the_chunk_grades(tmp_path: Path) -> None:
    first, ids, human = _labels(tmp_path)
    rows: list[dict[str, object]] = []
    for i, sid in enumerate(ids):  # half by rank, half by context id
        grades = human[sid]
        by_id = {f"c{int(sid[1:])}-{r}": g for r, g in enumerate(grades)}
        rows.append({"id": sid, "relevance": grades if i % 2 else by_id})
    report = _run(tmp_path / "second", rows)
    f = first.column("ndcg@5")
    y = {sid: _ndcg(g) for sid, g in human.items()}
    expected = ppi_mean(
        [y[s] for s in first.ids() if s in y],
        [f[s] for s in first.ids() if s in y],
        [f[s] for s in first.ids() if s not in y],
    )
    got = report.estimates["ndcg@5"]
    assert got.n_labelled == 10 and got.n_unlabelled == 10
    assert got.estimate == pytest.approx(expected.estimate, abs=1e-12)
    assert got.ci is not None and expected.ci_low is not None and expected.ci_high is not None
    assert got.ci == pytest.approx((max(0.0, expected.ci_low), min(1.0, expected.ci_high)))
    assert got.judge_mean == pytest.approx(first.summary["ndcg@5"].mean)
    assert got.labelled_mean == pytest.approx(np.mean(list(y.values())))
    assert {"precision@5", "recall@5"} <= report.estimates.keys()
    assert "mrr" not in report.estimates  # no cut-off: a top-k grading does not cover it
    assert report.labels[ids[0]]["ndcg@5"] == pytest.approx(y[ids[0]])
    # The confusion matrix: every graded chunk once, the judge at or above the person.
    confusion = report.grade_confusion
    assert confusion is not None and confusion.queries == 10
    assert sum(map(sum, confusion.matrix)) == 50
    assert all(n == 0 for h, row in enumerate(confusion.matrix) for j, n in enumerate(row) if j < h)
    assert "Chunk grades: human vs judge" in render_markdown(report)
    # The gate names and compare's PPI difference read them as a rubric's.
    gates = check_gates(report, {"ndcg@5_ppi": f">= {got.estimate - 1e-9}"})
    assert gates.passed and gates.checked[0].value == got.estimate
    comparison = compare_reports(report, report).metrics["ndcg@5"]
    assert comparison.ppi_diff == pytest.approx(0.0, abs=1e-12)
    # report.json keeps them; calibrate with the same file gives the same numbers.
    saved = Report.load(tmp_path / "second" / "report.json")
    assert saved.grade_confusion == confusion and saved.estimates["ndcg@5"] == got


def test_a_run_without_chunk_grades_writes_no_confusion(tmp_path: Path) -> None:
    report = _run(tmp_path, [{"id": "q00", "context_relevance": 3}])
    assert report.grade_confusion is None
    assert "grade_confusion" not in report.to_json()
    assert "ndcg@5" not in report.estimates


def test_calibrate_prints_the_estimates_and_the_confusion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, ids, human = _labels(tmp_path)
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps({"id": s, "relevance": human[s]}) + "\n" for s in ids))
    run = tmp_path / "first" / "report.json"
    assert main(["calibrate", str(run), str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    y = {sid: _ndcg(g) for sid, g in human.items()}
    f = first.column("ndcg@5")
    expected = ppi_mean(
        [y[s] for s in first.ids() if s in y],
        [f[s] for s in first.ids() if s in y],
        [f[s] for s in first.ids() if s not in y],
    )
    assert out["ndcg@5"]["ppi"]["estimate"] == pytest.approx(expected.estimate, abs=1e-12)
    assert sum(map(sum, out["grade_confusion"]["matrix"])) == 50
    assert main(["calibrate", str(run), str(path)]) == 0
    assert "human ↓ judge →" in capsys.readouterr().out


def test_a_partial_grading_is_left_out_with_a_warning(tmp_path: Path) -> None:
    rows = [
        {"id": "q01", "relevance": [1, 0, 2]},  # 3 of the top 5
        {"id": "q02", "relevance": {"c2-0": 1, "c9-9": 0}},  # no such chunk
        {"id": "q03", "relevance": [0, 0, 1, 0, 2]},
        {"id": "q04", "relevance": [1, 1, 0, 0, 0]},
    ]
    report = _run(tmp_path, rows)
    assert report.estimates["ndcg@5"].n_labelled == 2
    warning = next(w for w in report.warnings if w.kind is WarningKind.PARTIAL_GRADES)
    assert warning.value == 2
    assert "labels.jsonl:1: field 'relevance': grades 3 of the top 5 chunks" in warning.message


def test_label_file_errors_name_the_line_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"id": "q1", "faithfulness": 4, "relevance": [2, 0, 1]}\n'
        '{"id": "q2", "relevance": {"d1": 3, "d2": 0}}\n'
        '{"id": "q3", "relevance": [2, 0, 4]}\n'
    )
    with pytest.raises(DataError, match=r"labels.jsonl:3: field 'relevance\[2\]': 4 is not"):
        load_relevance(path)
    path.write_text(
        '{"id": "q1", "faithfulness": 4, "relevance": [2, 0, 1]}\n'
        '{"id": "q2", "relevance": {"d1": 3, "d2": 0}}\n'
    )
    assert load_labels(path) == {"q1": {"faithfulness": 4}, "q2": {}}  # rubric labels as before
    found = load_relevance(path)
    assert found["q1"].grades == (2, 0, 1) and found["q2"].grades == {"d1": 3, "d2": 0}
    for bad in ('"2"', "true", "1.5"):
        path.write_text(f'{{"id": "q1", "relevance": [1, {bad}]}}\n')
        with pytest.raises(DataError, match=r"labels.jsonl:1: field 'relevance\[1\]'"):
            load_relevance(path)
    path.write_text('{"id": "q1", "relevance": 3}\n')
    with pytest.raises(DataError, match="field 'relevance': expected a list of 0-3 grades"):
        load_relevance(path)
    csv = tmp_path / "labels.csv"
    csv.write_text("id,faithfulness,relevance\nq1,4,2\n")
    with pytest.raises(DataError, match=r"labels\.csv:1: column 'relevance'"):
        load_relevance(csv)


def test_a_top_k_grading_of_a_longer_list_corrects_only_what_reads_the_top_k(
    tmp_path: Path,
) -> None:
    """Five chunks retrieved, metrics at k = 3: a query graded on its top 3 alone counts for
    P@3 (which reads only them) but not for R@3 or NDCG@3, whose ideal needs every retrieved
    chunk graded (an ungraded relevant chunk at rank 4 would be missing from it)."""
    folder = tmp_path / "k3"
    folder.mkdir()
    _dataset(folder)
    config = CONFIG.replace(
        "[ndcg@5, precision@5, recall@5, mrr]", "[ndcg@3, precision@3, recall@3]"
    )
    (folder / "exp.yaml").write_text(config)
    whole = {f"q{i:02d}": [1, 0, 0, 2, 0] for i in range(4)}  # a relevant chunk at rank 4
    top = {f"q{i:02d}": [1, 0, 0] for i in range(4, 8)}
    rows = [{"id": sid, "relevance": g} for sid, g in {**whole, **top}.items()]
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = Pipeline.from_yaml(folder / "exp.yaml").run().report
    assert report.estimates["precision@3"].n_labelled == 8
    for metric in ("recall@3", "ndcg@3"):
        assert report.estimates[metric].n_labelled == 4, metric
        assert metric not in report.labels["q05"]
    assert report.labels["q01"]["recall@3"] == pytest.approx(0.5)  # 1 of the 2 relevant chunks
    assert report.labels["q05"]["precision@3"] == pytest.approx(1 / 3)
    warned = [w for w in report.warnings if w.kind is WarningKind.PARTIAL_GRADES]
    assert len(warned) == 1 and warned[0].value == 4
    assert "graded only their top k" in warned[0].message and "recall@3" in warned[0].message
