"""``run_sequential`` (``rag-judge run --sequential``): seeded chunks until every gate is decided;
the fake server receives exactly one request per sample judged and rubric; a rerun (a killed run
resumed) asks nothing already in the cache; an undecided gate keeps the full data's verdict."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge.cli import main
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.errors import ConfigError
from rag_judge.pipeline import Pipeline
from rag_judge.pipeline.sequential import run_sequential
from tests import REPO
from tests.fake_openai_server import FakeOpenAIServer, Reply, chat

DEMO = REPO / "configs" / "data" / "demo.jsonl"
DOC = REPO / "docs" / "sequential.md"
VERDICT = '{"reason": "Supported by context 1.", "score": 4}'


def judged_config(tmp_path: Path, base_url: str, gates: str) -> ExperimentConfig:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ndataset: {DEMO}\nbootstrap: {{resamples: 10}}\ngates: {gates}\n"
        "evaluators:\n  - type: retrieval\n    metrics: [hit_rate@3]\n"
        f"  - type: judge\n    rubrics: [faithfulness, coherence]\n"
        f"    cache: {tmp_path / 'judge.sqlite'}\n"
        f"    client: {{provider: openai, model: m, base_url: '{base_url}', "
        "api_key_env: RAG_JUDGE_TEST_KEY, max_attempts: 1}\n"
    )
    return load_config(path)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RAG_JUDGE_TEST_KEY", "sk-test")
    counted = {"n": 0}
    lock = threading.Lock()

    def script(body: dict[str, Any]) -> Reply:
        with lock:
            counted["n"] += 1
        return chat(VERDICT)

    with FakeOpenAIServer(script) as srv:
        yield srv, counted


def test_the_server_receives_one_request_per_sample_judged_and_a_rerun_asks_nothing(
    tmp_path: Path, server: Any
) -> None:
    srv, counted = server
    config = judged_config(tmp_path, srv.base_url, "{faithfulness_norm: '>= 0.5'}")
    # A killed run: its first chunk was judged (and cached) before the kill.
    order_run = run_sequential(config, chunk=5)
    assert 0 < order_run.judged < order_run.total == 34
    assert counted["n"] == order_run.judged * 2  # two rubrics, each asked once per sample
    assert order_run.gates[0].decision == "pass" and order_run.passed
    assert order_run.calls_saved == (34 - order_run.judged) * 2
    assert len(order_run.result.report.samples) == order_run.judged
    again = run_sequential(config, chunk=5)  # the same seed: the same chunks, all cached
    assert counted["n"] == order_run.judged * 2
    assert again.judged == order_run.judged
    assert again.result.report.usage.cache_hits == order_run.judged * 2


def test_a_killed_run_resumes_from_the_cache(tmp_path: Path, server: Any) -> None:
    srv, counted = server
    config = judged_config(tmp_path, srv.base_url, "{faithfulness_norm: '>= 0.5'}")
    samples = list(Pipeline(config).load_dataset())
    # A run killed in its third chunk had judged its first 12 samples (seed 0's order).
    first = np.random.default_rng(config.seed).permutation(len(samples))[:12]
    Pipeline(config).run([samples[i] for i in first])
    assert counted["n"] == 12 * 2
    resumed = run_sequential(config, chunk=5)
    assert resumed.judged >= 12
    assert counted["n"] == resumed.judged * 2  # nothing judged before the kill asked again


def test_an_undecided_gate_keeps_the_full_data_verdict_flagged(tmp_path: Path) -> None:
    config = load_config(REPO / "configs" / "demo.yaml").model_copy(
        update={
            "evaluators": [load_config(REPO / "configs" / "demo.yaml").evaluators[0]],
            "labels": None,
            "gates": {"hit_rate@3": ">= 0.85"},
        }
    )
    full = Pipeline(config).run().report.summary["hit_rate@3"].mean
    assert full is not None
    run = run_sequential(config)
    assert run.judged == run.total == 34 and run.calls_saved == 0
    (gate,) = run.gates
    assert gate.decision == "undecided" and gate.final is (full >= 0.85)
    assert "UNDECIDED by the sequence" in run.render() and not run.decided
    assert run.result.report.ids() == Pipeline(config).run().report.ids()  # dataset order


def test_a_gate_the_sequence_cannot_decide_is_a_config_error() -> None:
    config = load_config(REPO / "configs" / "demo.yaml")
    with pytest.raises(ConfigError, match="per-sample metric"):
        run_sequential(config, extra_gates={"unscored_rate": "<= 0.1"})
    with pytest.raises(ConfigError, match="needs a gate"):
        run_sequential(config.model_copy(update={"gates": {}}))


def test_the_worked_example_of_the_docs_is_what_a_run_prints() -> None:
    """docs/sequential.md shows a sequential run of docs' config; this run must print it."""
    text = DOC.read_text()
    block = re.search(r"<!-- sequential-run -->\n```text\n(.*?)```", text, re.S)
    assert block is not None
    config = load_config(REPO / "configs" / "demo.yaml")
    evaluators = [e for e in config.evaluators if e.type in ("retrieval", "judge")]
    config = config.model_copy(update={
        "evaluators": evaluators,
        "gates": {"hit_rate@3": ">= 0.5", "faithfulness_norm": ">= 0.3"},
    })  # fmt: skip
    assert run_sequential(config, chunk=5).render() + "\n" == block.group(1)


def test_the_cli_prints_the_decision_and_exits_by_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"name: t\ndataset: {DEMO}\nbootstrap: {{resamples: 10}}\n"
        "evaluators:\n  - type: retrieval\n    metrics: [hit_rate@3]\n"
    )
    argv = ["run", str(config), "--sequential", "--chunk", "5", "--out", str(tmp_path / "a")]
    assert main([*argv, "--fail-under", "hit_rate@3=0.5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "sequential: decided after 25/34 samples, 0 calls saved" in out
    assert "PASS hit_rate@3 >= 0.5: sequence [0.5341, 1.0000] after 25 values" in out
    argv[-1] = str(tmp_path / "b")
    assert main([*argv, "--fail-under", "hit_rate@3=0.99", "--quiet"]) == 1
    assert "FAIL hit_rate@3 >= 0.99: UNDECIDED by the sequence" in capsys.readouterr().out
    assert main(["run", str(config), "--chunk", "5", "--out", str(tmp_path / "c")]) == 2
    assert "--chunk go with --sequential" in capsys.readouterr().err


def test_a_judge_without_a_cache_is_still_asked_once_per_sample_and_the_report_counts_it(
    tmp_path: Path, server: Any
) -> None:
    srv, counted = server
    config = judged_config(tmp_path, srv.base_url, "{faithfulness_norm: '>= 0.5'}")
    data = config.model_dump(mode="json")
    data["evaluators"][1]["cache"] = None  # as configs/demo.yaml keeps none
    uncached = ExperimentConfig.model_validate(data)
    run = run_sequential(uncached, chunk=5)
    assert 0 < run.judged < run.total
    # The final report's run is served by a cache the run keeps for itself, so nothing is
    # asked twice; the report says what the chunks spent.
    assert counted["n"] == run.judged * 2 == run.calls_made
    assert run.result.report.usage.requests == run.judged * 2
    assert not (tmp_path / "judge.sqlite").exists()


def test_the_batch_api_is_refused_with_sequential(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ndataset: {DEMO}\ngates: {{faithfulness_norm: '>= 0.5'}}\n"
        "evaluators:\n  - type: judge\n    rubrics: [faithfulness]\n"
        "    client: {provider: openai, model: m, batch: true}\n"
    )
    with pytest.raises(ConfigError, match="batch: true"):
        run_sequential(load_config(path), chunk=5)
