"""A judge that produced nothing fails every judge-derived gate, and every command that judges
exits non-zero (issue 27, item 11)."""

from __future__ import annotations

import json

import pytest

from rag_judge.analysis.gates import check_gates
from rag_judge.cli import main
from rag_judge.cli.pairwise import EXIT_JUDGE_FAILED
from rag_judge.report.model import MetricSummary, Report
from tests.cli.test_run_failures import DOWN, config, dataset
from tests.fake_openai_server import FakeOpenAIServer, error


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def test_unscored_rate_fails_when_the_judge_scored_nothing() -> None:
    # A dead server errs on every call and unscores none: 0 unscored of 6 is no pass.
    dead = {"kind": "judge", "scale": (1, 5), "mean": None, "n": 0, "errors": 3}
    report = Report(
        summary={m: MetricSummary.model_validate(dead) for m in ("faithfulness", "correctness")},
        samples=[],
        signatures={},
    )
    (check,) = check_gates(report, {"unscored_rate": "<= 0.02"}).checked
    assert not check.passed and check.value is None
    assert check.message == (
        "unscored_rate: the judge scored no value (6 failed), so it has no rate (needs <= 0.02)"
    )


@pytest.mark.usefixtures("api_key")
def test_a_dead_judge_fails_the_run_and_every_judge_gate_after_it(tmp_path, capsys) -> None:
    path = config(tmp_path, DOWN, extra="gates: {unscored_rate: '<= 0.02'}\n")
    out = tmp_path / "r"
    assert main(["run", "--quiet", path, "--out", str(out)]) == 3
    assert "FAIL unscored_rate: the judge scored no value (6 failed)" in capsys.readouterr().out
    # the gate command on the report reaches the same verdict
    assert main(["gate", str(out), "--threshold", "unscored_rate<=0.02"]) == 1
    assert main(["gate", str(out), "--threshold", "error_rate<=0.5"]) == 1
    assert main(["gate", str(out), "--fail-under", "faithfulness=1"]) == 1
    assert "FAIL faithfulness: no value (0 scored, 3 errors)" in capsys.readouterr().out
    # the audit of no verdicts is no clean bill
    assert main(["audit", str(out)]) == 3
    assert "the report's judge scored no value: nothing to audit" in capsys.readouterr().err
    # calibrating verdicts that do not exist is no agreement either
    ids = [s.id for s in Report.load(out / "report.json").samples]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": i, "faithfulness": 4}) + "\n" for i in ids))
    assert main(["calibrate", str(out), str(labels)]) == 3
    assert "the report's judge scored no value" in capsys.readouterr().err


@pytest.mark.usefixtures("api_key")
def test_pairwise_against_a_judge_that_answers_nothing_exits_non_zero(tmp_path, capsys) -> None:
    a = dataset(tmp_path)
    rows = [json.loads(line) for line in a.read_text().splitlines()]
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps({**r, "answer": r["answer"] + " More."}) + "\n" for r in rows))
    # every call refused for good (a wrong model name; a refused connection is retried first)
    with FakeOpenAIServer(lambda body: error(404, "model 'nope' not found")) as srv:
        argv = ["pairwise", "--quiet", str(a), str(b), "--provider", "openai", "--model", "nope"]
        code = main([*argv, "--base-url", srv.base_url])
    assert code == EXIT_JUDGE_FAILED == 3
    out, err = capsys.readouterr()
    assert "scored pairs" in out  # the result is still printed
    lines = err.splitlines()
    assert lines[0] == "rag-judge: the judge scored none of 3 pairs"
    assert lines[1].startswith("  ×3: ") and "model 'nope' not found" in lines[1]
