"""executor: ray gives the local run's report, number for number (a local 2-CPU Ray cluster
started by the test; the samples split into uneven shards). BERTScore is left out to keep
it fast."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_judge.cli import main
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.pipeline import Pipeline
from rag_judge.resources import resource_dir

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

DEMO = resource_dir("configs") / "demo.yaml"
DATA = DEMO.parent / "data" / "demo.jsonl"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if ray.is_initialized():  # pragma: no cover - someone else's cluster
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _config(**changes: Any) -> ExperimentConfig:
    demo = load_config(DEMO)
    evaluators = [e for e in demo.evaluators if e.type != "bertscore"]
    fields = {k: getattr(demo, k) for k in type(demo).model_fields}
    return ExperimentConfig.model_validate({**fields, "evaluators": evaluators, **changes})


def test_ray_run_equals_local_run(cluster: None) -> None:
    local = Pipeline(_config()).run().report
    sharded = Pipeline(_config(executor="ray", ray={"shards": 4})).run().report
    assert len(local.samples) == 34  # in 4 shards: 9, 8, 9, 8
    assert list(local.summary) == list(sharded.summary)
    for metric, want in local.summary.items():
        got = sharded.summary[metric]
        fields = ("mean", "ci_low", "ci_high", "n", "errors", "unscored", "aggregate")
        assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert local.summary["bleu"].aggregate.startswith("corpus BLEU")
    for a, b in zip(local.samples, sharded.samples, strict=True):
        assert a.id == b.id
        assert a.scores == b.scores
        assert a.errors == b.errors
        assert a.judgments == b.judgments
    assert local.usage == sharded.usage
    assert local.signatures == sharded.signatures


def test_uneven_shards(cluster: None) -> None:
    samples = list(Pipeline(_config()).load_dataset())[:7]  # 7 samples in 3 shards: 2, 3, 2
    local = Pipeline(_config()).run(samples).report
    sharded = Pipeline(_config(executor="ray", ray={"shards": 3})).run(samples).report
    for metric, want in local.summary.items():
        assert sharded.summary[metric] == want
    assert [s.scores for s in sharded.samples] == [s.scores for s in local.samples]
    assert [s.errors for s in sharded.samples] == [s.errors for s in local.samples]


def test_an_unshardable_evaluator_runs_in_the_driver(cluster: None) -> None:
    from rag_judge.evaluators.bertscore import BERTScoreEvaluator

    assert BERTScoreEvaluator(idf=True).shardable is False
    assert BERTScoreEvaluator().shardable is True


def test_the_cli_option_overrides_the_config(cluster: None, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"dataset: {DATA}\nevaluators: [{{type: retrieval}}, {{type: bleu}}]\n")
    assert main(["run", str(path), "--out", str(tmp_path / "l"), "--quiet"]) == 0
    argv = ["run", str(path), "--out", str(tmp_path / "r"), "--quiet", "--executor", "ray"]
    assert main(argv) == 0
    local = json.loads((tmp_path / "l" / "report.json").read_text())
    sharded = json.loads((tmp_path / "r" / "report.json").read_text())
    assert (local["config"]["executor"], sharded["config"]["executor"]) == ("local", "ray")
    assert sharded["summary"] == local["summary"]
    assert sharded["samples"] == local["samples"]


def test_concat_of_shards_with_a_crashed_one_keeps_the_others() -> None:
    from rag_judge.evaluators.base import EvaluatorResult
    from rag_judge.evaluators.lexical import BleuEvaluator
    from rag_judge.report.model import Signature

    samples = list(Pipeline(_config()).load_dataset())[:9]
    bleu = BleuEvaluator()
    whole = bleu.evaluate(samples)
    crashed = EvaluatorResult.empty(3, {"bleu": Signature(name="bleu")})
    for i in range(3):
        crashed.fail(i, "bleu evaluator failed: boom")
    joined = EvaluatorResult.concat([crashed, bleu.evaluate(samples[3:])])
    assert joined.scores["bleu"] == [None] * 3 + whole.scores["bleu"][3:]
    assert joined.signatures == whole.signatures
    assert joined.corpus["bleu"].rows.shape == whole.corpus["bleu"].rows.shape
    assert (joined.corpus["bleu"].rows[3:] == whole.corpus["bleu"].rows[3:]).all()


def test_a_jurys_rate_limits_are_divided_among_the_shards_and_a_local_juror_wants_a_gpu() -> None:
    from rag_judge.evaluators.judge import JudgeEvaluator
    from rag_judge.llm import ClientConfig
    from rag_judge.pipeline._ray import _shard_copy, _wants_gpu

    judges = (
        ClientConfig(provider="stub", rpm=600, tpm=90_000),
        ClientConfig(provider="stub", stub="fixed", stub_score=4),
    )
    jury = JudgeEvaluator(rubrics=["faithfulness"], judges=judges, cache=None)
    copy = _shard_copy(jury, 3)
    assert isinstance(copy, JudgeEvaluator)
    assert (copy.judges[0].rpm, copy.judges[0].tpm) == (200.0, 30_000.0)
    assert copy.judges[1] == judges[1]  # no limit: nothing to divide
    assert not _wants_gpu(jury)
    local = JudgeEvaluator(
        rubrics=["faithfulness"], judges=(judges[0], ClientConfig(provider="local")), cache=None
    )
    assert _wants_gpu(local)
