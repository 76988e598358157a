"""Which evaluators share one pass over the samples (:func:`share_pass`), and the second
process that scores its riders with ``processes: 2`` (:class:`SideProcess`): it reads the JSON
Lines dataset itself, in the run's chunks, and sends each chunk's results back, so their
scoring runs on another core beside the driver (a judge). The worker is a fresh interpreter
(``python -m rag_judge.pipeline._side_worker FD``), not multiprocessing: its spawn re-runs the
caller's main script, and a fork copies a process that has threads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import socket
import subprocess
import sys
from collections.abc import Callable, Collection, Sequence
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

from rag_judge.data import column
from rag_judge.data.column import FileArray
from rag_judge.data.sample import Sample
from rag_judge.data.stream import JsonlSource, SampleSource
from rag_judge.evaluators.base import EvaluatorRun
from rag_judge.evaluators.result import EvaluatorResult, Final
from rag_judge.pipeline.collect import Joined, Step
from rag_judge.pipeline.running import crashed
from rag_judge.pipeline.side_join import Join, Part
from rag_judge.pipeline.together import Inline, Rider, Riders, rides, stream_together
from rag_judge.report.model import SampleIndex

__all__ = ["SideProcess", "cannot_send", "share_pass"]

log = logging.getLogger("rag_judge")

# The driver's work on each chunk done in the side process, and where the run takes it.
Aside = tuple[Callable[[Sequence[Sample]], Any], Callable[[Sequence[Sample], Any], None]]


def share_pass(
    processes: int,
    size: int,
    runs: Sequence[EvaluatorRun],
    made: Sequence[Step | None],
    pending: Collection[int],
    order: Sequence[int],
    source: SampleSource,
    samples: Path | None = None,
) -> tuple[set[int], Joined | None]:
    """Run in one pass over the samples (``size`` at a time) the evaluators that can share
    it: those that score a chunk at a time (``rides``), driven by the first that runs its own
    chunks (a judge), with ``processes`` 2 the riders in a side process; returns their
    indices (none when sharing would not save a pass). ``made[i]`` is evaluator ``i``'s step
    (None: per unit), ``pending`` the evaluators Ray runs.

    ``samples``: where the run's samples.jsonl goes, when no step will be added after the
    pass. If every step is in the pass and a side process runs, it writes the file as the
    samples pass (``side_join``), and it is returned (its index without the score columns);
    else None, and the run joins."""
    if _loop_running():  # a judge would run on a helper thread (run_sync): riders stay apart
        return set(), None
    free = [i for i in order if made[i] is not None and i not in pending]
    riding = [i for i in free if rides(runs[i])]
    drivers = [
        i for i in free
        if i not in riding and not runs[i].evaluator.reads() and runs[i].evaluator.shardable
    ]  # fmt: skip
    driver = drivers[0] if drivers else None
    if len(riding) + (driver is not None) < 2:
        return set(), None

    def label(i: int) -> str:
        return f"evaluators[{i}] ({runs[i].evaluator.type})"

    riders = [Rider(label(i), runs[i], step) for i in riding if (step := made[i]) is not None]
    driven = None
    if driver is not None and (step := made[driver]) is not None:
        driven = (label(driver), runs[driver], step)
    side: Callable[[Sequence[Rider]], Riders] | None = None
    join = None
    # A second process pays off beside a driver, over a file it can read itself.
    if processes == 2 and driven and isinstance(source, JsonlSource) and riders:
        if (kept := cannot_send(riders)) is None:
            steps = sorted([*riding, driver if driver is not None else -1])  # the run's order
            if samples is not None and steps == list(range(len(runs))):
                slots = [None if i == driver else riding.index(i) for i in steps]
                join = Join(samples, slots, driven[2])
            side = partial(_open_side, source.path, size, join=join, aside=_aside(driven[1]))
        else:
            log.warning("processes: 2: %s cannot be sent to a second process: run here", kept)
    stream_together(riders, driven, source.chunks(size), side)
    return {*riding, *([driver] if driver is not None else [])}, join.done if join else None


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def cannot_send(riders: Sequence[Rider]) -> str | None:
    """The first rider whose evaluator a fresh interpreter cannot rebuild (it does not pickle,
    or its class is defined in a script run as ``__main__`` or a notebook), or None."""
    for rider in riders:
        evaluator = rider.run.evaluator
        if type(evaluator).__module__ == "__main__":
            return rider.label
        try:
            pickle.dumps(evaluator)
        except Exception:
            return rider.label
    return None


def _aside(run: EvaluatorRun) -> Aside | None:
    """The driver's work the side process can do on each chunk, when it pickles."""
    work = run.aside()
    try:
        pickle.dumps(work)
    except Exception:
        log.debug("the driver's work on each chunk does not pickle: done here", exc_info=True)
        return None
    return None if work is None else (work, run.take_aside)


def _open_side(
    path: Path, size: int, riders: Sequence[Rider], join: Join | None, aside: Aside | None
) -> Riders:
    try:
        return SideProcess(path, size, riders, join, aside)
    except (OSError, pickle.PicklingError) as exc:
        log.warning("processes: 2: no second process (%s): the evaluators run here", exc)
        return Inline(riders)


class SideProcess:
    """The riders' scoring in a worker process over the dataset at ``path``. A worker that
    does not start (its evaluators cannot be rebuilt there) leaves them to this process; one
    that dies or fails later fails its riders' values from that chunk on, as a crash does."""

    remote = True

    def __init__(
        self,
        path: Path,
        size: int,
        riders: Sequence[Rider],
        join: Join | None = None,
        aside: Aside | None = None,
    ) -> None:
        self.riders = riders
        self._tapped: Step | None = None  # the driver's step, once it sends to the join
        self._take_aside = aside[1] if aside is not None else None
        self.lost: Exception | None = None
        self._ready = False
        self._join = join
        level = logging.getLogger("rag_judge").getEffectiveLevel()
        labels = [r.label for r in riders]
        evaluators = [r.run.evaluator for r in riders]
        joined = (str(join.path), join.slots) if join is not None else None
        work = aside[0] if aside is not None else None
        message = (str(path), size, labels, evaluators, level, joined, work)
        sent = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)  # before any process starts
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "rag_judge.pipeline._side_worker", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()  # the child's copy only: its death then reads as end of file here
        self._conn = Connection(ours.detach())
        try:
            self._conn.send_bytes(sent)
        except OSError:
            self.close()
            raise
        self._tapped = join.driver if join is not None else None
        if self._tapped is not None:
            self._tapped.tap = self._part

    def _part(self, result: EvaluatorResult, lines: list[bytes]) -> None:
        """The driver's result for the samples next in line, to the side process's join."""
        if self._join is None or self.lost is not None or not self.remote:
            return
        try:
            self._conn.send_bytes(pickle.dumps(Part.of(result, lines), pickle.HIGHEST_PROTOCOL))
        except Exception as exc:  # gone (the next chunk's results say so), or a part that
            log.debug("processes: 2: the run joins the samples itself: %s", exc)  # won't pickle
            self._join = None

    def _receive(self, expected: str) -> object:
        return self._message(expected)[1]

    def _message(self, *expected: str) -> tuple[str, object]:
        try:
            kind, body = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            code = self._process.wait()
            raise RuntimeError(f"the side process stopped (exit code {code})") from None
        if kind == "error":
            raise RuntimeError(f"the side process failed: {body}")
        if kind not in expected:
            due = " or ".join(repr(k) for k in expected)
            raise RuntimeError(f"the side process sent {kind!r} where {due} was due")
        return kind, body

    @property
    def here(self) -> bool:
        """Whether the riders are scored in this process (the worker never started)."""
        if not self._ready and self.lost is None:
            try:
                self._receive("ready")
                self._ready = True
            except RuntimeError as exc:
                log.warning("processes: 2: %s: the evaluators run here", exc)
                self.remote = False
                self.close()
        return not self.remote

    def take(self, chunk: Sequence[Sample]) -> None:
        """The riders' results for ``chunk``, the next of the pass (the side read it too)."""
        if self.here:
            Inline(self.riders).take(chunk)
            return
        results: list[tuple[EvaluatorResult, float]] = []
        done = None
        if self.lost is None:
            try:
                results, done = self._receive("chunk")  # type: ignore[misc]
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
        if self._take_aside is not None:  # before the driver takes the chunk
            self._take_aside(chunk, done if self.lost is None else None)

    def finish(self) -> None:
        if self.here:
            Inline(self.riders).finish()
            return
        if self.lost is not None:
            return
        try:
            finals: list[Final | None] = self._receive("end")  # type: ignore[assignment]
        except RuntimeError as exc:  # the values are in: only the final signatures are lost
            log.error("processes: 2: %s", exc)
            finals = [None] * len(self.riders)
        for rider, final in zip(self.riders, finals, strict=True):
            if final is not None and rider.step is not None:
                rider.step.finish(final)
        if self._join is not None:
            self._joined(self._join)

    def _joined(self, join: Join) -> None:
        """The side process's samples.jsonl, when it wrote all of it."""
        try:
            kind, body = self._message("joined", "unjoined")
        except RuntimeError as exc:
            log.debug("processes: 2: no samples file from the side process: %s", exc)
            return
        if kind == "unjoined":
            log.debug("processes: 2: the side process gave samples.jsonl up: %s", body)
            return
        where = Path(cast(str, body))
        try:
            with where.open("rb") as fh:
                offsets, index = cast(tuple[FileArray, SampleIndex], column.load(fh))
        except Exception as exc:  # unreadable: the run joins the samples itself
            log.debug("processes: 2: no index of samples.jsonl: %s", exc)
            return
        finally:
            where.unlink(missing_ok=True)
        join.done = Joined(join.path, offsets.numpy(), index)

    def close(self) -> None:
        """Stop the worker (at once, if the run stopped early)."""
        if self._tapped is not None:
            self._tapped.tap = None
        with contextlib.suppress(OSError):
            self._conn.close()
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
