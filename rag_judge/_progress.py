"""Where a run stands: steps (the target, each evaluator) and the counted tasks inside them
(judge calls, texts encoded, target calls), shown on stderr and asked for after a Ctrl-C.

One ``Display`` is active per process (``showing`` swaps it in); code that counts work calls
``task(label, total, unit)`` and ``update``s the task it gets, whatever the display shows.
Counting is cheap and always on, so ``status()`` can say where an interrupted run stood even
when nothing was shown. Modes:

- ``bar``: a live line rewritten in place (a terminal), then one line per finished step;
- ``lines``: one line per finished step (a log, CI, a pipe);
- ``off``: nothing (``--quiet``, and the Python API unless asked).
"""

from __future__ import annotations

import enum
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Display", "Mode", "Task", "auto_mode", "current", "showing", "step", "task"]

REFRESH_S = 0.1  # the live line is redrawn at most this often
CLEAR = "\r\x1b[K"  # back to the line's start, erase it


class Mode(str, enum.Enum):
    OFF = "off"
    BAR = "bar"
    LINES = "lines"


def auto_mode(stream: TextIO, *, quiet: bool = False) -> Mode:
    """``off`` when quiet; ``bar`` on an interactive terminal outside CI; else ``lines``."""
    if quiet:
        return Mode.OFF
    interactive = hasattr(stream, "isatty") and stream.isatty()
    return Mode.BAR if interactive and not os.environ.get("CI") else Mode.LINES


@dataclass
class Task:
    """One counted piece of work: ``done`` of ``total`` units, some of them served from a
    cache, retried or failed."""

    label: str
    total: int
    unit: str
    display: Display | None = field(default=None, repr=False, compare=False)
    done: int = 0
    cached: int = 0
    retried: int = 0
    failed: int = 0
    closed: bool = False

    def update(self, *, done: int = 0, cached: int = 0, retried: int = 0, failed: int = 0) -> None:
        self.done += done
        self.cached += cached
        self.retried += retried
        self.failed += failed
        if self.display is not None:
            self.display.changed(self)

    def close(self) -> None:
        self.closed = True
        if self.display is not None:
            self.display.closed(self)

    def describe(self) -> str:
        """``faithfulness: 412/600 calls (30 cached, 2 retried, 1 failed)``."""
        counts = [f"{n} {name}" for name, n in self.counts().items() if n]
        extra = f" ({', '.join(counts)})" if counts else ""
        return f"{self.label}: {self.done}/{self.total} {self.unit}{extra}"

    def counts(self) -> dict[str, int]:
        return {"cached": self.cached, "retried": self.retried, "failed": self.failed}


@dataclass
class Step:
    name: str
    started: float
    tasks: list[Task] = field(default_factory=list)
    seconds: float | None = None  # set when the step ends

    def describe(self) -> str:
        """``evaluators[4] (judge): 600/600 calls (30 cached, 1 failed) in 41.2 s``: the
        step's tasks summed by unit."""
        totals: dict[str, list[int]] = {}
        for t in self.tasks:
            row = totals.setdefault(t.unit, [0, 0, 0, 0, 0])
            for i, n in enumerate((t.done, t.total, t.cached, t.retried, t.failed)):
                row[i] += n
        parts = []
        for unit, (done, total, cached, retried, failed) in totals.items():
            counts = {"cached": cached, "retried": retried, "failed": failed}
            extra = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
            parts.append(f"{done}/{total} {unit}" + (f" ({extra})" if extra else ""))
        work = "; ".join(parts) if parts else "done"
        return f"{self.name}: {work}" + (f" in {self.seconds:.1f} s" if self.seconds else "")


class Display:
    """Counts steps and tasks; shows them on ``stream`` as ``mode`` says. Thread-safe: the
    target's worker threads and the judge's event loop may report at once."""

    def __init__(
        self,
        mode: Mode = Mode.OFF,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = Mode(mode)
        self._stream = stream
        self._clock = clock
        self._lock = threading.RLock()
        self._drawn = 0.0
        self._live = False  # a live line is on screen (bar mode)
        self.steps: list[Step] = []
        self.context = ""  # e.g. the experiment's name, said by status()

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def current(self) -> Step | None:
        return self.steps[-1] if self.steps and self.steps[-1].seconds is None else None

    def start_run(self, context: str = "") -> None:
        """Forget the steps of an earlier run; ``context`` names this one in ``status``."""
        with self._lock:
            self.steps.clear()
            self.context = context

    def begin(self, name: str) -> Step:
        with self._lock:
            s = Step(name, self._clock())
            self.steps.append(s)
            self._draw(None, force=True)
            return s

    def now(self) -> float:
        """The display's clock (a test's may stand still)."""
        return self._clock()

    def note(self, line: str, seconds: float = 0.0) -> None:
        """``line`` shown for good, with `` in N s`` when ``seconds``, as a step's line is."""
        with self._lock:
            self._print(line + (f" in {seconds:.1f} s" if seconds else ""))

    def end(self, s: Step, seconds: float | None = None) -> None:
        """``s`` done, shown with ``seconds`` (default: since it began)."""
        with self._lock:
            s.seconds = self._clock() - s.started if seconds is None else seconds
            self._print(s.describe())

    def task(self, label: str, total: int, unit: str) -> Task:
        """A task in the current step (outside any step, e.g. ``JudgeEngine.run`` called on
        its own, the task is shown but not kept)."""
        with self._lock:
            t = Task(label, total, unit, display=self)
            if (s := self.current) is not None:
                s.tasks.append(t)
            self._draw(t, force=True)
            return t

    def changed(self, t: Task) -> None:
        self._draw(t)

    def closed(self, t: Task) -> None:
        with self._lock:
            if self.current is None:  # a task on its own
                self._print(t.describe())
            else:
                self._draw(t, force=True)

    def _draw(self, t: Task | None, force: bool = False) -> None:
        """Redraw the live line (bar mode), at most every REFRESH_S unless ``force``."""
        if self.mode is not Mode.BAR:
            return
        with self._lock:
            now = self._clock()
            if not force and now - self._drawn < REFRESH_S:
                return
            self._drawn = now
            s = self.current
            if s is not None:
                running = [x for x in s.tasks if not x.closed]
                what = running[-1].describe() if running else "..."
                line = f"{s.name} {what} {now - s.started:.0f} s"
            elif t is not None and not t.closed:
                line = t.describe()
            else:
                return
            self._write(CLEAR + line)
            self._live = True

    def _print(self, line: str) -> None:
        """``line`` for good, in place of the live line (unless the display is off)."""
        if self.mode is not Mode.OFF:
            self.clear_line()
            self._write(line + "\n")

    def _write(self, text: str) -> None:
        if text:
            self.stream.write(text)
            self.stream.flush()

    def status(self) -> str:
        """Where things stand, for a run that was stopped: the step under way and its
        counts, and the steps that finished."""
        with self._lock:
            done = [s.name for s in self.steps if s.seconds is not None]
            s = self.current
            where = f" ({self.context})" if self.context else ""
            if s is None:
                now = "between steps"
            else:
                tasks = "; ".join(t.describe() for t in s.tasks)
                now = f"during {s.name}" + (f": {tasks}" if tasks else "")
            finished = f"; finished: {', '.join(done)}" if done else ""
            return f"stopped{where} {now}{finished}"

    def clear_line(self) -> None:
        """Take the live line off the screen (before printing something else)."""
        with self._lock:
            if self._live:
                self._write(CLEAR)
                self._live = False


_active = Display()


def current() -> Display:
    return _active


@contextmanager
def showing(display: Display) -> Iterator[Display]:
    """Make ``display`` the active one for the duration."""
    global _active
    previous, _active = _active, display
    try:
        yield display
    finally:
        display.clear_line()
        _active = previous


@contextmanager
def step(name: str) -> Iterator[Step]:
    """A step of the active display, ended (and shown) when the block exits normally."""
    display = _active
    s = display.begin(name)
    yield s
    display.end(s)


def task(label: str, total: int, unit: str = "calls") -> Task:
    """A counted task in the active display's current step."""
    return _active.task(label, total, unit)


@contextmanager
def no_library_bars() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights") off for the block, then as they
    were: the display above says what is loading."""
    try:
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:  # nothing to silence
        yield
        return
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
