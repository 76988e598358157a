"""A judge run killed midway (SIGKILL) and restarted repeats none of the finished calls."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers.stub import StubClient
from tests import REPO

N = 60

# Every call appends its prompt to a file *before* the engine sees the reply, so the file holds
# every call ever made, finished or not.
RUN = """
import sys
from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers.stub import StubClient, scripted

calls_path, cache_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

def respond(request):
    prompt = request.messages[0].content
    with open(calls_path, "a") as f:
        f.write(prompt + "\\n")
    return "verdict for " + prompt

client = StubClient(scripted(respond, name="resume-test"), delay=0.1)
requests = [CompletionRequest(messages=(ChatMessage("user", f"r{i}"),)) for i in range(n)]
with JudgeEngine(client, cache=cache_path, concurrency=2) as engine:
    results = engine.run_sync(requests)
assert [r.text for r in results] == ["verdict for " + r.messages[0].content for r in requests]
print(engine.usage.model_dump_json())
"""


def count_rows(path: Path) -> int:
    """Rows in the cache, read-only (the run may not have created the table yet)."""
    if not path.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def prompts_in(cache_path: Path) -> set[str]:
    engine = JudgeEngine(StubClient(model="resume-test"))
    keys = {
        engine.key(CompletionRequest(messages=(ChatMessage("user", f"r{i}"),))): f"r{i}"
        for i in range(N)
    }
    with SqliteCache(cache_path) as cache:
        return {keys[k] for k in cache.get_many(keys)}


@pytest.mark.slow
def test_killed_run_resumes_without_repeating_finished_calls(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(RUN)
    calls, cache_path = tmp_path / "calls.txt", tmp_path / "cache.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, str(script), str(calls), str(cache_path), str(N)]

    with subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and proc.poll() is None:
            done = count_rows(cache_path)
            if done >= 10:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    finished = prompts_in(cache_path)
    first_calls = calls.read_text().split()
    assert 10 <= len(finished) < N
    assert finished <= set(first_calls)  # every cached result came from a call

    resumed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    usage = json.loads(resumed.stdout.strip().splitlines()[-1])
    second_calls = calls.read_text().split()[len(first_calls) :]

    assert not finished & set(second_calls)  # no finished call was made again
    assert len(second_calls) == len(set(second_calls)) == N - len(finished)
    assert usage["cache_hits"] == len(finished) and usage["requests"] == N - len(finished)
    assert prompts_in(cache_path) == {f"r{i}" for i in range(N)}
