"""report.json is written one sample at a time, byte for byte what ``Report.to_json`` gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge import BleuEvaluator, JudgeEvaluator, Pipeline, RetrievalEvaluator
from rag_judge.report import summary_table, write_json
from rag_judge.report.model import Report
from tests.evaluators import judge_sample

SAMPLES = [
    judge_sample(1, relevance={"d1": 2}),
    judge_sample(2, answer='Ünïcode answer\nwith a newline, a "quote" and a tab\t', contexts=[]),
    judge_sample(3, references=["ref one", "ref two"]),
]


def _report(samples: list) -> Report:  # type: ignore[type-arg]
    judge = JudgeEvaluator(rubrics=["faithfulness", "correctness"], cache=None)
    evaluators = [RetrievalEvaluator(metrics=["mrr", "ndcg@3"]), BleuEvaluator(), judge]
    return Pipeline(evaluators).run(samples).report


@pytest.mark.parametrize("n", [0, 1, 3])
def test_streamed_report_json_equals_to_json(tmp_path: Path, n: int) -> None:
    report = _report(SAMPLES) if n else _report(SAMPLES[:1]).model_copy(update={"samples": []})
    if n:
        report = report.model_copy(update={"samples": report.samples[:n]})
    path = tmp_path / "report.json"
    write_json(report, path)
    assert path.read_text(encoding="utf-8") == report.to_json() + "\n"
    assert Report.load(path) == report


def test_the_interval_level_is_stored_and_old_reports_read_their_config_s(tmp_path: Path) -> None:
    report = _report(SAMPLES[:1])
    path = tmp_path / "report.json"
    write_json(report, path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["confidence"] == 0.95 == data["config"]["bootstrap"]["confidence"]
    # A report.json written before the level was stored: its config's level, else 0.95.
    del data["confidence"]
    data["config"]["bootstrap"]["confidence"] = 0.9
    path.write_text(json.dumps(data), encoding="utf-8")
    old = Report.load(path)
    assert old.confidence == 0.9
    assert "| metric | mean | 90% CI |" in summary_table(old)
    del data["config"]["bootstrap"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert Report.load(path).confidence == 0.95
    # A stored level wins over the config's.
    data["confidence"], data["config"]["bootstrap"] = 0.8, {"confidence": 0.9}
    path.write_text(json.dumps(data), encoding="utf-8")
    assert Report.load(path).confidence == 0.8
