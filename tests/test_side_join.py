"""samples.jsonl written by the side process of a ``processes: 2`` run as the samples pass
(``pipeline.side_join``): the same bytes and index as the run's own join, which still writes
the file whenever the side process cannot (it died, a metric appeared mid-run, a step comes
after the pass)."""

from __future__ import annotations

import itertools
import math
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_judge import JudgeEvaluator, Pipeline, Sample, load_config
from rag_judge import pipeline as pipeline_module
from rag_judge.data import column as column_
from rag_judge.data.stream import InMemory
from rag_judge.evaluators import EVALUATORS
from rag_judge.evaluators.base import Evaluator, EvaluatorRun
from rag_judge.evaluators.judge import JudgeRun
from rag_judge.evaluators.result import EvaluatorResult, Final
from rag_judge.judge.prompts import PromptRenderer
from rag_judge.llm import ClientConfig
from rag_judge.pipeline import _side_worker as side_worker
from rag_judge.pipeline import collect
from rag_judge.pipeline import passes as passes_module
from rag_judge.pipeline.collect import Collected
from rag_judge.pipeline.side_join import Part, SideJoin
from rag_judge.report.model import Failure, Signature
from rag_judge.report.samples import SampleFile, SampleIndex
from tests.test_shared_pass import CONFIG, DEMO, DEMO_DATA, DiesOn, Rider

JUDGE = JudgeEvaluator(  # no cache: both runs of a test call the stub
    rubrics=["faithfulness", "correctness"], client=ClientConfig(provider="stub"), cache=None
)


class Grows(Evaluator):
    """Runs its own chunks (as a judge does), scoring ``a``, and from its second chunk on
    ``b`` too: the run's column for ``b`` starts mid-file, which the side process cannot
    write ahead."""

    type: str = "grows"

    def metric_names(self) -> list[str]:
        return ["a"]

    def prepare(self, **_: Any) -> EvaluatorRun:
        return GrowsRun(self)


class GrowsRun(EvaluatorRun):
    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> Final:
        for k, chunk in enumerate(chunks):
            names = ["a", "b"] if k else ["a"]
            result = EvaluatorResult.empty(len(chunk), {m: Signature(name=m) for m in names})
            for m in names:
                result.fill(m, list(range(len(chunk))), np.full(len(chunk), 0.5))
            emit(result)
        return Final()


def run(tmp_path: Path, processes: int, evaluators: list[Evaluator] | None = None, **update: Any):
    path = tmp_path / "shared.yaml"
    path.write_text(CONFIG.format(data=DEMO_DATA), encoding="utf-8")
    config = load_config(path)
    changes: dict[str, Any] = {"processes": processes, "inline_samples": 0, **update}
    if evaluators is not None:
        changes["evaluators"] = evaluators
    return Pipeline(config.model_copy(update=changes)).run()


def joins_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the run's own joins (``Collected.to_file``)."""
    calls: list[int] = []
    to_file = collect.Collected.to_file

    def counted(self: Collected, *args: Any) -> SampleFile:
        calls.append(1)
        return to_file(self, *args)

    monkeypatch.setattr(collect.Collected, "to_file", counted)
    return calls


def same_index(a: SampleIndex, b: SampleIndex) -> None:
    assert list(a.ids) == list(b.ids)
    assert a.failures == b.failures and a.degraded == b.degraded
    assert a.conversations == b.conversations and a.generators() == b.generators()
    assert a.answer_words.numpy().tobytes() == b.answer_words.numpy().tobytes()
    for rubric in ("faithfulness", "correctness"):
        for x, y in zip(a.uncertainty(rubric), b.uncertainty(rubric), strict=True):
            assert x.tobytes() == y.tobytes()


def same_file(a: Any, b: Any) -> None:
    assert isinstance(a, SampleFile) and isinstance(b, SampleFile)
    assert a.path.read_bytes() == b.path.read_bytes()
    assert a._offsets.tolist() == b._offsets.tolist()
    same_index(a.indexed(), b.indexed())
    for metric in ("rouge1_f1", "faithfulness", "ridden"):
        assert a.indexed().column(metric).tobytes() == b.indexed().column(metric).tobytes()


def test_the_side_process_writes_the_samples_file_the_run_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    evaluators = [
        EVALUATORS["rouge"](),
        Rider(crash_on=samples[13].id),  # failures in a rider's lines too
        JUDGE,
        EVALUATORS["bleu"](),
    ]
    alone = run(tmp_path, 1, evaluators).report
    joins = joins_here(monkeypatch)
    side = run(tmp_path, 2, evaluators).report
    assert joins == []  # written by the side process
    same_file(side.samples, alone.samples)
    assert side.summary == alone.summary
    assert [r.model_dump() for r in side.samples] == [r.model_dump() for r in alone.samples]
    # past TAIL samples, the index the side process hands over spills here as it arrives
    monkeypatch.setattr(column_, "TAIL", 4)
    spilled = run(tmp_path, 2, evaluators).report
    same_file(spilled.samples, alone.samples)
    assert spilled.summary == alone.summary and joins == []
    assert isinstance(spilled.samples, SampleFile)
    index = spilled.samples.indexed()
    assert index.answer_words.spilled and index.ids._ends.spilled
    assert isinstance(spilled.samples._offsets, np.memmap)


def test_the_run_joins_when_the_side_process_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(EVALUATORS, "grows", Grows)
    grown = [EVALUATORS["rouge"](), Grows()]
    alone = run(tmp_path, 1, grown).report
    joins = joins_here(monkeypatch)
    side = run(tmp_path, 2, grown).report
    assert joins == [1]
    assert side.samples[-1].scores["b"] == 0.5
    assert side.samples[0].scores["b"] is None
    assert isinstance(side.samples, SampleFile) and isinstance(alone.samples, SampleFile)
    assert side.samples.path.read_bytes() == alone.samples.path.read_bytes()


def test_a_side_process_that_dies_leaves_the_join_to_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    joins = joins_here(monkeypatch)
    report = run(tmp_path, 2, [DiesOn(die_on=samples[17].id), JUDGE]).report
    assert joins == [1]
    assert [r.scores["alive"] for r in report.samples] == [1.0] * 15 + [None] * 19
    assert [r.id for r in report.samples] == [s.id for s in samples]


def test_no_side_file_for_a_run_with_a_step_outside_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    joins = joins_here(monkeypatch)
    per_turn = EVALUATORS["rouge"](per="turn")
    report = run(tmp_path, 2, [EVALUATORS["bleu"](), JUDGE, per_turn]).report
    assert joins == [1] and len(report.samples) == 34


def test_a_short_run_keeps_its_samples_inline_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    report = run(tmp_path, 2, inline_samples=100).report
    assert isinstance(report.samples, list) and len(report.samples) == 34
    assert list((tmp_path / "runs").iterdir()) == []  # the side's file went with the run's folder


def reference_bytes(
    tmp_path: Path, samples: list[Sample], rider: list[EvaluatorResult], driver: EvaluatorResult
) -> tuple[bytes, SampleIndex]:
    """The run's own join over these chunks' results."""
    collected = Collected(tmp_path)
    steps = [collected.step({}), collected.step({})]
    for result in rider:
        steps[0].add(result)
    steps[1].add(driver)
    out = collected.to_file(collected.results(InMemory(samples), 7), tmp_path / "ref.jsonl")
    return out.path.read_bytes(), out.indexed()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.integers(1, 12),
    cuts=st.lists(st.integers(1, 33), max_size=6),
    generator=st.sampled_from(["gpt-x", "", None]),
)
def test_lines_are_written_whatever_the_chunks_and_the_driver_parts(
    tmp_path: Path, chunk: int, cuts: list[int], generator: str | None
) -> None:
    samples = list(Pipeline(load_config(DEMO)).load_dataset())
    samples = [
        s.model_copy(update={"metadata": {**s.metadata, "generator": generator}})
        if i % 3 == 0 else s
        for i, s in enumerate(samples)
    ]  # fmt: skip
    rouge = EVALUATORS["rouge"]().prepare()
    chunks = [samples[a : a + chunk] for a in range(0, len(samples), chunk)]
    rider = []
    for part in chunks:
        result = rouge.evaluate_chunk(part)
        result.scores["rouge1_f1"] = [
            None if v is None else round(v * 10) for v in result.scores["rouge1_f1"]
        ]
        rider.append(result)
    rider[0].fail(0, Failure(message="no reference"), ["rouge2_f1"])
    driver = JUDGE.prepare().evaluate_all(samples)
    driver.scores["faithfulness"][1] = math.nan
    expected, index = reference_bytes(tmp_path, samples, rider, driver)

    join = SideJoin(tmp_path / "side.jsonl", [0, None])
    lines = [
        collect.detail_line(e, j) for e, j in zip(driver.errors, driver.judgments, strict=True)
    ]
    edges = [0, *sorted(set(cuts)), len(samples)]
    parts = [
        Part({m: v[a:b] for m, v in driver.scores.items()}, lines[a:b])
        for a, b in itertools.pairwise(edges) if b > a
    ]  # fmt: skip
    order = [("chunk", c) for c in range(len(chunks))] + [("part", p) for p in range(len(parts))]
    order.sort(key=lambda x: x[1] * 7 if x[0] == "chunk" else x[1] * 5)
    for kind, k in order:
        if kind == "chunk":
            join.chunk(chunks[k], [rider[k]])
        else:
            join.part(parts[k])
    kept, side_index = join.close()
    offsets = kept.numpy()
    assert (tmp_path / "side.jsonl").read_bytes() == expected
    assert offsets[-1] == len(expected) and len(offsets) == len(samples) + 1
    same_index(side_index, index)


def test_a_run_that_fails_after_the_pass_leaves_no_samples_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("summaries down")

    monkeypatch.setattr(pipeline_module, "summarize_run", broken)
    with pytest.raises(RuntimeError, match="summaries down"):
        run(tmp_path, 2)
    assert list((tmp_path / "runs").iterdir()) == []


def test_the_side_process_renders_the_judges_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = run(tmp_path, 1).report
    calls = renders_here(monkeypatch)
    side = run(tmp_path, 2).report
    # The side process renders while it has time to spare, the first chunk always (5 samples,
    # 2 rubrics); the run renders the rest (Spare).
    assert len(calls) <= 34 * 2 - 10
    same_file(side.samples, alone.samples)
    assert side.summary == alone.summary


def renders_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the prompts rendered in this process."""
    calls: list[int] = []
    render = PromptRenderer.render

    def counted(self: PromptRenderer, *args: Any) -> Any:
        calls.append(1)
        return render(self, *args)

    monkeypatch.setattr(PromptRenderer, "render", counted)
    return calls


def fails_there(samples: Sequence[Sample]) -> None:
    raise RuntimeError("no prompts here")


class WorkFails(JudgeRun):
    def aside(self) -> Any:
        return fails_there


def test_work_that_fails_in_the_side_process_is_done_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = run(tmp_path, 1).report
    prepare = JudgeEvaluator.prepare
    monkeypatch.setattr(
        JudgeEvaluator, "prepare", lambda self, **kw: WorkFails(self, prepare(self, **kw).panel)
    )
    calls = renders_here(monkeypatch)
    side = run(tmp_path, 2).report
    assert len(calls) == 34 * 2  # every prompt rendered here
    same_file(side.samples, alone.samples)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_side_process_does_the_work_while_it_has_time_to_spare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, sent = Clock(), []
    waits = iter([0.5, 0.1, 0.3, 0.0])  # each send's wait on the run

    def work(chunk: Sequence[int]) -> list[int]:
        clock.now += 0.2  # the work takes 0.2 s a chunk
        return [x * 2 for x in chunk]

    def send(conn: Any, message: object) -> None:
        clock.now += next(waits)
        sent.append(message)

    monkeypatch.setattr(side_worker, "_send", send)
    spare = side_worker.Spare(work, clock)
    done = []
    for chunk in ([1], [2], [3], [4], [5]):
        done.append(spare.work(chunk))  # type: ignore[arg-type]
        if len(done) < 5:
            spare.send(None, "results")  # type: ignore[arg-type]
    # 1st: always; 2nd: waited 0.5 >= 0.2; 3rd: waited 0.1, left to the run; 4th: 0.3; 5th: 0
    assert done == [[2], [4], None, [8], None]

    def fails(chunk: Sequence[int]) -> list[int]:
        raise RuntimeError("no")

    broken = side_worker.Spare(fails, clock)
    assert broken.work([1]) is None and broken.work([2]) is None  # type: ignore[arg-type]


def test_a_side_process_that_cannot_be_sent_its_work_leaves_the_riders_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    alone = run(tmp_path, 1).report

    def refused(self: Any, data: Any) -> None:
        raise OSError("broken pipe")

    monkeypatch.setattr(passes_module.Connection, "send_bytes", refused)
    side = run(tmp_path, 2).report
    assert "no second process (broken pipe): the evaluators run here" in caplog.text
    same_file(side.samples, alone.samples)


def test_a_short_run_whose_side_gave_the_file_up_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(EVALUATORS, "grows", Grows)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    report = run(tmp_path, 2, [EVALUATORS["rouge"](), Grows()], inline_samples=100).report
    assert isinstance(report.samples, list) and report.samples[-1].scores["b"] == 0.5
    assert list((tmp_path / "runs").iterdir()) == []
