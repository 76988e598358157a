"""Concurrency helpers shared by the layers above: a coroutine run from synchronous code, and
one background thread that commits queued rows so that the caller never waits on a disk write.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["BackgroundWriter", "run_sync"]

T = TypeVar("T")
Row = TypeVar("Row")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, even inside a running event loop
    (Jupyter): then it runs in a fresh loop on a worker thread, without nest_asyncio."""
    try:
        asyncio.get_running_loop()
        running = True
    except RuntimeError:
        running = False
    if not running:
        # Outside the ``except`` block: an error of ``coro`` must not drag a chained
        # "RuntimeError: no running event loop" into every traceback.
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class BackgroundWriter(Generic[Row]):
    """A daemon thread (started on first use) that hands queued rows to ``write``, all rows
    that queued up meanwhile in one call, so one transaction commits many of them.

    ``submit`` returns a future resolved once its rows are written (or failed with the write's
    error); ``flush`` waits for everything queued and re-raises the first failed write since the
    last flush; ``close`` flushes and stops the thread (``finish``, if given, then runs on it,
    e.g. to close a connection it opened). SQLite releases the GIL while it commits, so the
    caller's thread goes on meanwhile.
    """

    def __init__(
        self,
        write: Callable[[list[Row]], None],
        *,
        name: str,
        finish: Callable[[], None] | None = None,
    ) -> None:
        self._write = write
        self._finish = finish
        self._name = name
        self._wake = threading.Condition()
        self._pending: list[Row] = []
        self._futures: list[concurrent.futures.Future[None]] = []
        self._busy = False
        self._closing = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def submit(self, rows: Sequence[Row]) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._wake:
            if self._closing:
                raise RuntimeError(f"writer {self._name!r} is closed")
            self._pending.extend(rows)
            self._futures.append(future)
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify_all()
        return future

    def _drain(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._pending and not self._closing:
                        self._wake.wait()
                    if not self._pending:
                        return
                    rows, self._pending = self._pending, []
                    futures, self._futures = self._futures, []
                    self._busy = True
                error: BaseException | None = None
                try:
                    self._write(rows)
                except Exception as exc:  # handed to the batch's futures and to flush()
                    error = exc
                with self._wake:
                    self._busy = False
                    if error is not None and self._error is None:
                        self._error = error
                    self._wake.notify_all()
                for future in futures:
                    if error is None:
                        future.set_result(None)
                    else:
                        future.set_exception(error)
        finally:
            if self._finish is not None:
                self._finish()

    def flush(self) -> None:
        """Wait until every submitted row is written; re-raise the first failed write."""
        with self._wake:
            while self._thread is not None and (self._pending or self._busy):
                self._wake.wait()
            error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Write what is queued, stop the thread; re-raise a failed write. Idempotent."""
        with self._wake:
            self._closing = True
            thread, self._thread = self._thread, None
            self._wake.notify_all()
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error
