"""The shared concurrency helpers: run_sync and the background writer both caches use."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rag_judge._async import BackgroundWriter, run_sync


def test_rows_queued_during_a_write_share_the_next_one() -> None:
    gate, batches, threads = threading.Event(), [], set()

    def write(rows: list[int]) -> None:
        threads.add(threading.current_thread().name)
        gate.wait(5)
        batches.append(list(rows))

    writer: BackgroundWriter[int] = BackgroundWriter(write, name="test-writer")
    first = writer.submit([1])
    while not writer._busy:  # the thread has taken row 1 and waits on the gate
        threading.Event().wait(0.001)
    later = [writer.submit([2]), writer.submit([3, 4])]
    gate.set()
    for future in (first, *later):
        assert future.result(5) is None
    writer.close()
    assert batches == [[1], [2, 3, 4]]
    assert threads == {"test-writer"} and not writer.running


def test_a_failed_write_reaches_its_futures_and_flush_once() -> None:
    def write(rows: list[int]) -> None:
        if 13 in rows:
            raise OSError("disk full")

    finished: list[str] = []
    writer: BackgroundWriter[int] = BackgroundWriter(
        write, name="w", finish=lambda: finished.append(threading.current_thread().name)
    )
    bad = writer.submit([13])
    with pytest.raises(OSError, match="disk full"):
        bad.result(5)
    with pytest.raises(OSError, match="disk full"):
        writer.flush()
    writer.flush()  # reported once
    assert writer.submit([1]).result(5) is None
    writer.close()
    writer.close()  # idempotent
    assert finished == ["w"]  # the finish hook ran on the writer's own thread
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit([2])


def test_run_sync_inside_a_running_loop() -> None:
    async def inner() -> int:
        return 7

    async def outer() -> int:
        return run_sync(inner())  # a worker thread with its own loop, not nest_asyncio

    assert run_sync(inner()) == 7
    assert asyncio.run(outer()) == 7


def test_an_error_from_run_sync_carries_no_chained_event_loop_error() -> None:
    # Every evaluator failure's traceback used to start with "RuntimeError: no running event
    # loop", because asyncio.run ran inside the except block of the loop check.
    async def fail() -> None:
        raise ValueError("the evaluator's own error")

    with pytest.raises(ValueError, match="the evaluator's own error") as err:
        run_sync(fail())
    assert err.value.__context__ is None and err.value.__cause__ is None
