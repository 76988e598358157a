"""One pass over the samples for several evaluators: those that score a chunk at a time (the
riders: retrieval, ROUGE, BLEU, a user's ``score``) are handed each chunk as the pass reads it,
and one evaluator that runs its own chunks (the driver: a judge) takes the chunks through
:func:`~rag_judge.pipeline.running.stream`. A streamed dataset is read and parsed once instead
of once per evaluator. With ``processes: 2`` the riders run in a second process that reads
the dataset itself (:class:`~rag_judge.pipeline.passes.SideProcess`), beside the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rag_judge import _progress as progress_
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import EvaluatorRun
from rag_judge.evaluators.result import EvaluatorResult, Final
from rag_judge.pipeline.collect import Step
from rag_judge.pipeline.running import check_aligned, crashed, stream

__all__ = [
    "Inline",
    "Rider",
    "Riders",
    "fixed_mmap_threshold",
    "rides",
    "stream_together",
    "trimmed_heap",
]

log = logging.getLogger("rag_judge")


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024


_fixed = False  # whether this process fixed its mmap threshold (and so may trim its heap)


def fixed_mmap_threshold() -> bool:
    """Keep glibc's malloc from raising its mmap threshold, for a process that runs a long
    pass (the CLI's run, a side process); whether it took. A large block that numpy frees
    lifts the threshold, after which such blocks come from the heap between long-lived
    objects and stay in the process: at 100,000 samples the peak was 40 MB higher. A
    library caller's process is left as it is."""
    if not sys.platform.startswith("linux"):
        return False
    global _fixed
    try:
        libc = ctypes.CDLL("libc.so.6")
        _fixed = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # another C library (musl): nothing to tune
        _fixed = False
    return _fixed


def trimmed_heap() -> bool:
    """In a process that fixed its mmap threshold, give the heap's free pages back to the
    system (glibc's malloc_trim) once a long pass is over: the pass's chunks of samples,
    prompts and replies leave free memory between long-lived objects that the report's end
    would otherwise carry; whether it did."""
    if not _fixed:
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def rides(run: EvaluatorRun) -> bool:
    """Whether ``run`` can score each chunk as another evaluator's pass reads it: it scores a
    chunk at a time through the base class, with no state across chunks it keeps itself. An
    encoder (``wants_gpu``: BERTScore) keeps a pass of its own, with its own progress bar."""
    ev = run.evaluator
    inherited = type(run).evaluate_chunks is EvaluatorRun.evaluate_chunks
    plain = ev.shardable and ev.per == "conversation" and not ev.reads() and not ev.wants_gpu()
    return inherited and plain


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

    def final(self) -> Final | None:
        """What the end of its run knows (None after a crash, or if the end itself fails:
        its values stand, as :func:`stream` keeps them)."""
        if self.crash is not None:
            return None
        try:
            return self.run.finish()
        except Exception as exc:
            log.exception("evaluator %s failed at the end of its run", self.run.evaluator.type)
            self.crash = exc
            return None

    def finish(self) -> None:
        final = self.final()
        if final is not None and self.step is not None:
            self.step.finish(final)


class Riders(Protocol):
    """Who scores the riders' chunks: this process (:class:`Inline`), or a side process."""

    remote: bool  # whether the riders are scored in another process

    def take(self, chunk: Sequence[Sample]) -> None: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...


class Inline:
    """The riders scored in this process, one after another."""

    remote = False

    def __init__(self, riders: Sequence[Rider]) -> None:
        self.riders = riders

    def take(self, chunk: Sequence[Sample]) -> None:
        for rider in self.riders:
            rider.take(chunk)

    def finish(self) -> None:
        for rider in self.riders:
            rider.finish()

    def close(self) -> None:
        pass


@contextlib.contextmanager
def _outside_the_loop() -> Iterator[None]:
    """The riders' scoring, called from inside the driver's event loop (a judge pulls its
    chunks in a coroutine), as if no loop ran in this thread: a rider may run one of its own
    (``asyncio.run``). The driver's loop is suspended meanwhile, as in any synchronous call."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(loop)


class _Shared:
    """The chunks of one pass, each handed to the riders as it is read, then to the pass's
    driver (if any); the time this process spent on the riders is counted."""

    def __init__(
        self, chunks: Iterable[list[Sample]], riders: Riders, clock: Callable[[], float]
    ) -> None:
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
        with _outside_the_loop():
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
    opens the process that scores the riders, else they are scored here, each chunk before
    the driver takes it. Each step is shown with its own time (the driver's: the pass's
    until it ended, less what this process spent on the riders, the reading counted in it),
    then the pass's wall time."""
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
            driver_seconds = display.now() - started - shared.seconds
        else:
            for _ in shared:  # the riders score each chunk as it is read
                pass
        if not shared.seen:  # no samples at all: every evaluator still signs its (empty) columns
            scorer.take([])
        scorer.finish()
    finally:
        scorer.close()
    trimmed_heap()
    for rider, s in zip(riders, shown, strict=True):
        display.end(s, rider.seconds)
    wall = display.now() - started
    if driver is not None:
        display.end(driven, driver_seconds)
    # "evaluators 0, 1, 3, 2 shared one pass over the samples (0, 1, 3 in a second process)"
    number = [r.label.split("]")[0].removeprefix("evaluators[") for r in riders]
    numbers = [*number, *([driver[0].split("]")[0].removeprefix("evaluators[")] if driver else [])]
    where = f" ({', '.join(number)} in a second process)" if scorer.remote else ""
    display.note(f"evaluators {', '.join(numbers)} shared one pass over the samples{where}", wall)
