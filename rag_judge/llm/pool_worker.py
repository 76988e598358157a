"""A worker process of the judge engine's pool (rag_judge.llm.pool), run as
``python -m rag_judge.llm.pool_worker FD``: FD is its end of a socket pair to the parent.

The parent first sends the pickled client and the worker's limits, then batches of
``(id, request)``; the worker answers with lists of ``(id, result, usage counters)``, one list
per loop turn, and stops on ``None`` or when the parent's end closes.
"""

from __future__ import annotations

import asyncio
import pickle
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from rag_judge import _progress as progress
from rag_judge.llm.base import Completion, CompletionRequest, LLMClient, LLMError, Usage
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.pool import COUNTERS

__all__: list[str] = []

Result = Completion | LLMError


def _worker_main(fd: int) -> None:
    # Ctrl-C reaches the whole process group: the parent handles it and then stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    client, limits = pickle.loads(conn.recv_bytes())
    asyncio.run(_serve(conn, pickle.loads(client), limits))


async def _serve(conn: Connection, client: LLMClient, limits: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    engine = JudgeEngine(client, **limits)
    bar = progress.Task("worker", 0, "calls", display=None)
    stopped = asyncio.Event()
    outbox: list[tuple[int, Result, dict[str, int]]] = []
    running: set[asyncio.Task[None]] = set()

    def flush() -> None:
        # One message per loop turn carries every call that finished in it.
        replies = outbox.copy()
        outbox.clear()
        try:
            conn.send_bytes(pickle.dumps(replies, pickle.HIGHEST_PROTOCOL))
        except OSError:  # the parent is gone
            stopped.set()

    async def one(ident: int, request: CompletionRequest) -> None:
        usage = Usage()
        result = await engine.call(request, bar, usage)
        if not outbox:
            loop.call_soon(flush)
        outbox.append((ident, result, {name: getattr(usage, name) for name in COUNTERS}))

    def take(batch: list[tuple[int, CompletionRequest]] | None) -> None:
        if batch is None:
            stopped.set()
            return
        for ident, request in batch:
            task = loop.create_task(one(ident, request))
            running.add(task)
            task.add_done_callback(running.discard)

    def read() -> None:
        # A thread of its own, so that the parent's sends never wait on this loop's sends.
        try:
            while True:
                batch = pickle.loads(conn.recv_bytes())
                loop.call_soon_threadsafe(take, batch)
                if batch is None:
                    return
        except (EOFError, OSError):  # the parent died: stop
            loop.call_soon_threadsafe(take, None)

    threading.Thread(target=read, name="rag-judge-worker-reader", daemon=True).start()
    await stopped.wait()
    for task in running:
        task.cancel()
    await engine.aclose()


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]))
