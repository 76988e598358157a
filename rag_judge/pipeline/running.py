"""Running one evaluator: over the samples a chunk at a time, or over a list at once (a Ray
shard); either way a crash fails only its own metrics, on the samples it did not finish."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator, Sequence

from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, EvaluatorRun
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.pipeline.collect import Step
from rag_judge.report.model import Failure, Signature

__all__ = ["check_aligned", "crashed", "run_whole", "stream"]

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
