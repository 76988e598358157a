"""One pass over the samples for several evaluators: those that score a chunk at a time (the
riders: retrieval, ROUGE, BLEU, a user's ``score``) are handed each chunk as the pass reads it,
and one evaluator that runs its own chunks (the driver: a judge) takes the chunks through
:func:`~rag_judge.pipeline.running.stream`. A streamed dataset is read and parsed once instead
of once per evaluator. With ``processes: 2`` the riders run in a second process that reads
the dataset itself (:class:`SideProcess`), beside the driver.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol

from rag_judge import _progress as progress_
from rag_judge.data.sample import Sample
from rag_judge.data.stream import JsonlSource, SampleSource
from rag_judge.evaluators.base import EvaluatorRun
from rag_judge.evaluators.result import EvaluatorResult, Final
from rag_judge.pipeline.collect import Step
from rag_judge.pipeline.running import check_aligned, crashed, stream

__all__ = [
    "Rider",
    "Riders",
    "SideProcess",
    "can_send",
    "fixed_mmap_threshold",
    "rides",
    "share_pass",
    "stream_together",
]

log = logging.getLogger("rag_judge")


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024


def fixed_mmap_threshold() -> bool:
    """Keep glibc's malloc from raising its mmap threshold, for a process that runs a long
    pass (the CLI's run, a side process); whether it took. A large block that numpy frees
    lifts the threshold, after which such blocks come from the heap between long-lived
    objects and stay in the process: at 100,000 samples the peak was 40 MB higher. A
    library caller's process is left as it is."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # another C library (musl): nothing to tune
        return False


def rides(run: EvaluatorRun) -> bool:
    """Whether ``run`` can score each chunk as another evaluator's pass reads it: it scores a
    chunk at a time through the base class, with no state across chunks it keeps itself."""
    ev = run.evaluator
    inherited = type(run).evaluate_chunks is EvaluatorRun.evaluate_chunks
    return inherited and ev.shardable and ev.per == "conversation" and not ev.reads()


@dataclass
class Rider:
    """An evaluator scored a chunk at a time in another's pass over the samples; a crash
    fails its metrics on that chunk and every later one, as :func:`stream` does. ``step`` is
    None in a side process, which sends the results to the run instead."""

    label: str
    run: EvaluatorRun
    step: Step | None
    seconds: float = 0.0  # its own scoring, the reading of the samples not counted
    last: float = 0.0  # ... of the last chunk
    crash: Exception | None = None
    names: list[str] = field(default_factory=list)
    clock: Callable[[], float] = time.perf_counter

    def __post_init__(self) -> None:
        self.names = self.run.metric_names()

    def score(self, chunk: Sequence[Sample]) -> EvaluatorResult:
        start = self.clock()
        result: EvaluatorResult | None = None
        if self.crash is None:
            try:
                result = self.run.evaluate_chunk(chunk)
                check_aligned(result, len(chunk), self.names)
            except Exception as exc:  # one broken evaluator must not lose the others' results
                log.exception("evaluator %s failed", self.run.evaluator.type)
                self.crash, result = exc, None
        if result is None:
            result = crashed(self.run.evaluator, len(chunk), self.crash or Exception(), self.names)
        self.last = self.clock() - start
        self.seconds += self.last
        return result

    def take(self, chunk: Sequence[Sample]) -> None:
        result = self.score(chunk)
        if self.step is None:  # pragma: no cover - a side process sends, never takes
            raise RuntimeError("a rider without a step cannot take a chunk")
        self.step.add(result)

    def finish(self) -> None:
        if self.crash is None and self.step is not None:
            self.step.finish(self.run.finish())


class Riders(Protocol):
    """Who scores the riders' chunks: this process (:class:`Inline`), or a side process."""

    def take(self, chunk: Sequence[Sample]) -> None: ...

    def finish(self) -> None: ...


class Inline:
    """The riders scored in this process, one after another."""

    def __init__(self, riders: Sequence[Rider]) -> None:
        self.riders = riders

    def take(self, chunk: Sequence[Sample]) -> None:
        for rider in self.riders:
            rider.take(chunk)

    def finish(self) -> None:
        for rider in self.riders:
            rider.finish()


class _Shared:
    """The chunks of one pass, each handed to the riders as it is read, then to the pass's
    driver (if any); the time this process spent on the riders is counted."""

    def __init__(self, chunks: Iterable[list[Sample]], riders: Riders, clock: Callable[[], float]):
        self._chunks = iter(chunks)
        self._riders = riders
        self._clock = clock
        self.seen = False
        self.seconds = 0.0

    def __iter__(self) -> Iterator[list[Sample]]:
        return self

    def __next__(self) -> list[Sample]:
        chunk = next(self._chunks)
        self.seen = True
        start = self._clock()
        self._riders.take(chunk)
        self.seconds += self._clock() - start
        return chunk


def stream_together(
    riders: Sequence[Rider],
    driver: tuple[str, EvaluatorRun, Step] | None,
    chunks: Iterable[list[Sample]],
    side: Callable[[Sequence[Rider]], Riders] | None = None,
) -> None:
    """One pass over ``chunks`` for the ``riders`` and the ``driver``; ``side`` (when given)
    opens the process that scores the riders. Each step is shown with its own time (the
    driver's: the pass's, less what this process spent on the riders, the reading counted in
    it), then the pass's wall time."""
    display = progress_.current()
    shown = [display.begin(r.label) for r in riders]
    for rider in riders:
        rider.clock = display.now
    started = display.now()
    scorer = side(riders) if side is not None else Inline(riders)
    try:
        shared = _Shared(chunks, scorer, display.now)
        if driver is not None:
            label, run, step = driver
            driven = display.begin(label)
            stream(run, shared, step)
        else:
            for _ in shared:  # the riders score each chunk as it is read
                pass
        if not shared.seen:  # no samples at all: every evaluator still signs its (empty) columns
            scorer.take([])
        scorer.finish()
    finally:
        close = getattr(scorer, "close", None)
        if close is not None:
            close()
    for rider, s in zip(riders, shown, strict=True):
        display.end(s, rider.seconds)
    wall = display.now() - started
    if driver is not None:
        display.end(driven, wall - shared.seconds)
    # "evaluators 0, 1, 3, 2 shared one pass over the samples (0, 1, 3 in a second process)"
    number = {r.label: r.label.split("]")[0].removeprefix("evaluators[") for r in riders}
    numbers = [*number.values(), *([driver[0].split("]")[0][11:]] if driver else [])]
    where = f" ({', '.join(number.values())} in a second process)" if side else ""
    line = f"evaluators {', '.join(numbers)} shared one pass over the samples{where}"
    display.note(line, wall)


def share_pass(
    processes: int,
    size: int,
    runs: Sequence[EvaluatorRun],
    made: Sequence[Step | None],
    pending: Collection[int],
    order: Sequence[int],
    source: SampleSource,
) -> set[int]:
    """Run in one pass over the samples (``size`` at a time) the evaluators that can share
    it: those that score a chunk at a time (``rides``), driven by the first that runs its own
    chunks (a judge), with ``processes`` 2 the riders in a side process; returns their
    indices (none when sharing would not save a pass). ``made[i]`` is evaluator ``i``'s step
    (None: per unit), ``pending`` the evaluators Ray runs."""
    free = [i for i in order if made[i] is not None and i not in pending]
    riding = [i for i in free if rides(runs[i])]
    drivers = [
        i for i in free
        if i not in riding and not runs[i].evaluator.reads() and runs[i].evaluator.shardable
    ]  # fmt: skip
    driver = drivers[0] if drivers else None
    if len(riding) + (driver is not None) < 2:
        return set()

    def label(i: int) -> str:
        return f"evaluators[{i}] ({runs[i].evaluator.type})"

    riders = [Rider(label(i), runs[i], step) for i in riding if (step := made[i]) is not None]
    driven = None
    if driver is not None and (step := made[driver]) is not None:
        driven = (label(driver), runs[driver], step)
    side: Callable[[Sequence[Rider]], Riders] | None = None
    # A second process pays off beside a driver, over a file it can read itself.
    if processes == 2 and driven and isinstance(source, JsonlSource):
        if can_send(riders):
            side = partial(SideProcess, source.path, size)
        else:
            log.warning("processes: 2: an evaluator cannot be sent to a second process")
    stream_together(riders, driven, source.chunks(size), side)
    return {*riding, *([driver] if driver is not None else [])}


def can_send(riders: Sequence[Rider]) -> bool:
    """Whether a fresh interpreter can rebuild each rider's evaluator: it pickles, and its
    class is not defined in a script run as ``__main__`` (or a notebook)."""
    for rider in riders:
        evaluator = rider.run.evaluator
        if type(evaluator).__module__ == "__main__":
            return False
        try:
            pickle.dumps(evaluator)
        except Exception:
            return False
    return True


class SideProcess:
    """The riders' scoring in a worker process over the dataset at ``path``."""

    def __init__(self, path: Path, size: int, riders: Sequence[Rider]) -> None:
        self.riders = riders
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "rag_judge.pipeline._side_worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()  # the child's copy only: its death then reads as end of file here
        self._conn = Connection(ours.detach())
        labels = [r.label for r in riders]
        message = (str(path), size, labels, [r.run.evaluator for r in riders])
        self._conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
        self.lost: Exception | None = None

    def _receive(self, expected: str) -> object:
        try:
            kind, body = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            code = self._process.wait()
            raise RuntimeError(f"the side process stopped (exit code {code})") from None
        if kind == "error":
            raise RuntimeError(f"the side process failed: {body}")
        if kind != expected:
            raise RuntimeError(f"the side process sent {kind!r} where {expected!r} was due")
        return body

    def take(self, chunk: Sequence[Sample]) -> None:
        """The riders' results for ``chunk``, the next of the pass (the side read it too). A
        side process that stopped or failed fails the riders' metrics on this chunk and every
        later one, as a crash does; the run goes on."""
        results: list[tuple[EvaluatorResult, float]] = []
        if self.lost is None:
            try:
                results = self._receive("chunk")  # type: ignore[assignment]
                if any(len(result.errors) != len(chunk) for result, _ in results):
                    raise RuntimeError("the side process read the dataset in other chunks")
            except RuntimeError as exc:
                log.error("processes: 2: %s", exc)
                self.lost, results = exc, []
        for i, rider in enumerate(self.riders):
            if self.lost is not None:
                rider.crash = self.lost
                result = crashed(rider.run.evaluator, len(chunk), self.lost, rider.names)
                seconds = 0.0
            else:
                result, seconds = results[i]
            if rider.step is not None:
                rider.step.add(result)
            rider.seconds += seconds
            rider.last = seconds

    def finish(self) -> None:
        if self.lost is not None:
            return
        try:
            finals: list[Final | None] = self._receive("end")  # type: ignore[assignment]
        except RuntimeError as exc:  # the scores are in: only the final signatures are lost
            log.error("processes: 2: %s", exc)
            finals = [None] * len(self.riders)
        for rider, final in zip(self.riders, finals, strict=True):
            if final is not None and rider.step is not None:
                rider.step.finish(final)
            elif final is None:
                rider.crash = RuntimeError("crashed in the side process")

    def close(self) -> None:
        """Stop the worker (at once, if the run stopped early)."""
        with contextlib.suppress(OSError):
            self._conn.close()
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
