"""Worker processes for the judge engine: its calls spread over several event loops.

One event loop spends about a millisecond of CPU per call in the SDK and the HTTP layer, which
caps it at a few hundred calls per second whatever the cores. A ``ProcessPool`` runs the calls
in ``processes`` worker processes instead. Each worker has its own event loop, its own copy of
the client (pickled to it, so its own SDK and connections) and its own ``JudgeEngine`` without a
cache. That engine applies the limits, retries and timeout exactly as the in-process path does.

The parent engine keeps everything that decides what is sent and what a result is worth: the
cache, identical requests served once, the usage totals and the progress bar. It ships requests
to the workers in batches and gets back each result with the usage of that one call.

Limits are divided evenly: worker k gets ``rpm / processes`` and ``tpm / processes`` (each paces
its own share), and ``concurrency`` split into whole calls that add up to it. A worker that dies
fails the calls it held with an ``LLMError`` naming its exit code; the rest go to the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import socket
import subprocess
import sys
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from rag_judge.llm.base import Completion, CompletionRequest, LLMClient, LLMError

__all__ = ["ProcessPool", "shares", "worker_limits"]

log = logging.getLogger(__name__)
Result = Completion | LLMError
# The counters one call adds to the engine's usage (cost is recomputed by the parent).
COUNTERS = ("requests", "retries", "connect_errors", "failures", "prompt_tokens",
            "completion_tokens", "cached_prompt_tokens")  # fmt: skip
_WINDOW = 2  # requests held by a worker per call slot: one running, one ready to start


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole numbers that add up to it (8 over 3: 3, 3, 2)."""
    whole, extra = divmod(total, parts)
    return [whole + (k < extra) for k in range(parts)]


def worker_limits(limits: dict[str, Any], processes: int) -> list[dict[str, Any]]:
    """The engine's ``limits`` as each of ``processes`` workers gets them: ``rpm`` and ``tpm``
    divided evenly (None stays None), ``concurrency`` split into whole ``shares``; the rest as
    they are. The shares add up to the engine's limits."""
    out = []
    for slots in shares(int(limits.get("concurrency", 8)), processes):
        mine = dict(limits, concurrency=slots)
        for name in ("rpm", "tpm"):
            if mine.get(name) is not None:
                mine[name] = mine[name] / processes
        out.append(mine)
    return out


class _Worker:
    """The parent's end of one worker: its process, its pipe, the calls it holds."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection, slots: int) -> None:
        self.process = process
        self.conn = conn
        self.window = slots * _WINDOW
        self.held: dict[int, asyncio.Future[tuple[Result, dict[str, int]]]] = {}
        self.alive = True


class ProcessPool:
    """``processes`` workers calling ``client`` under ``limits`` (the keyword arguments of a
    ``JudgeEngine``: concurrency, rpm, tpm, max_attempts, timeout), divided among them.

    Started on the first ``call``; ``close`` stops the workers. ``call`` is awaited from one
    event loop at a time (the engine's ``run``)."""

    def __init__(self, client: LLMClient, processes: int, limits: dict[str, Any]) -> None:
        self.processes = processes
        self._client = pickle.dumps(client)  # checked by the engine at its construction
        self._limits = limits
        self._workers: list[_Worker] = []
        self._pending: deque[tuple[int, CompletionRequest]] = deque()
        self._futures: dict[int, asyncio.Future[tuple[Result, dict[str, int]]]] = {}
        self._next_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dispatching = False
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The live workers' process ids (for a benchmark reading their CPU time)."""
        return [w.process.pid for w in self._workers if w.alive]

    # ---- the parent's side -----------------------------------------------------------------

    def _start(self) -> None:
        # A fresh interpreter running this module, not multiprocessing: its spawn re-runs the
        # caller's main script (a script without a __main__ guard would start workers itself),
        # and a fork copies a process that has threads (the cache's writer).
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for limits in worker_limits(self._limits, self.processes):
            ours, theirs = socket.socketpair()
            process = subprocess.Popen(
                [sys.executable, "-m", "rag_judge.llm.pool_worker", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
            theirs.close()  # the child's copy only: its death then reads as end of file here
            conn = Connection(ours.detach())
            conn.send_bytes(pickle.dumps((self._client, limits), pickle.HIGHEST_PROTOCOL))
            self._workers.append(_Worker(process, conn, limits["concurrency"]))

    def attach(self) -> None:
        """Listen for results on the running loop (a run may bring a fresh loop)."""
        if self._closed:
            raise RuntimeError("this ProcessPool is closed")
        if not self._workers:
            self._start()
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.detach()
            self._loop = loop
            for worker in self._workers:
                if worker.alive:
                    loop.add_reader(worker.conn.fileno(), self._receive, worker)

    def detach(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            for worker in self._workers:
                if worker.alive:
                    loop.remove_reader(worker.conn.fileno())

    def call(self, request: CompletionRequest) -> asyncio.Future[tuple[Result, dict[str, int]]]:
        """The result of one call made by a worker, and the usage counters that call added."""
        assert self._loop is not None, "attach() first"
        future: asyncio.Future[tuple[Result, dict[str, int]]] = self._loop.create_future()
        self._next_id += 1
        self._futures[self._next_id] = future
        self._pending.append((self._next_id, request))
        if not self._dispatching:  # one dispatch per loop turn ships a whole chunk at once
            self._dispatching = True
            self._loop.call_soon(self._dispatch)
        return future

    def _dispatch(self) -> None:
        self._dispatching = False
        live = [w for w in self._workers if w.alive]
        if not live:
            while self._pending:
                ident, _ = self._pending.popleft()
                self._fail(ident, "every judge worker process has died")
            return
        for worker in live:
            batch: list[tuple[int, CompletionRequest]] = []
            while self._pending and len(worker.held) + len(batch) < worker.window:
                ident, request = self._pending.popleft()
                future = self._futures.get(ident)
                if future is None or future.done():  # its run was cancelled
                    self._futures.pop(ident, None)
                    continue
                batch.append((ident, request))
            if not batch:
                continue
            for ident, _ in batch:
                worker.held[ident] = self._futures.pop(ident)
            try:
                worker.conn.send_bytes(pickle.dumps(batch, pickle.HIGHEST_PROTOCOL))
            except OSError:
                self._lost(worker)
        if self._pending and not any(w.alive for w in self._workers):
            self._dispatch()  # the last worker died while taking calls: fail the rest now

    def _receive(self, worker: _Worker) -> None:
        try:
            while worker.conn.poll():
                replies = pickle.loads(worker.conn.recv_bytes())
                for ident, result, usage in replies:
                    future = worker.held.pop(ident, None)
                    if future is not None and not future.done():
                        future.set_result((result, usage))
        except (EOFError, OSError):
            self._lost(worker)
        self._dispatch()

    def _lost(self, worker: _Worker) -> None:
        """A worker whose pipe closed: it died. Its calls fail; the others carry on."""
        if not worker.alive:
            return
        worker.alive = False
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(worker.conn.fileno())
        try:
            code: int | None = worker.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # its pipe closed, yet it runs: stop it
            worker.process.kill()
            code = worker.process.wait()
        log.warning("judge worker process %s died (exit code %s)", worker.process.pid, code)
        reason = f"the judge worker process running this call died (exit code {code})"
        for ident, future in worker.held.items():
            self._futures[ident] = future
            self._fail(ident, reason)
        worker.held.clear()
        worker.conn.close()

    def _fail(self, ident: int, reason: str) -> None:
        future = self._futures.pop(ident, None)
        if future is not None and not future.done():
            # The call may have reached the server: counted as a request, failed for good.
            future.set_result((LLMError(reason), {"requests": 1, "failures": 1}))

    def close(self) -> None:
        """Stop the workers (each finishes nothing more: close only between runs)."""
        if self._closed:
            return
        self._closed = True
        self.detach()
        for worker in self._workers:
            if worker.alive:
                with contextlib.suppress(OSError):  # already gone
                    worker.conn.send_bytes(pickle.dumps(None))
        for worker in self._workers:
            try:
                worker.process.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a wedged worker
                worker.process.kill()
                worker.process.wait()
            if not worker.conn.closed:
                worker.conn.close()
