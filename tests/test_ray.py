"""executor: ray gives the local run's report, number for number (a local 2-CPU Ray cluster
started by the test; the samples split into uneven shards). BERTScore is left out to keep
it fast."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from numpy.typing import ArrayLike
from pydantic import Field

from rag_judge.cli import main
from rag_judge.cli.run import EXIT_EVALUATOR_FAILED
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.pipeline import Pipeline
from rag_judge.report.model import WarningKind
from rag_judge.resources import resource_dir
from tests.evaluators import judge_sample
from tests.fake_openai_server import FakeOpenAIServer, Reply

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

DEMO = resource_dir("configs") / "demo.yaml"
DATA = DEMO.parent / "data" / "demo.jsonl"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if ray.is_initialized():  # pragma: no cover - someone else's cluster
        ray.shutdown()
    # address "local": a new cluster, not one another process left running on the machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
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


def test_a_per_step_evaluator_runs_in_the_driver_beside_the_shards(cluster: None) -> None:
    from rag_judge.evaluators.retrieval import RetrievalEvaluator

    stepped = RetrievalEvaluator(metrics=["ndcg@5", "mrr"], relevance_threshold=1, per="step")
    evaluators = [*_config().evaluators, stepped]
    local = Pipeline(_config(evaluators=evaluators)).run().report
    sharded = Pipeline(_config(evaluators=evaluators, executor="ray", ray={"shards": 4}))
    assert sharded.run().report.summary == local.summary
    # Single-turn samples are their own one step and conversation each: the clustered interval
    # of singleton clusters is the plain one, bit for bit.
    for metric in ("ndcg@5", "mrr"):
        per_step, own = local.summary[f"step.{metric}"], local.summary[metric]
        fields = ("mean", "n", "ci_low", "ci_high")
        assert [getattr(per_step, f) for f in fields] == [getattr(own, f) for f in fields]
        assert 0 < per_step.mean < 1


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
    from rag_judge.evaluators.sacrebleu import BleuEvaluator
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

    judges = (
        ClientConfig(provider="stub", rpm=600, tpm=90_000),
        ClientConfig(provider="stub", stub="fixed", stub_score=4),
    )
    jury = JudgeEvaluator(rubrics=["faithfulness"], judges=judges, cache=None)
    copy = jury.for_shard(3, 0)
    assert isinstance(copy, JudgeEvaluator)
    assert (copy.judges[0].rpm, copy.judges[0].tpm) == (200.0, 30_000.0)
    assert (copy.judges[1].rpm, copy.judges[1].tpm) == (None, None)  # no limit: none to divide
    assert not jury.wants_gpu()
    local = JudgeEvaluator(
        rubrics=["faithfulness"], judges=(judges[0], ClientConfig(provider="local")), cache=None
    )
    assert local.wants_gpu()


class Crashing(Evaluator):
    """Kills its Ray worker (``os._exit``, as the OOM killer or a lost node would) when its
    shard holds the sample ``victim``: on the first attempt only (``marker`` records it), or
    on every one (``always``). Never in the test's own process."""

    type: str = "crashing"
    needs: ClassVar[tuple[str, ...]] = ("answer",)
    victim: str
    marker: str
    always: bool = False
    driver: int = Field(default_factory=os.getpid)

    def metric_names(self) -> list[str]:
        return ["answer_chars"]

    def score(self, samples: Sequence[Sample]) -> Mapping[str, ArrayLike]:
        victim = any(s.id == self.victim for s in samples) and os.getpid() != self.driver
        if victim and (self.always or not os.path.exists(self.marker)):
            Path(self.marker).touch()
            os._exit(1)
        return {"answer_chars": [float(len(s.answer or "")) for s in samples]}


def test_shards_that_differ_in_logprobs_sign_mixed_and_log_the_workers_warning(
    cluster: None, caplog: pytest.LogCaptureFixture
) -> None:
    samples = [judge_sample(i, answer=f"answer number {i}") for i in range(1, 5)]

    def reply(body: dict[str, Any]) -> Reply:  # samples 3 and 4 (shard 2): no logprobs
        dropped = any(f"number {i}" in json.dumps(body) for i in (3, 4))
        text = '{"reason": "on topic", "score": 4 }'  # the score its own token
        return Reply(content=text, logprobs=not dropped)

    with FakeOpenAIServer(reply) as srv:
        client = {"provider": "openai", "model": "fake-judge", "base_url": srv.base_url}
        judge = JudgeEvaluator(
            rubrics=["answer_relevance"], client=client, cache=None, logprobs=True
        )
        local = Pipeline([judge]).run(samples).report
        config = ExperimentConfig(evaluators=[judge], executor="ray", ray={"shards": 2})
        caplog.clear()  # the local run's own warning
        with caplog.at_level(logging.WARNING, logger="rag_judge"):
            sharded = Pipeline(config).run(samples).report
    for metric in ("answer_relevance", "answer_relevance_norm"):
        assert local.signatures[metric].options["scoring"] == "mixed"
        assert sharded.signatures[metric] == local.signatures[metric]
        assert sharded.summary[metric] == local.summary[metric]
    assert [s.judgments for s in sharded.samples] == [s.judgments for s in local.samples]
    logged = [r.getMessage() for r in caplog.records if "logprobs were asked" in r.getMessage()]
    assert len(logged) == 1  # shard 2's, which its worker logged and the driver repeats
    assert logged[0].startswith("evaluators[0] (judge), ray shard 2 of 2: logprobs were asked")


def test_a_killed_worker_runs_its_shard_again_and_the_report_says_so(
    cluster: None, tmp_path: Path
) -> None:
    samples = [judge_sample(i) for i in range(1, 5)]
    crashing = Crashing(victim="s3", marker=str(tmp_path / "died"))
    config = ExperimentConfig(
        evaluators=[crashing], executor="ray", ray={"shards": 2, "retries": 1}
    )
    report = Pipeline(config).run(samples).report
    assert (tmp_path / "died").exists()  # shard 2's first attempt died
    assert [s.scores for s in report.samples] == [{"answer_chars": 2.0}] * 4
    (warning,) = report.warnings
    assert warning.kind is WarningKind.SHARD_RERUN
    assert (warning.metric, warning.value, warning.threshold) == ("evaluators[0] (crashing)", 1, 1)
    assert "(ray shard 2 of 2 (samples 3-4): 2 attempts)" in warning.message
    assert "not in the usage" in warning.message


def test_a_shard_whose_worker_always_dies_fails_its_samples_and_the_run(
    cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(judge_sample(i).model_dump_json() + "\n" for i in range(1, 5)))
    crashing = (
        f"{{type: 'tests.test_ray:Crashing', victim: s3, marker: '{tmp_path / 'm'}', always: true}}"
    )
    path = tmp_path / "c.yaml"
    path.write_text(
        f"dataset: {data}\nexecutor: ray\nray: {{shards: 2, retries: 1}}\n"
        f"evaluators: [{{type: bleu}}, {crashing}]\n"
    )
    out = tmp_path / "out"
    argv = ["run", str(path), "--out", str(out), "--quiet", "--max-error-rate", "1"]
    assert main(argv) == EXIT_EVALUATOR_FAILED  # not 1, a gate's; whatever max_error_rate allows
    report = json.loads((out / "report.json").read_text())
    samples = report["samples"]
    assert [s["scores"].get("answer_chars") for s in samples] == [2.0, 2.0, None, None]
    assert all(s["scores"]["bleu"] is not None for s in samples)  # the other step is whole
    lost = samples[2]["errors"]["answer_chars"]["message"]
    assert "ray shard 2 of 2 (samples 3-4) was lost: its worker died on all 2 attempts" in lost
    (warning,) = report["warnings"]
    assert (warning["kind"], warning["metric"], warning["value"]) == (
        "shard_lost",
        "evaluators[1] (crashing)",
        2,
    )
    assert "The run failed." in capsys.readouterr().err
