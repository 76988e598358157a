"""One pass over the samples for the evaluators that can share it: those that score a chunk at
a time ride along the pass of one that runs its own chunks (a judge), so a streamed dataset is
read and parsed once for all of them, with the same report as runs apart."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge import JudgeEvaluator, Pipeline, Sample, load_config
from rag_judge import _progress as progress
from rag_judge.data.stream import JsonlSource
from rag_judge.evaluators import EVALUATORS
from rag_judge.evaluators.base import Evaluator, EvaluatorRun
from rag_judge.evaluators.result import EvaluatorResult, Final
from rag_judge.llm import ClientConfig
from rag_judge.pipeline import passes as passes_module
from rag_judge.pipeline import together
from rag_judge.resources import resource_dir

DEMO = resource_dir("configs") / "demo.yaml"
DEMO_DATA = resource_dir("configs") / "data" / "demo.jsonl"
CONFIG = """\
name: shared
dataset: {data}
seed: 3
bootstrap: {{resamples: 200}}
chunk_size: 5
evaluators:
  - type: retrieval
    metrics: [precision@3, mrr, ndcg@5]
  - type: rouge
  - type: judge
    rubrics: [faithfulness, correctness]
    client: {{provider: stub}}
    cache: null
  - type: bleu
"""


def counted_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    passes: list[int] = []
    chunks = JsonlSource.chunks

    def counting(self: JsonlSource, size: int) -> Iterator[list[Sample]]:
        passes.append(size)
        return chunks(self, size)

    monkeypatch.setattr(JsonlSource, "chunks", counting)
    return passes


def test_the_dataset_is_read_once_for_every_evaluator_and_the_report_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text(CONFIG.format(data=DEMO_DATA), encoding="utf-8")
    config = load_config(path)
    passes = counted_passes(monkeypatch)
    shown = io.StringIO()
    with progress.showing(progress.Display(progress.Mode.LINES, shown, clock=lambda: 0.0)):
        report = Pipeline(config).run().report
    assert len(passes) == 2  # the evaluators' one pass, and the join into the samples' results
    # the steps are shown in config order, each once
    assert shown.getvalue().splitlines() == [
        "evaluators[0] (retrieval): done",
        "evaluators[1] (rouge): done",
        "evaluators[3] (bleu): done",
        "evaluators[2] (judge): 68/68 calls",
        "evaluators 0, 1, 3, 2 shared one pass over the samples",
    ]
    # each evaluator alone, over samples in memory: the same numbers
    samples = list(Pipeline(config).load_dataset())
    for i, evaluator in enumerate(config.evaluators):
        alone = Pipeline(config.model_copy(update={"evaluators": [evaluator]})).run(samples).report
        for metric, summary in alone.summary.items():
            assert report.summary[metric] == summary, (i, metric)
            assert report.column(metric) == alone.column(metric)
        for r, a in zip(report.samples, alone.samples, strict=True):
            assert {m: r.judgments[m] for m in a.judgments} == a.judgments


class Driver(Evaluator):
    """Runs its own chunks (as a judge does) and crashes on the chunk holding ``crash_on``."""

    type: str = "driver"
    crash_on: str = ""

    def metric_names(self) -> list[str]:
        return ["driven"]

    def prepare(self, **_: Any) -> EvaluatorRun:
        return DriverRun(self)


class DriverRun(EvaluatorRun):
    evaluator: Driver

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> Final:
        for chunk in chunks:
            if any(s.id == self.evaluator.crash_on for s in chunk):
                raise RuntimeError("driver down")
            result = EvaluatorResult.empty(len(chunk), self.signatures())
            result.fill("driven", list(range(len(chunk))), np.full(len(chunk), 2.0))
            emit(result)
        return Final()


class Rider(Evaluator):
    """Scores 1.0 per sample, a chunk at a time; crashes on the sample ``crash_on``."""

    type: str = "rider"
    crash_on: str = ""

    def metric_names(self) -> list[str]:
        return ["ridden"]

    def score(self, samples: Sequence[Sample]) -> Mapping[str, Any]:
        if any(s.id == self.crash_on for s in samples):
            raise RuntimeError("rider down")
        return {"ridden": np.ones(len(samples))}


def test_a_crash_of_the_driver_or_a_rider_fails_only_its_own_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    monkeypatch.setitem(EVALUATORS, "driver", Driver)
    monkeypatch.setitem(EVALUATORS, "rider", Rider)
    passes: list[int] = []
    shared = together.stream_together

    def spy(riders: Any, driver: Any, chunks: Any, side: Any) -> None:
        passes.append(len(riders) + (driver is not None))
        shared(riders, driver, chunks, side)

    monkeypatch.setattr(passes_module, "stream_together", spy)
    evaluators = [
        Rider(crash_on=samples[13].id),
        Driver(crash_on=samples[22].id),
        EVALUATORS["bleu"](),
    ]
    config = load_config(DEMO).model_copy(update={"evaluators": evaluators, "chunk_size": 4})
    report = Pipeline(config).run(samples).report
    assert passes == [3]
    ridden = [r.scores["ridden"] for r in report.samples]
    assert ridden == [1.0] * 12 + [None] * 22  # chunks 1-3; the 4th crashed, the rest not run
    driven = [r.scores["driven"] for r in report.samples]
    assert driven == [2.0] * 20 + [None] * 14  # chunks 1-5; the 6th crashed
    assert report.samples[30].errors["driven"].message == (
        "driver evaluator failed: RuntimeError: driver down"
    )
    assert report.samples[12].errors["ridden"].message == (
        "rider evaluator failed: RuntimeError: rider down"
    )
    assert report.summary["bleu"].n == 34  # the third is untouched by either crash


def test_one_evaluator_alone_keeps_its_own_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    passes = counted_passes(monkeypatch)
    config = load_config(DEMO)
    only = [e for e in config.evaluators if e.type == "rouge"]
    Pipeline(config.model_copy(update={"evaluators": only})).run()
    assert len(passes) == 2  # its pass and the join: sharing would save nothing


class DiesOn(Evaluator):
    """Scores 1.0 per sample; the process scoring the sample ``die_on`` exits at once."""

    type: str = "dies_on"
    die_on: str = ""

    def metric_names(self) -> list[str]:
        return ["alive"]

    def score(self, samples: Sequence[Sample]) -> Mapping[str, Any]:
        if any(s.id == self.die_on for s in samples):
            os._exit(9)
        return {"alive": np.ones(len(samples))}


def stub_judge() -> Evaluator:
    stub = ClientConfig(provider="stub")
    return JudgeEvaluator(rubrics=["faithfulness"], client=stub, cache=None)


def two_processes(tmp_path: Path, evaluators: list[Evaluator]) -> Pipeline:
    path = tmp_path / "shared.yaml"
    path.write_text(CONFIG.format(data=DEMO_DATA), encoding="utf-8")
    config = load_config(path)
    return Pipeline(config.model_copy(update={"evaluators": evaluators, "processes": 2}))


def test_two_processes_give_the_same_report_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text(CONFIG.format(data=DEMO_DATA), encoding="utf-8")
    one = load_config(path)
    two = load_config(path).model_copy(update={"processes": 2})
    shown = io.StringIO()
    with progress.showing(progress.Display(progress.Mode.LINES, shown, clock=lambda: 0.0)):
        side = Pipeline(two).run().report
    assert shown.getvalue().splitlines()[-1] == (
        "evaluators 0, 1, 3, 2 shared one pass over the samples (0, 1, 3 in a second process)"
    )
    alone = Pipeline(one).run().report
    assert side.summary == alone.summary and side.signatures == alone.signatures
    for metric in alone.summary:
        assert side.column(metric) == alone.column(metric)
    assert [r.errors for r in side.samples] == [r.errors for r in alone.samples]
    assert "processes" not in alone.config and side.config["processes"] == 2


def test_a_crash_in_the_second_process_fails_only_that_evaluator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    judge = stub_judge()
    pipe = two_processes(tmp_path, [Rider(crash_on=samples[13].id), judge, EVALUATORS["bleu"]()])
    report = pipe.run().report
    ridden = [r.scores["ridden"] for r in report.samples]
    assert ridden == [1.0] * 10 + [None] * 24  # chunks of 5: the 3rd crashed, the rest not run
    assert report.samples[12].errors["ridden"].message == (
        "rider evaluator failed: RuntimeError: rider down"
    )
    assert report.summary["bleu"].n == 34 and report.summary[judge.metric_names()[0]].n > 0


def test_a_second_process_that_dies_fails_its_evaluators_from_there_on(tmp_path: Path) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    judge = stub_judge()
    report = two_processes(tmp_path, [DiesOn(die_on=samples[17].id), judge]).run().report
    alive = [r.scores["alive"] for r in report.samples]
    assert alive == [1.0] * 15 + [None] * 19
    assert report.samples[30].errors["alive"].message == (
        "dies_on evaluator failed: RuntimeError: the side process stopped (exit code 9)"
    )
    assert report.summary[judge.metric_names()[0]].n > 0  # the judge ran on


def test_an_evaluator_that_cannot_be_sent_runs_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    local = type("Local", (Rider,), {"__module__": "__main__"})
    judge = stub_judge()
    report = two_processes(tmp_path, [local(), judge]).run().report
    assert [r.scores["ridden"] for r in report.samples] == [1.0] * 34
    assert "cannot be sent to a second process" in caplog.text


class OwnLoop(Evaluator):
    """Scores 1.0 per sample through an event loop of its own (``asyncio.run``)."""

    type: str = "own_loop"

    def metric_names(self) -> list[str]:
        return ["looped"]

    def score(self, samples: Sequence[Sample]) -> Mapping[str, Any]:
        async def ones() -> Any:
            return np.ones(len(samples))

        return {"looped": asyncio.run(ones())}


class BadEnd(Rider):
    """Scores as Rider does; the end of its run fails."""

    type: str = "bad_end"

    def merge_signature(self, signatures: Any) -> Any:
        raise RuntimeError("no end")


class Encoder(Rider):
    """Scores as Rider does, but says it wants a GPU (as BERTScore does)."""

    type: str = "encoder"

    def wants_gpu(self) -> bool:
        return True


def test_riders_are_scored_outside_the_judges_event_loop() -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    config = load_config(DEMO).model_copy(update={"evaluators": [OwnLoop(), stub_judge()]})
    report = Pipeline(config).run(samples).report
    assert [r.scores["looped"] for r in report.samples] == [1.0] * 34


def test_a_rider_whose_run_fails_at_its_end_keeps_its_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    for evaluators in ([BadEnd(), stub_judge()], [BadEnd(), stub_judge(), EVALUATORS["bleu"]()]):
        config = load_config(DEMO).model_copy(update={"evaluators": evaluators, "chunk_size": 5})
        report = Pipeline(config).run(samples).report
        assert [r.scores["ridden"] for r in report.samples] == [1.0] * 34
    report = two_processes(tmp_path, [BadEnd(), stub_judge(), EVALUATORS["bleu"]()]).run().report
    assert [r.scores["ridden"] for r in report.samples] == [1.0] * 34
    assert report.summary["bleu"].n == 34


def test_an_encoder_keeps_a_pass_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    passes = counted_passes(monkeypatch)
    config = load_config(DEMO)
    evaluators = [Encoder(), EVALUATORS["bleu"](), stub_judge()]
    Pipeline(config.model_copy(update={"evaluators": evaluators})).run()
    assert len(passes) == 3  # the encoder's, the shared one, and the join


def test_a_second_process_that_cannot_rebuild_an_evaluator_leaves_them_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A class in a module that exists only in this process: it pickles here, not there.
    module = types.ModuleType("only_here")
    only_here = type("OnlyHere", (Rider,), {"__module__": "only_here"})
    module.OnlyHere = only_here  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "only_here", module)
    report = two_processes(tmp_path, [only_here(), stub_judge()]).run().report
    assert [r.scores["ridden"] for r in report.samples] == [1.0] * 34
    assert "the evaluators run here" in caplog.text


def test_inside_a_running_loop_nothing_is_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    # A notebook's thread runs a loop: the judge then runs on a helper thread, so the riders
    # keep their own passes in the caller's thread.
    passes = counted_passes(monkeypatch)
    config = load_config(DEMO)
    evaluators = [Rider(), EVALUATORS["bleu"](), stub_judge()]

    async def run() -> Any:
        return Pipeline(config.model_copy(update={"evaluators": evaluators})).run().report

    report = asyncio.run(run())
    assert len(passes) == 4  # each evaluator's own, and the join
    assert [r.scores["ridden"] for r in report.samples] == [1.0] * 34
