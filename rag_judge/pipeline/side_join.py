"""samples.jsonl written by the side process of a ``processes: 2`` run during the pass, so the
run's end need not read and parse the dataset again to join it with the scores.

The side process parses every sample for its riders anyway. It keeps each sample's JSON and
what the index needs of it (:class:`~rag_judge.report.samples.About`) until the driver's (the
judge's) result for that sample arrives from the run, then writes the sample's line: the same
bytes the run's own join (:meth:`~rag_judge.pipeline.collect.Collected.results`) writes. It
applies only when every step of the run is in the pass (no target, no per-unit evaluator, no
step added after it). Anything it cannot reproduce exactly (a metric that first appears after
the first chunk) abandons it, and the run joins as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_judge.data.column import FileArray
from rag_judge.data.rows import RowWriter
from rag_judge.data.sample import Sample
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.pipeline.collect import Joined, Step, detail_line, merged
from rag_judge.report.model import SampleIndex
from rag_judge.report.samples import About

__all__ = ["Abandoned", "Join", "Part", "SideJoin", "index_file"]

_TAIL = b',"sample":null}'


def index_file(path: Path) -> Path:
    """Where the side process leaves the index of the samples file ``path`` for the run."""
    return path.with_name(path.name + ".index")


class Abandoned(Exception):
    """The side process cannot write the file exactly as the run would: the run joins."""


@dataclass
class Join:
    """The run's side of the join: where samples.jsonl goes, which step comes from where (a
    rider's position in the side process, or None: the driver), the driver's step, and the
    file once the side process has written all of it."""

    path: Path
    slots: list[int | None]
    driver: Step
    done: Joined | None = None


@dataclass
class Part:
    """The driver's values and spool lines for some samples, in order, as the run sends them."""

    values: dict[str, list[float | None]]
    lines: list[bytes]
    at: int = 0

    @classmethod
    def of(cls, result: EvaluatorResult, lines: list[bytes]) -> Part:
        return cls({m: list(v) for m, v in result.scores.items()}, lines)

    def __len__(self) -> int:
        return len(self.lines)


@dataclass
class _Chunk:
    ids: list[str]
    samples: list[bytes]
    about: list[About]
    results: list[EvaluatorResult]
    at: int = 0

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class SideJoin:
    """Writes ``path`` as the samples pass: :meth:`chunk` as the riders score them, :meth:`part`
    as the driver's results come; :meth:`close` gives the offsets and the index."""

    path: Path
    slots: Sequence[int | None]
    index: SampleIndex = field(init=False)
    _names: dict[int | None, list[str]] = field(default_factory=dict)
    _chunks: deque[_Chunk] = field(default_factory=deque)
    _parts: deque[Part] = field(default_factory=deque)
    _writer: RowWriter | None = None

    def __post_init__(self) -> None:
        # the index and offsets in files beside samples.jsonl past a few thousand samples
        self.index = SampleIndex(spill=self.path.parent)
        self._writer = RowWriter(self.path, spill=self.path.parent)

    @property
    def waiting(self) -> int:
        """Samples read whose line is not written yet (their driver's result is due)."""
        return sum(len(c) - c.at for c in self._chunks)

    def chunk(self, samples: Sequence[Sample], results: Sequence[EvaluatorResult]) -> None:
        for slot, result in enumerate(results):
            self._check(slot, list(result.scores))
        dumped = [s.model_dump_json().encode() for s in samples]
        about = [About.of(s) for s in samples]
        self._chunks.append(_Chunk([s.id for s in samples], dumped, about, list(results)))
        self._write()

    def part(self, part: Part) -> None:
        self._check(None, list(part.values))
        self._parts.append(part)
        self._write()

    def close(self) -> tuple[FileArray, SampleIndex]:
        """The file's line offsets as kept (pickled, they spill again in the run's process)
        and its index."""
        if self.waiting or any(len(p) - p.at for p in self._parts):
            raise Abandoned("the driver's results and the samples read do not match")
        if self._writer is None or self._writer.offsets is None:  # pragma: no cover - once
            raise Abandoned("closed")
        self._writer.close()
        return self._writer.offsets, self.index

    def abandon(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._chunks.clear()
        self._parts.clear()

    def _check(self, slot: int | None, names: list[str]) -> None:
        known = self._names.setdefault(slot, names)
        if known is not names and sorted(known) != sorted(names):
            # The run's column would start mid-file: earlier lines would lack the metric.
            raise Abandoned(f"the metrics changed between chunks: {known} then {names}")

    def _write(self) -> None:
        while self._chunks and self._parts:
            chunk, part = self._chunks[0], self._parts[0]
            for _ in range(min(len(chunk) - chunk.at, len(part) - part.at)):
                self._line(chunk, part)
                chunk.at += 1
                part.at += 1
            if chunk.at == len(chunk):
                self._chunks.popleft()
            if part.at == len(part):
                self._parts.popleft()

    def _line(self, chunk: _Chunk, part: Part) -> None:
        """One sample's line, as the run's join makes it (``collect.merged``), each rider's
        failures and judgments through the spool's JSON as the run reads them back."""
        i, j = chunk.at, part.at

        def step(slot: int | None) -> tuple[Iterable[tuple[str, float | None]], bytes]:
            if slot is None:
                values = part.values
                return ((m, _stored(values[m][j])) for m in self._names[None]), part.lines[j]
            result = chunk.results[slot]
            judged = result.judgments[i] if result.judgments else {}
            line = detail_line(result.errors[i], judged)
            return ((m, _stored(result.scores[m][i])) for m in self._names[slot]), line

        r = merged(chunk.ids[i], (step(slot) for slot in self.slots))
        head = r.model_dump_json().encode()
        if not head.endswith(_TAIL) or self._writer is None:
            raise Abandoned("a result's JSON does not end with its sample")
        self._writer.write(head[: -len(b"null}")] + chunk.samples[i] + b"}")
        self.index.add(r, scores=False, about=chunk.about[i])


def _stored(value: float | None) -> float | None:
    """A value as the run's score column gives it back: a float (an int or a numpy scalar
    is stored as a double)."""
    return None if value is None else float(value)
