"""End to end: a judge whose server echoes the API key in its errors leaves no trace of the key
in the report, the Markdown, the cache or the logs, and the run still finishes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rag_judge import ExperimentConfig, JudgeEvaluator, Pipeline, Sample
from tests.fake_openai_server import FakeOpenAIServer, chat, error

KEY = "sk-ragjudge-PIPELINE-0a1b2c3d4e5f6a7b8c9d"


def test_no_key_in_report_cache_or_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RJ_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {KEY}"
    samples = [
        Sample(id=f"s{i}", question="Which ocean?", answer=f"The Pacific ({i}).",
               contexts=("The Pacific is the largest ocean.",))
        for i in range(3)
    ]  # fmt: skip
    script = [chat('{"reason": "supported", "score": 5}'), error(401, echo), error(403, echo)]
    with FakeOpenAIServer(script) as srv:
        judge = JudgeEvaluator(
            rubrics=["faithfulness"],
            cache=tmp_path / "judge.sqlite",
            client={
                "provider": "openai",
                "model": "m",
                "base_url": srv.base_url,
                "api_key_env": "RJ_TEST_KEY",
                "max_attempts": 1,
            },
        )
        result = Pipeline(ExperimentConfig(evaluators=[judge])).run(samples)
    report = result.report
    assert report.summary["faithfulness"].n == 1
    assert report.summary["faithfulness"].errors == 2  # recorded against their samples
    assert report.usage.requests == 3
    paths = result.write(tmp_path / "out")
    for path in [*paths.values(), tmp_path / "judge.sqlite"]:
        assert KEY.encode() not in path.read_bytes(), path
    assert "Incorrect API key provided: ***" in paths["json"].read_text()
    assert KEY not in caplog.text
