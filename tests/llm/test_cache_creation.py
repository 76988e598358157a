"""Several processes creating one judge cache file (issue 27, item 23): setting the new file
up waits for another process's lock, as every other statement does, instead of failing the
whole judge step with "database is locked"."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_judge import resources
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.llm.base import Completion
from rag_judge.llm.cache import SqliteCache
from tests.evaluators import judge_sample

# Another process that creates the file and holds its write lock until told to let go.
_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
print("released", flush=True)
"""


class Holder:
    """A process holding a write lock on ``path``; ``release()`` ends it and waits for that."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "held\n"
        self.waits = 0  # tries the cache made while the lock was held

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.proc.poll() is None:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline() == "released\n"
            self.proc.wait(30)

    def pause(self, seconds: float) -> None:
        # Stands in for the cache's wait between tries: the lock is let go instead of waited on.
        self.waits += 1
        self.release()


@pytest.fixture
def holder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Holder]:
    held = Holder(tmp_path / "judge.sqlite")
    monkeypatch.setattr(resources, "_pause", held.pause)
    try:
        yield held
    finally:
        held.release()


def test_creating_a_cache_waits_for_another_process_s_write_lock(
    tmp_path: Path, holder: Holder
) -> None:
    cache = SqliteCache(tmp_path / "judge.sqlite")  # failed at once: "database is locked"
    try:
        assert holder.waits >= 1
        cache.put("k", Completion(["{}"]))
        assert "k" in cache and len(cache) == 1
    finally:
        cache.close()
    mode = sqlite3.connect(tmp_path / "judge.sqlite").execute("PRAGMA journal_mode").fetchone()
    assert mode == ("wal",)


def test_the_judge_step_survives_a_locked_new_cache(tmp_path: Path, holder: Holder) -> None:
    judge = JudgeEvaluator(rubrics=["fluency"], cache=tmp_path / "judge.sqlite")
    result = judge.evaluate([judge_sample(i) for i in range(1, 4)])
    assert holder.waits >= 1
    assert all(v is not None for v in result.scores["fluency"]) and not any(result.errors)


def test_creating_the_embedding_cache_waits_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BERTScore's embedding cache had the same race on its own SQLite file.
    from rag_judge.metrics.bertscore.cache import EmbeddingCache

    held = Holder(tmp_path / "embeddings.sqlite")
    monkeypatch.setattr(resources, "_pause", held.pause)
    try:
        cache = EmbeddingCache(tmp_path)  # failed at once: "database is locked"
        cache.close()
        assert held.waits >= 1
    finally:
        held.release()
    mode = sqlite3.connect(tmp_path / "embeddings.sqlite").execute("PRAGMA journal_mode")
    assert mode.fetchone() == ("wal",)


def test_a_lock_that_outlasts_the_timeout_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Holder(tmp_path / "judge.sqlite")
    monkeypatch.setattr(resources, "BUSY_TIMEOUT", 0.0)  # give up at the first lock
    try:
        with pytest.raises(sqlite3.OperationalError) as err:
            SqliteCache(tmp_path / "judge.sqlite")
    finally:
        held.release()
    message = str(err.value)
    assert str(tmp_path / "judge.sqlite") in message and "database is locked" in message
    assert err.value.__suppress_context__  # one error, not a chain of them


def _create_and_write(path: str, barrier: multiprocessing.synchronize.Barrier, i: int) -> None:
    barrier.wait(30)  # every process opens the new file at the same moment
    with SqliteCache(path) as cache:
        cache.put(f"k{i}", Completion([str(i)]))


@pytest.mark.slow
def test_several_processes_create_one_cache_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh" / "judge.sqlite")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    procs = [context.Process(target=_create_and_write, args=(path, barrier, i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with SqliteCache(path) as cache:
        assert sorted(cache.get_many(f"k{i}" for i in range(4))) == ["k0", "k1", "k2", "k3"]
