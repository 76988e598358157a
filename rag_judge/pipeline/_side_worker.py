"""The side process of a run with ``processes: 2`` (rag_judge.pipeline.passes), run as
``python -m rag_judge.pipeline._side_worker FD``: FD is its end of a socket pair to the run.

It is sent the dataset's path, the chunk size, the evaluators, the run's log level, where to
write samples.jsonl (or None) and the driver's work to do on each chunk (``EvaluatorRun.aside``:
a judge's prompts, or None); it says it is ready once they are prepared, then reads the
dataset in the run's chunks and answers each chunk with every evaluator's result and seconds
and that work's result (or None: left to the run, when this process has no time to spare),
then with each evaluator's final word (None for one that crashed), or with an error that
stops it. When it writes samples.jsonl (``pipeline.side_join``), a thread takes the driver's
results the run sends, so neither side ever waits on a send the other is not reading; its last
word is the file's offsets and index, or why it gave the file up.
"""

from __future__ import annotations

import logging
import math
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

from rag_judge.data import column
from rag_judge.data.sample import Sample
from rag_judge.data.stream import JsonlSource
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.pipeline.side_join import Abandoned, Part, SideJoin, index_file
from rag_judge.pipeline.together import Rider, fixed_mmap_threshold

log = logging.getLogger("rag_judge")
T = TypeVar("T")

__all__: list[str] = []


def _send(conn: Connection, message: object) -> None:
    conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def _worker_main(fd: int) -> None:
    # Ctrl-C reaches the whole process group: the run handles it and then stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fixed_mmap_threshold()
    conn = Connection(fd)
    try:
        path, size, labels, evaluators, level, join, aside = pickle.loads(conn.recv_bytes())
        logging.basicConfig(format="%(levelname)s %(name)s (side process): %(message)s")
        logging.getLogger("rag_judge").setLevel(level)
        riders = [
            Rider(label, ev.prepare(), None) for label, ev in zip(labels, evaluators, strict=True)
        ]
        _send(conn, ("ready", None))
        source = JsonlSource(Path(path))
        source.checked()  # the run checks the ids; this pass only reads
        joiner = _Joiner(conn, join)
        spare = Spare(aside)
        for chunk in source.chunks(size):
            results = [(r.score(chunk), r.last) for r in riders]
            spare.send(conn, ("chunk", (results, spare.work(chunk))))
            joiner.chunk(chunk, [result for result, _ in results])
        _send(conn, ("end", [r.final() for r in riders]))
        joiner.end()
    except Exception as exc:  # the run says so: before "ready" it scores here instead
        _send(conn, ("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class Spare:
    """The driver's work on each chunk (its judge's prompts), done here while this process has
    time to spare: when, sending the last chunk's results, it waited on the run at least as
    long as the work took (the first chunk: always). The run does the work of the chunks it is
    not sent, so the two processes share it by their load. Work that fails once is left to the
    run from then on."""

    def __init__(
        self,
        work: Callable[[Sequence[Sample]], Any] | None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._work, self._clock = work, clock
        self.cost = 0.0  # the work's seconds on the last chunk it was done on
        self.waited = math.inf  # the seconds the last send took

    def work(self, chunk: Sequence[Sample]) -> Any:
        if self._work is None or self.waited < self.cost:
            return None
        start = self._clock()
        try:
            done = self._work(chunk)
        except Exception:
            log.debug("the driver's work on a chunk failed here: left to the run", exc_info=True)
            self._work = None
            return None
        self.cost = self._clock() - start
        return done

    def send(self, conn: Connection, message: object) -> None:
        start = self._clock()
        _send(conn, message)
        self.waited = self._clock() - start


class _Joiner:
    """The side of the join in this process: the driver's parts, read by a thread, are
    matched with the chunks read here, and the lines written as both are in. Any failure gives
    the file up (the run then joins as before); the riders' scoring goes on regardless."""

    def __init__(self, conn: Connection, join: tuple[str, list[int | None]] | None) -> None:
        self._conn = conn
        self._asked = join is not None
        self._join: SideJoin | None = None
        self._why = ""
        self._parts: queue.SimpleQueue[Part | None] = queue.SimpleQueue()
        if join is not None:
            try:
                self._join = SideJoin(Path(join[0]), join[1])
            except Exception as exc:  # no file here: the run joins, the riders go on
                self._why = f"{type(exc).__name__}: {exc}"
                return
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                part = pickle.loads(self._conn.recv_bytes())
                if self._join is not None:  # given up: the rest is read and let go
                    self._parts.put(part)
        except BaseException:  # the run has gone, or a part would not read: the end says so
            pass
        finally:
            self._parts.put(None)

    def chunk(self, samples: Sequence[Sample], results: Sequence[EvaluatorResult]) -> None:
        self._guarded(lambda j: j.chunk(samples, results))
        self._drain(block=False)

    def end(self) -> None:
        """The last word on the file, once every line is written (or it was given up)."""
        if not self._asked:
            return
        while self._join is not None and self._join.waiting:
            self._drain(block=True)
        path = self._join.path if self._join is not None else None
        closed = self._guarded(lambda j: j.close())
        if closed is None or path is None:
            _send(self._conn, ("unjoined", self._why))
            return
        # The index goes through a file, its arrays a block at a time (``column.dump``):
        # neither process holds them whole (60 MB a million samples).
        where = index_file(path)
        try:
            with where.open("wb") as fh:
                column.dump(closed, fh)
        except Exception as exc:
            where.unlink(missing_ok=True)
            _send(self._conn, ("unjoined", f"{type(exc).__name__}: {exc}"))
            return
        _send(self._conn, ("joined", str(where)))

    def _drain(self, *, block: bool) -> None:
        while self._join is not None:
            try:
                part = self._parts.get(block=block)
            except queue.Empty:
                return
            if part is None:
                self._give_up("the run stopped sending the driver's results")
                return
            self._guarded(partial(SideJoin.part, part=part))
            block = False

    def _guarded(self, step: Callable[[SideJoin], T]) -> T | None:
        if self._join is None:
            return None
        try:
            return step(self._join)
        except Abandoned as exc:
            self._give_up(str(exc))
        except Exception as exc:
            log.debug("samples.jsonl left to the run", exc_info=True)
            self._give_up(f"{type(exc).__name__}: {exc}")
        return None

    def _give_up(self, why: str) -> None:
        if self._join is not None:
            self._join.abandon()  # closed now: nothing of it reaches the file the run writes
        self._why, self._join = why, None
        while True:  # the parts read so far are let go (the thread lets the rest go)
            try:
                self._parts.get_nowait()
            except queue.Empty:
                break


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]))
