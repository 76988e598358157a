"""What a run keeps while its evaluators stream over the samples: per step (the target, each
evaluator) the score columns as arrays, corpus statistics as rows, usage, and per sample the
failures and judgments in a spool file on disk; at the end, one pass joins them with the samples
into each sample's result (a list, or ``samples.jsonl`` past ``inline_samples``).

Past 8,192 samples the columns (8 bytes per sample and metric, plus a presence byte), and the
corpus rows from the first, are kept in unnamed temporary files in the run's folder
(``data.column``): memory is then one chunk of samples, whatever the number of samples.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.column import Column, Rows
from rag_judge.data.rows import RowWriter
from rag_judge.data.sample import Sample
from rag_judge.data.stream import SampleSource
from rag_judge.evaluators.result import CorpusStatistic, EvaluatorResult, Final
from rag_judge.report.judgments import read_judgments
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Judgment,
    MetricInfo,
    SampleFile,
    SampleIndex,
    SampleResult,
    Signature,
    Usage,
)

__all__ = [
    "Collected",
    "Joined",
    "Step",
    "detail_line",
    "merged",
    "priced_steps",
    "read_detail",
]


@dataclass
class Step:
    """One step's output over every sample so far."""

    info: dict[str, MetricInfo]
    spool: RowWriter
    columns: dict[str, Column] = field(default_factory=dict)  # in the order results list them
    signatures: dict[str, Signature] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    unscored: dict[str, int] = field(default_factory=dict)
    not_applicable: dict[str, int] = field(default_factory=dict)
    # the positions of the samples a metric lacks an input for (few: a sparse set), which the
    # conditioned step reads to tell a missing answer from a failed grounding call
    missing: dict[str, set[int]] = field(default_factory=dict)
    n: int = 0
    name: str = ""  # ``target`` or ``evaluators[i] (type)``: what its usage is reported under
    # Handed each chunk's result with its spool lines as they are added: the side process of a
    # ``processes: 2`` run writes samples.jsonl from them (``pipeline.side_join``).
    tap: Callable[[EvaluatorResult, list[bytes]], None] | None = None
    # Where the columns and corpus rows go past a few thousand samples (unnamed temporary
    # files): a run's memory then stays flat however many samples pass. None: in memory.
    spill: Path | None = None
    _corpus: dict[str, CorpusStatistic] = field(default_factory=dict)
    _rows: dict[str, Rows] = field(default_factory=dict)

    def add(self, result: EvaluatorResult) -> None:
        """One chunk's result."""
        size = len(result.errors)
        for metric, values in result.scores.items():
            if metric not in self.columns:
                self.columns[metric] = Column(self.n, self.spill)
            self.columns[metric].extend(values)
        for metric, stat in result.corpus.items():
            self._corpus.setdefault(metric, stat)
            if metric not in self._rows:
                self._rows[metric] = Rows(self.spill)
            self._rows[metric].append(stat.rows)
        self.signatures.update(result.signatures)
        self.usage += result.usage
        judged = result.judgments or [{}] * size
        lines = []
        for at, (errors, judgments) in enumerate(zip(result.errors, judged, strict=True)):
            for metric, failure in errors.items():
                if failure.kind is FailureKind.UNSCORED:
                    self.unscored[metric] = self.unscored.get(metric, 0) + 1
                elif failure.kind is FailureKind.NOT_APPLICABLE:
                    self.not_applicable[metric] = self.not_applicable.get(metric, 0) + 1
                elif failure.kind is FailureKind.MISSING_INPUT:
                    self.missing.setdefault(metric, set()).add(self.n + at)
            line = detail_line(errors, judgments)
            self.spool.write(line)
            if self.tap is not None:
                lines.append(line)
        self.n += size
        if self.tap is not None:
            self.tap(result, lines)

    def finish(self, final: Final) -> None:
        """What the evaluator knew only at the end of its run: signatures that replace the
        chunks', usage not counted with a chunk."""
        self.signatures.update(final.signatures)
        self.usage += final.usage

    @property
    def metrics(self) -> list[str]:
        return list(self.columns)

    def has_corpus(self, metric: str) -> bool:
        """Whether ``metric``'s aggregate is a corpus statistic (else it is the mean)."""
        return metric in self._corpus

    def corpus(self, metric: str) -> CorpusStatistic | None:
        stat = self._corpus.get(metric)
        return None if stat is None else replace(stat, rows=self._rows[metric].array())


@dataclass(frozen=True)
class Joined:
    """samples.jsonl as the side process wrote it: where each line starts (and the end), and
    the index without the score columns (the run attaches its own)."""

    path: Path
    offsets: NDArray[np.int64]
    index: SampleIndex


def priced_steps(steps: list[Step]) -> dict[str, Usage]:
    """Each named step's usage, for the steps whose cost is known (a step without model calls,
    or with an unpriced client, has none); the report's cost per evaluator."""
    return {s.name: s.usage for s in steps if s.name and s.usage.cost is not None}


def detail_line(errors: dict[str, Failure], judgments: dict[str, Judgment]) -> bytes:
    """A sample's failures and judgments as a spool line (empty: it has neither)."""
    if not errors and not judgments:
        return b""
    data = {
        "errors": {m: f.model_dump(mode="json") for m, f in errors.items()},
        "judgments": {m: j.model_dump(mode="json") for m, j in judgments.items()},
    }
    return json.dumps(data, ensure_ascii=False).encode()


def merged(
    sid: str,
    parts: Iterable[tuple[Iterable[tuple[str, float | None]], bytes]],
    sample: Sample | None = None,
) -> SampleResult:
    """A sample's result from each step's values and spool line, in step order: the scores
    step by step, then the failures and judgments, a later step's entry for a key replacing
    an earlier's (the run's join, and the side process's: ``side_join``)."""
    scores: dict[str, float | None] = {}
    errors: dict[str, Failure] = {}
    judgments: dict[str, Judgment] = {}
    for values, line in parts:
        scores.update(values)
        failed, judged = read_detail(line)
        errors.update(failed)
        judgments.update(judged)
    return SampleResult(id=sid, scores=scores, errors=errors, judgments=judgments, sample=sample)


def read_detail(line: bytes) -> tuple[dict[str, Failure], dict[str, Judgment]]:
    """A spool line as :func:`detail_line` wrote it (an empty line: nothing)."""
    if line in (b"\n", b""):
        return {}, {}
    detail = json.loads(line)
    errors = {m: Failure.model_validate(f) for m, f in detail["errors"].items()}
    return errors, read_judgments(detail["judgments"])


@dataclass
class Collected:
    """Every step of a run, and the join that makes each sample's result."""

    folder: Path
    steps: list[Step] = field(default_factory=list)

    def step(self, info: dict[str, MetricInfo], name: str = "") -> Step:
        spool = RowWriter(self.folder / f"step{len(self.steps)}.jsonl", offsets=False)
        s = Step(info, spool, name=name, spill=self.folder)
        self.steps.append(s)
        return s

    def results(self, source: SampleSource, chunk: int) -> Iterator[SampleResult]:
        """Each sample's result, in order, as the report holds it: scores by step and metric,
        then failures and judgments (a later step's entry for a key replacing an earlier)."""
        spools = []
        for s in self.steps:
            s.spool.close()
            spools.append(s.spool.path.open("rb"))
        try:
            start = 0
            for samples in source.chunks(chunk):
                stop = start + len(samples)
                # each column's values for the chunk, read from its files as the chunk passes
                windows = [
                    [(m, c.window(start, stop)) for m, c in s.columns.items()] for s in self.steps
                ]
                for k, sample in enumerate(samples):
                    parts = (
                        (((m, values[k]) for m, values in w), fh.readline())
                        for w, fh in zip(windows, spools, strict=True)
                    )
                    yield merged(sample.id, parts, sample)
                start = stop
        finally:
            for fh in spools:
                fh.close()

    def to_file(self, results: Iterator[SampleResult], path: Path) -> SampleFile:
        """The results written one per line to ``path``, indexed as they go."""
        index = SampleIndex(spill=self.folder)
        writer = RowWriter(path, spill=self.folder)
        for r in results:
            index.add(r, scores=False)  # the columns are the steps' own, attached below
            writer.write(r.model_dump_json().encode())
        return self._file(path, writer.close(), index)

    def joined(self, written: Joined) -> SampleFile:
        """The file written during the pass (``side_join``), with the steps' columns."""
        return self._file(written.path, written.offsets, written.index)

    def _file(self, path: Path, offsets: NDArray[np.int64], index: SampleIndex) -> SampleFile:
        for s in self.steps:
            for metric, column in s.columns.items():
                index.attach(metric, column)
        return SampleFile(path, offsets, index=index, owned=True)
