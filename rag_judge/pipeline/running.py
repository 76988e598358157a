"""Running one evaluator: over the samples a chunk at a time, or over a list at once (a Ray
shard); either way a crash fails only its own metrics, on the samples it did not finish."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from rag_judge import _progress as progress_
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, EvaluatorRun
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.pipeline.collect import Step
from rag_judge.report.model import Failure, Signature

__all__ = ["Rider", "check_aligned", "rides", "run_whole", "stream", "stream_together"]

log = logging.getLogger("rag_judge")


class _Feed:
    """The chunks an evaluator takes, counted; a chunk that could not be read (a bad dataset
    line) is kept apart from the evaluator's own errors, so it stops the run."""

    def __init__(self, chunks: Iterable[list[Sample]]) -> None:
        self._chunks = iter(chunks)
        self.taken = 0
        self.sizes: deque[int] = deque()  # chunks handed out whose result has not come back
        self.error: Exception | None = None
        self._started = False

    def __iter__(self) -> Iterator[list[Sample]]:
        return self

    def __next__(self) -> list[Sample]:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            if self._started:
                raise
            chunk = []  # no samples at all: the evaluator still signs its (empty) columns
        except Exception as exc:
            self.error = exc
            raise
        self._started = True
        self.taken += len(chunk)
        self.sizes.append(len(chunk))
        return chunk

    def rest(self) -> int:
        """Read the chunks not taken; how many samples they held."""
        return sum(len(chunk) for chunk in self)


def stream(run: EvaluatorRun, chunks: Iterable[list[Sample]], step: Step) -> None:
    """A prepared evaluator's ``run`` over ``chunks`` (all of them as one when its scores
    depend on the whole batch), each result checked against its chunk and added to ``step``
    as it comes."""
    evaluator = run.evaluator
    names = run.metric_names()
    feed = _Feed(chunks)
    source: Iterable[list[Sample]] = feed
    if not evaluator.shardable:
        source = [[s for chunk in feed for s in chunk]]
    sizes = feed.sizes if evaluator.shardable else deque([feed.taken])

    def add(result: EvaluatorResult) -> None:
        if not sizes:
            raise ValueError("evaluator returned a result for a chunk it was not given")
        check_aligned(result, sizes.popleft(), names)
        step.add(result)

    try:
        final = run.evaluate_chunks(source, add)
        if sizes or step.n != feed.taken:
            raise ValueError(f"evaluator returned results for {step.n} of {feed.taken} samples")
        step.finish(final)
    except Exception as exc:  # one broken evaluator must not lose the others' results
        if feed.error is not None:
            raise feed.error from None
        log.exception("evaluator %s failed", evaluator.type)
        total = feed.taken + feed.rest()
        step.add(crashed(evaluator, total - step.n, exc, names))


def rides(run: EvaluatorRun) -> bool:
    """Whether ``run`` can score each chunk as another evaluator's pass reads it: it scores a
    chunk at a time through the base class, with no state across chunks it keeps itself."""
    ev = run.evaluator
    inherited = type(run).evaluate_chunks is EvaluatorRun.evaluate_chunks
    return inherited and ev.shardable and ev.per == "conversation" and not ev.reads()


@dataclass
class Rider:
    """An evaluator scored a chunk at a time in another's pass over the samples; a crash
    fails its metrics on that chunk and every later one, as :func:`stream` does."""

    label: str
    run: EvaluatorRun
    step: Step
    seconds: float = 0.0  # its own scoring, the reading of the samples not counted
    crash: Exception | None = None
    names: list[str] = field(default_factory=list)
    clock: Callable[[], float] = time.perf_counter

    def __post_init__(self) -> None:
        self.names = self.run.metric_names()

    def take(self, chunk: list[Sample]) -> None:
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
        self.step.add(result)
        self.seconds += self.clock() - start


class _Shared:
    """The chunks of one pass, each handed to the riders as it is read, then to the pass's
    driver (if any)."""

    def __init__(self, chunks: Iterable[list[Sample]], riders: Sequence[Rider]) -> None:
        self._chunks = iter(chunks)
        self._riders = riders
        self.seen = False

    def __iter__(self) -> Iterator[list[Sample]]:
        return self

    def __next__(self) -> list[Sample]:
        chunk = next(self._chunks)
        self.seen = True
        for rider in self._riders:
            rider.take(chunk)
        return chunk


def stream_together(
    riders: Sequence[Rider],
    driver: tuple[str, EvaluatorRun, Step] | None,
    chunks: Iterable[list[Sample]],
) -> None:
    """One pass over the samples for several evaluators: the ``driver`` (one that runs its
    own chunks, a judge) takes them through :func:`stream`, and each chunk it takes is
    scored by every rider first. The samples are read and parsed once instead of once per
    evaluator. Each step is shown with its own time; the reading counts in the driver's."""
    display = progress_.current()
    shown = [(r.label, display.begin(r.label)) for r in riders]
    for rider in riders:
        rider.clock = display.now
    started = display.now()
    shared = _Shared(chunks, riders)
    if driver is not None:
        label, run, step = driver
        driven = display.begin(label)
        stream(run, shared, step)
    else:
        for _ in shared:  # the riders score each chunk as it is read
            pass
    if not shared.seen:  # no samples at all: every evaluator still signs its (empty) columns
        for rider in riders:
            rider.take([])
    for rider in riders:
        if rider.crash is None:
            rider.step.finish(rider.run.finish())
    for rider, (_, s) in zip(riders, shown, strict=True):
        display.end(s, rider.seconds)
    if driver is not None:
        display.end(driven, display.now() - started - sum(r.seconds for r in riders))


def run_whole(evaluator: Evaluator, samples: Sequence[Sample]) -> EvaluatorResult:
    """``evaluator`` over ``samples`` at once (prepared first: a Ray worker's copy loads here)."""
    try:
        run = evaluator.prepare()
        result = run.evaluate_all(samples)
        check_aligned(result, len(samples), run.metric_names())
        return result
    except Exception as exc:
        log.exception("evaluator %s failed", evaluator.type)
        return crashed(evaluator, len(samples), exc)


def crashed(
    evaluator: Evaluator, n: int, exc: Exception, names: Sequence[str] | None = None
) -> EvaluatorResult:
    """``n`` samples failed on every metric of ``evaluator`` (``names``, default its
    ``metric_names()``), with the crash as the reason."""
    names = evaluator.metric_names() if names is None else names
    result = EvaluatorResult.empty(n, {m: Signature(name=m) for m in names})
    message = f"{evaluator.type} evaluator failed: {type(exc).__name__}: {exc}"
    for i in range(n):
        result.fail(i, Failure(message=message))
    return result


def check_aligned(out: EvaluatorResult, n: int, metrics: Sequence[str]) -> None:
    """An evaluator returns one entry per sample in every column of every metric it names,
    each signed; a short column would silently drop scores."""
    absent = [m for m in metrics if m not in out.scores]
    if absent:
        raise ValueError(f"no values for the metrics {', '.join(absent)}")
    lengths = {m: len(v) for m, v in out.scores.items()}
    lengths["errors"] = len(out.errors)
    if out.judgments:
        lengths["judgments"] = len(out.judgments)
    bad = {k: v for k, v in lengths.items() if v != n}
    if bad:
        raise ValueError(f"evaluator result is not aligned with the {n} samples: {bad}")
    unsigned = set(out.scores) - set(out.signatures)
    if unsigned:
        raise ValueError(f"metrics without a signature: {', '.join(sorted(unsigned))}")
