"""The progress display: what a run shows on stderr (a live line on a terminal, a line per step
elsewhere, nothing when quiet) and what it says after a Ctrl-C."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest

from rag_judge import BleuEvaluator, JudgeEvaluator, Pipeline, RetrievalEvaluator
from rag_judge import _progress as progress
from rag_judge.cli import main
from rag_judge.data.jsonl import read_jsonl
from rag_judge.data.target import run_target_sync
from rag_judge.llm import ClientConfig
from tests import REPO
from tests.llm import FakeClock

DEMO = REPO / "configs" / "data" / "demo.jsonl"
SAMPLES = read_jsonl(DEMO).samples[:4]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def stub_judge() -> JudgeEvaluator:
    return JudgeEvaluator(
        rubrics=["faithfulness", "correctness"], client=ClientConfig(provider="stub"), cache=None
    )


def test_auto_mode_is_a_bar_on_a_terminal_lines_elsewhere_and_off_when_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert progress.auto_mode(Terminal()) is progress.Mode.BAR
    assert progress.auto_mode(io.StringIO()) is progress.Mode.LINES
    assert progress.auto_mode(Terminal(), quiet=True) is progress.Mode.OFF
    monkeypatch.setenv("CI", "true")  # a CI log that claims to be a terminal gets lines
    assert progress.auto_mode(Terminal()) is progress.Mode.LINES


def test_lines_mode_prints_one_line_per_step_with_its_counts() -> None:
    shown = io.StringIO()
    pipe = Pipeline([RetrievalEvaluator(metrics=["map"]), BleuEvaluator(), stub_judge()])
    # A clock that stands still: no durations, so the lines are exact.
    with progress.showing(progress.Display(progress.Mode.LINES, shown, clock=lambda: 0.0)):
        pipe.run(SAMPLES)
    assert shown.getvalue().splitlines() == [
        "evaluators[0] (retrieval): done",
        "evaluators[1] (bleu): done",
        "evaluators[2] (judge): 8/8 calls",
        "evaluators 0, 1, 2 shared one pass over the samples",
    ]


def test_a_second_run_counts_its_calls_as_cached(tmp_path: Path) -> None:
    stub = stub_judge()
    cached = stub.judge.model_copy(update={"cache": tmp_path / "judge.sqlite"})
    judge = stub.model_copy(update={"judge": cached})
    for expected in ["8/8 calls", "8/8 calls (8 cached)"]:
        shown = io.StringIO()
        with progress.showing(progress.Display(progress.Mode.LINES, shown, clock=lambda: 0.0)):
            Pipeline([judge]).run(SAMPLES)
        assert shown.getvalue() == f"evaluators[0] (judge): {expected}\n"


def test_the_bar_redraws_one_line_in_place_and_leaves_a_line_per_step() -> None:
    clock = FakeClock()
    shown = Terminal()
    display = progress.Display(progress.Mode.BAR, shown, clock=clock)
    with progress.showing(display), progress.step("evaluators[0] (judge)"):
        calls = progress.task("faithfulness", 3, "calls")
        calls.update(done=1, cached=1)  # within REFRESH_S of the last draw: not redrawn
        clock.now += 1.0
        calls.update(done=1)
        clock.now += 1.0
        calls.update(done=1, failed=1)
        calls.close()
    out = shown.getvalue()
    frames = out.split(progress.CLEAR)
    assert frames == [
        "",
        "evaluators[0] (judge) ... 0 s",
        "evaluators[0] (judge) faithfulness: 0/3 calls 0 s",
        "evaluators[0] (judge) faithfulness: 2/3 calls (1 cached) 1 s",
        "evaluators[0] (judge) faithfulness: 3/3 calls (1 cached, 1 failed) 2 s",
        "evaluators[0] (judge) ... 2 s",
        "evaluators[0] (judge): 3/3 calls (1 cached, 1 failed) in 2.0 s\n",
    ]


def test_off_shows_nothing_but_still_counts_for_the_status() -> None:
    shown = io.StringIO()
    display = progress.Display(progress.Mode.OFF, shown)
    with progress.showing(display):
        display.start_run("demo")
        with progress.step("evaluators[0] (retrieval)"):
            pass
        with progress.step("evaluators[1] (judge)"):
            progress.task("judge", 60, "calls").update(done=12, cached=2, retried=1)
            status = display.status()
    assert shown.getvalue() == ""
    assert status == (
        "stopped (demo) during evaluators[1] (judge): judge: 12/60 calls (2 cached, 1 retried); "
        "finished: evaluators[0] (retrieval)"
    )


def test_target_calls_are_counted_with_their_failures() -> None:
    def answer(question: str) -> dict[str, str]:
        if "password" in question.lower():
            raise RuntimeError("down")
        return {"answer": "an answer"}

    questions = [s.model_copy(update={"question": q}) for s, q in zip(SAMPLES, ["a", "Password?"])]
    with (
        progress.showing(progress.Display(clock=lambda: 0.0)) as display,
        progress.step("target") as step,
    ):
        run_target_sync(answer, questions)
    assert display.steps == [step]
    assert step.describe() == "target: 2/2 calls (1 failed)"


@pytest.mark.slow
def test_bertscore_counts_unique_texts_encoded_then_cached() -> None:
    from rag_judge import BERTScoreEvaluator

    bert = BERTScoreEvaluator(metrics=["bertscore_f1"], disk_cache=False)
    fresh = uuid.uuid4().hex  # texts no earlier test put in the process's embedding memory
    samples = [
        s.model_copy(update={"answer": f"{s.answer} {fresh}", "references": (f"{fresh}.",)})
        for s in SAMPLES
    ]
    texts = {t.strip() for s in samples for t in (s.answer or "", *s.references)}
    lines = []
    for _ in range(2):
        shown = io.StringIO()
        with progress.showing(progress.Display(progress.Mode.LINES, shown, clock=lambda: 0.0)):
            Pipeline([bert]).run(samples)
        lines.append(shown.getvalue())
    n = len(texts)
    assert lines[0] == f"evaluators[0] (bertscore): {n}/{n} texts\n"
    # the second run finds every text in the process's embedding memory
    assert lines[1] == f"evaluators[0] (bertscore): {n}/{n} texts ({n} cached)\n"


def test_the_cli_prints_a_line_per_step_unless_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"name: t\ndataset: {DEMO}\nbootstrap: {{resamples: 10}}\nevaluators:\n"
        "  - {type: retrieval, metrics: [map]}\n"
        "  - {type: judge, rubrics: [faithfulness], cache: null}\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0].split(" in ")[0] for line in err] == [
        "evaluators[0] (retrieval)",
        "evaluators[1] (judge)",
        "evaluators 0, 1 shared one pass over the samples",
    ]
    assert err[1].startswith("evaluators[1] (judge): 34/34 calls in ")
    assert main(["run", str(config), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_library_bars_are_off_inside_and_restored_after() -> None:
    hf_logging = pytest.importorskip("transformers.utils.logging")
    for before in (True, False):
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()
        with progress.no_library_bars():
            assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.is_progress_bar_enabled() is before
    hf_logging.enable_progress_bar()
