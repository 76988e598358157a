"""Variant matrices and config-level gates through `rag-judge run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge import ConfigError, Pipeline
from rag_judge.cli import main
from rag_judge.config import (
    ExperimentConfig,
    check_metric_names,
    expand_matrix,
    folder_name,
    load_experiments,
)
from rag_judge.report.model import Report
from tests import REPO

DATA = REPO / "configs" / "data" / "demo.jsonl"

MATRIX = f"""
name: grid
dataset: {DATA}
bootstrap: {{resamples: 200}}
evaluators:
  - type: retrieval
    metrics: [ndcg@3, map]
  - type: judge
    rubrics: [faithfulness]
    cache: null
matrix:
  judge:
    heuristic: {{evaluators.1.client.stub: lexical_support}}
    fixed: {{evaluators.1.client.stub: fixed, evaluators.1.client.stub_score: 2}}
  cut:
    k3: {{evaluators.0.metrics: [ndcg@3, map]}}
    k5: {{evaluators.0.metrics: [ndcg@5, map]}}
gates:
  map: ">= 0.4"
"""


def test_matrix_expands_every_combination(tmp_path: Path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(MATRIX)
    experiments = load_experiments(path)
    assert [name for name, _ in experiments] == [
        "judge=heuristic,cut=k3", "judge=heuristic,cut=k5",
        "judge=fixed,cut=k3", "judge=fixed,cut=k5",
    ]  # fmt: skip
    fixed_k5 = experiments[3][1]
    assert fixed_k5.evaluators[0].metric_names() == ["ndcg@5", "map", "judged@5"]
    assert fixed_k5.evaluators[1].judge.client.stub == "fixed"  # type: ignore[attr-defined]
    assert folder_name("judge=fixed,cut=k5") == "judge-fixed_cut-k5"


@pytest.mark.parametrize(
    ("matrix", "needle"),
    [
        ({"a": {"x": {"evaluators.7.type": "bleu"}}}, "'evaluators.7' does not exist (it has 1"),
        ({"a": []}, "matrix.a: a mapping of variant name -> settings"),
    ],
)
def test_bad_matrix_entries_name_the_variant(matrix: dict, needle: str) -> None:
    data = {"evaluators": [{"type": "retrieval"}], "matrix": matrix}
    with pytest.raises(ConfigError, match=r"matrix\.a") as err:
        expand_matrix(data, "exp.yaml")
    assert needle in str(err.value)


def test_run_writes_a_report_per_variant_a_comparison_and_checks_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(MATRIX)

    def no_reading(*args: object) -> None:
        raise AssertionError("the variants are compared in memory, not read back from disk")

    monkeypatch.setattr(Report, "load", no_reading)
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.count("all 1 gates passed") == 4
    for name in ["judge-heuristic_cut-k3", "judge-fixed_cut-k5"]:
        assert (tmp_path / "out" / name / "report.html").exists()
    comparison = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert len(comparison["comparisons"]) == 3
    fixed = comparison["comparisons"][1]["metrics"]["faithfulness"]  # judge=fixed,cut=k3
    assert fixed["new_mean"] == 2.0 and fixed["diff"] < 0
    # --fail-under adds a gate on top of the config's; one failing gate makes the exit code 1
    assert main(["run", str(path), "--out", str(tmp_path / "o2"), "--fail-under", "map=0.9"]) == 1
    assert "FAIL map = 0.4710 (needs >= 0.9)" in capsys.readouterr().out


def test_a_bad_gate_in_the_config_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\ngates:\n  map: '=> 1'\n")
    with pytest.raises(ConfigError, match=r"g.yaml:4: gates"):
        load_experiments(path)


def test_a_bad_executor_or_ray_option_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\nexecutor: dask\n")
    with pytest.raises(ConfigError, match=r"x.yaml:3: executor") as err:
        load_experiments(path)
    assert str(err.value).endswith(
        "executor: 'dask' is not a legal value; legal values: local, ray"
    )
    path.write_text(f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\nray: {{shards: 0}}\n")
    with pytest.raises(ConfigError, match=r"x.yaml:3: ray.shards"):
        load_experiments(path)
    path.write_text(f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\nray: {{adress: x}}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'adress'"):
        load_experiments(path)


def test_a_misspelt_key_in_a_variant_is_an_unknown_key(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\n"
        "matrix:\n  a:\n    x: {evaluators.0.threshold: 2}\n"
    )
    with pytest.raises(ConfigError, match=r"unknown key 'threshold' .*\(variant a=x\)"):
        load_experiments(path)


def test_a_config_target_answers_each_question_and_records_latency(tmp_path: Path) -> None:
    examples = REPO / "examples" / "toy_rag.py"
    path = tmp_path / "live.yaml"
    path.write_text(
        f"dataset: {DATA}\ntarget: {examples}:answer\ntarget_concurrency: 2\n"
        "evaluators:\n  - {type: retrieval, metrics: [mrr]}\n  - {type: bleu}\n"
    )
    from rag_judge import Pipeline

    report = Pipeline.from_yaml(path).run().report
    latency = report.summary["latency_s"]
    assert latency.n == 34 and latency.errors == 0 and latency.mean is not None
    assert latency.mean > 0
    assert (
        report.signatures["latency_s"].render().startswith(f"latency_s|target:{examples}:answer|")
    )
    assert report.summary["bleu"].n == 34  # the toy system's answers were evaluated
    with pytest.raises(ConfigError, match="target"):
        bad = tmp_path / "bad.yaml"
        bad.write_text(f"dataset: {DATA}\ntarget: no_such_module:f\nevaluators: [{{type: bleu}}]\n")
        Pipeline.from_yaml(bad).run()


def test_pipeline_runs_inside_a_running_event_loop() -> None:
    """As in Jupyter: a judge and a target called from code already inside an event loop."""
    import asyncio

    from rag_judge import ExperimentConfig, JudgeEvaluator, Pipeline, read_jsonl

    examples = REPO / "examples" / "toy_rag.py"
    samples = list(read_jsonl(DATA))[:3]
    config = ExperimentConfig(
        target=f"{examples}:aanswer",
        evaluators=[JudgeEvaluator(rubrics=["faithfulness"], cache=None)],
    )

    async def notebook_cell() -> float | None:
        return Pipeline(config).run(samples).report.summary["faithfulness"].mean

    assert asyncio.run(notebook_cell()) is not None


# ---- unknown keys: the closest legal key, and every legal key at that level -----------------


def unknown_key_error(tmp_path: Path, body: str) -> str:
    path = tmp_path / "k.yaml"
    path.write_text(f"dataset: {DATA}\n{body}")
    with pytest.raises(ConfigError) as err:
        load_experiments(path)
    return str(err.value)


def test_a_top_level_typo_suggests_the_key_and_lists_the_legal_ones(tmp_path: Path) -> None:
    msg = unknown_key_error(
        tmp_path, "evaluator:\n  - type: retrieval\nevaluators: [{type: bleu}]\n"
    )
    assert "k.yaml:2: evaluator: unknown key 'evaluator' (did you mean 'evaluators'?); " in msg
    legal = msg.split("legal keys: ")[1].split(", ")
    assert {"name", "dataset", "evaluators", "gates", "max_error_rate", "matrix"} <= set(legal)


def test_an_evaluator_option_typo_suggests_that_evaluators_option(tmp_path: Path) -> None:
    msg = unknown_key_error(tmp_path, "evaluators:\n  - type: retrieval\n    metrcs: [map]\n")
    assert msg.endswith(
        "k.yaml:4: evaluators[0].metrcs: unknown key 'metrcs' (did you mean 'metrics'?); "
        "legal keys: type, metrics, relevance_threshold, level, overlap, max_docs, judged, "
        "min_judged, relevance_from, prefix, per"
    )
    # the judge's own options, not the retrieval evaluator's
    msg = unknown_key_error(tmp_path, "evaluators:\n  - type: judge\n    logprob: true\n")
    assert "unknown key 'logprob' (did you mean 'logprobs'?); legal keys: type, rubrics" in msg
    # nested models too
    msg = unknown_key_error(tmp_path, "bootstrap: {resampels: 10}\nevaluators: [{type: bleu}]\n")
    assert "bootstrap.resampels: unknown key 'resampels' (did you mean 'resamples'?); " in msg
    assert msg.endswith("legal keys: resamples, confidence")


def test_a_key_pasted_under_the_wrong_client_option_is_never_echoed(tmp_path: Path) -> None:
    body = (
        "evaluators:\n  - type: judge\n    client:\n      provider: openai\n      model: m\n"
        "      api_key: sk-secret123\n"
    )
    msg = unknown_key_error(tmp_path, body)
    assert (
        "k.yaml:7: evaluators[0].client.api_key: unknown key 'api_key' "
        "(did you mean 'api_key_env'?); legal keys: provider, model, base_url, api_key_env, "
    ) in msg
    assert "sk-secret123" not in msg


def test_a_key_with_no_close_match_lists_the_legal_keys(tmp_path: Path) -> None:
    body = "evaluators:\n  - type: judge\n    client: {provider: stub, zzzzzz: 3}\n"
    msg = unknown_key_error(tmp_path, body)
    assert "evaluators[0].client.zzzzzz: unknown key 'zzzzzz'; legal keys: provider, model" in msg
    assert "did you mean" not in msg
    assert ": 3" not in msg.split("legal keys")[0]


def test_an_unknown_key_in_an_unknown_evaluator_type_still_says_so(tmp_path: Path) -> None:
    msg = unknown_key_error(tmp_path, "evaluators:\n  - type: retreival\n    metrcs: [map]\n")
    assert "unknown evaluator type 'retreival'" in msg


def test_a_misspelt_key_in_a_variant_gets_a_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\n"
        "matrix:\n  a:\n    x: {evaluators.0.relevance_treshold: 2}\n"
    )
    with pytest.raises(ConfigError, match=r"did you mean 'relevance_threshold'\?.*\(variant a=x\)"):
        load_experiments(path)


def test_a_value_outside_a_fixed_set_names_the_legal_values(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(f"dataset: {DATA}\nevaluators: [{{type: retrieval}}]\nexecutor: rayy\n")
    with pytest.raises(ConfigError) as err:
        load_experiments(path)
    assert str(err.value).endswith(
        "x.yaml:3: executor: 'rayy' is not a legal value (did you mean 'ray'?); legal values: "
        "local, ray"
    )


# ---- metric names: checked when the evaluators are prepared, not at validation -------------

MISSING_RUBRIC = f"""
dataset: {DATA}
evaluators:
  - type: retrieval
    metrics: [map]
  - type: judge
    rubrics: [missing.yaml]
    client: {{stub: fixed}}
    cache: null
"""


def test_validation_reads_no_rubric_file_and_a_run_names_the_evaluator_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(MISSING_RUBRIC)
    ((_, config),) = load_experiments(path)  # the missing file is only named, not read
    with pytest.raises(ConfigError, match="rubric file not found") as err:
        Pipeline(config).prepare()
    assert err.value.loc == ("evaluators", 1)
    assert str(err.value).startswith("evaluators[1] (judge): ")
    for dry in ([], ["--dry-run"]):
        assert main(["run", str(path), "--out", str(tmp_path / "out"), *dry]) == 2
        message = capsys.readouterr().err
        assert message.startswith(f"rag-judge: error: {path}:6: evaluators[1] (judge): "), message
        assert "missing.yaml: rubric file not found" in message
    assert not (tmp_path / "out").exists()


TWICE = f"""
dataset: {DATA}
evaluators:
  - type: retrieval
    metrics: [map]
  - type: rouge
  - type: retrieval
    metrics: [mrr, map]
"""


def test_two_evaluators_of_one_metric_fail_the_run_at_the_second_ones_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(TWICE)
    ((_, config),) = load_experiments(path)
    with pytest.raises(ConfigError) as err:
        Pipeline(config).run()
    assert err.value.loc == ("evaluators", 2)
    assert str(err.value) == (
        "evaluators[2]: metric 'map' is produced by evaluators[0] and evaluators[2]; give one "
        "of them a different metric list"
    )
    for dry in ([], ["--dry-run"]):
        assert main(["run", str(path), "--out", str(tmp_path / "out"), *dry]) == 2
        message = capsys.readouterr().err
        assert message.startswith(f"rag-judge: error: {path}:7: evaluators[2]: metric 'map' ")


def test_the_automatic_judged_at_k_is_settled_at_validation() -> None:
    # Two retrieval evaluators at one cut-off report one judged@10: the second drops its own.
    config = ExperimentConfig(
        evaluators=[
            {"type": "rouge"},
            {"type": "retrieval", "metrics": ["ndcg@10"]},
            {"type": "retrieval", "metrics": ["recall@10"], "relevance_threshold": 2},
        ]
    )
    names = [e.metric_names() for e in config.evaluators]
    assert names[1:] == [["ndcg@10", "judged@10"], ["recall@10"]]
    check_metric_names(config.evaluators)


def test_an_error_pydantic_cannot_raise_by_name_is_still_a_config_error(tmp_path: Path) -> None:
    """A mapping where the judge's cache wants a folder path fails with pydantic's 'path_type',
    which its ValidationError cannot be built from by name: it is a config error naming the
    line and the field all the same (it was a KeyError traceback)."""
    config = tmp_path / "exp.yaml"
    config.write_text(
        "dataset: data.jsonl\nevaluators:\n  - type: judge\n    rubrics: [faithfulness]\n"
        "    cache: {path: runs/cache}\n"
    )
    with pytest.raises(ConfigError, match=r"exp\.yaml:5: evaluators\[0\]\.cache") as err:
        load_experiments(config)
    assert "not a valid path" in str(err.value)


def test_a_moved_error_keeps_its_message_as_written() -> None:
    """An error pydantic cannot raise again by its name keeps its message word for word: no
    doubled braces, no context filled in."""
    from pydantic import ValidationError

    from rag_judge.messages import moved_error

    err = {"type": "path_type", "msg": "not a path: {x}", "loc": ("a",), "input": 1, "ctx": {}}
    moved = ValidationError.from_exception_data("t", [moved_error(err, ("b", 0))]).errors()[0]
    assert (moved["msg"], moved["loc"], moved["type"]) == ("not a path: {x}", ("b", 0), "path_type")
