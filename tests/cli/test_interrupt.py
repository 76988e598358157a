"""Ctrl-C: the first SIGINT stops `rag-judge run` at once (calls in flight cancelled), keeps the
finished judge calls in the cache, says where the run stood, and exits 130; a rerun resumes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rag_judge.cli import EXIT_INTERRUPTED, main
from tests import REPO
from tests.fake_openai_server import FakeOpenAIServer, Reply, chat, hang

DEMO = REPO / "configs" / "data" / "demo.jsonl"
ANSWERED = 6  # the server answers this many calls, then hangs on every one until released
CONCURRENCY = 4
VERDICT = '{"reason": "Supported by context 1.", "score": 4}'


def cached_rows(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        try:
            return int(conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0])
        except sqlite3.OperationalError:  # the table is not created yet
            return 0


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Poll a real process's progress (no fake clock can stand in for another process)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_ctrl_c_stops_at_once_keeps_finished_calls_and_a_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answered = 0
    released = False

    def script(body: dict[str, Any]) -> Reply:
        nonlocal answered
        if released or answered < ANSWERED:
            answered += 1
            return chat(VERDICT)
        return hang(120)

    cache = tmp_path / "judge.sqlite"
    with FakeOpenAIServer(script) as srv:
        config = tmp_path / "exp.yaml"
        config.write_text(
            f"name: t\ndataset: {DEMO}\nbootstrap: {{resamples: 10}}\nevaluators:\n"
            f"  - type: judge\n    rubrics: [faithfulness]\n    cache: {cache}\n"
            f"    client: {{provider: openai, model: m, base_url: '{srv.base_url}', "
            f"api_key_env: RAG_JUDGE_TEST_KEY, concurrency: {CONCURRENCY}, max_attempts: 1, "
            "timeout: 300}\n"
        )
        env = {**os.environ, "RAG_JUDGE_TEST_KEY": "sk-test", "PYTHONPATH": str(REPO)}
        out = tmp_path / "run"
        # stdout and stderr in one pipe, as a terminal or a CI log shows them: in order.
        proc = subprocess.Popen(
            [sys.executable, "-m", "rag_judge.cli", "run", str(config), "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
        )  # fmt: skip
        try:
            # Six calls answered and cached, four more in flight on a server that hangs.
            wait_for(lambda: srv.received >= ANSWERED + CONCURRENCY, "the hanging calls")
            wait_for(lambda: cached_rows(cache) >= ANSWERED, "the finished calls in the cache")
            stopped_at = time.monotonic()
            proc.send_signal(signal.SIGINT)
            err, _ = proc.communicate(timeout=30)
            took = time.monotonic() - stopped_at
        finally:
            proc.kill()
        assert proc.returncode == EXIT_INTERRUPTED == 130, err
        assert took < 20  # not the minute (or forever) a hanging call would hold it
        assert "Traceback" not in err
        assert (
            f"rag-judge: interrupted: stopped (t) during evaluators[0] (judge): "
            f"judge: {ANSWERED}/34 calls" in err
        )
        assert "rerunning the same command resumes" in err
        # The header, which names the judge, came before the run's steps: it was printed
        # after them, so an interrupted run never said which judge it had been calling.
        header = "rag-judge: evaluators: judge · judge: openai/m\n"
        assert header in err
        assert err.index(header) < err.index("rag-judge: interrupted:")
        assert not (out / "report.json").exists()
        assert cached_rows(cache) == ANSWERED

        # The rerun sends only the calls that had not finished.
        released = True
        before = srv.received
        assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
        assert srv.received - before == 34 - ANSWERED
        assert (out / "report.json").exists()
        capsys.readouterr()


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path: Path) -> None:
    """`rag-judge retrieval ... --per-query | head -1`: no BrokenPipeError traceback."""
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(5000)))
    run.write_text("".join(f"q{i} Q0 d{i} 1 1.0 t\n" for i in range(5000)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_judge.cli", "retrieval", str(qrels), str(run), "-m", "map",
         "--per-query"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert first.split() == ["map", "q0", "1.0000"]
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert proc.returncode == 141
