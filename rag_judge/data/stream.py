"""Samples a chunk at a time: what a run reads its dataset through (once for the evaluators
that share a pass, once more for each that cannot), so a million samples are never all in
memory.

- :class:`InMemory`: samples the caller already holds (``Pipeline.run(samples)``, CSV and
  Parquet files, which their readers load whole);
- :class:`JsonlSource`: a JSON Lines dataset, parsed as it is read; the first pass checks what
  loading it whole checks (errors name ``file:line``; ids unique; not empty);
- :class:`SampleRows`: samples a run wrote for itself (a target's answers), read back.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from rag_judge.data.jsonl import _to_sample, json_lines, read_lines
from rag_judge.data.otel import is_otlp
from rag_judge.data.readers import _jsonl_layout, load_dataset
from rag_judge.data.rows import RowFile
from rag_judge.data.sample import Sample
from rag_judge.errors import DataError

__all__ = ["InMemory", "JsonlSource", "SampleRows", "SampleSource", "SeenIds", "open_source"]


class SampleSource(abc.ABC):
    """Samples in a fixed order, read in chunks as often as asked."""

    @abc.abstractmethod
    def chunks(self, size: int) -> Iterator[list[Sample]]:
        """The samples, ``size`` at a time (the last chunk may be shorter)."""

    def __iter__(self) -> Iterator[Sample]:
        for chunk in self.chunks(1000):
            yield from chunk


class InMemory(SampleSource):
    def __init__(self, samples: Sequence[Sample]) -> None:
        self.samples = samples

    def chunks(self, size: int) -> Iterator[list[Sample]]:
        for start in range(0, len(self.samples), size):
            yield list(self.samples[start : start + size])


class JsonlSource(SampleSource):
    """A rag-judge JSON Lines dataset. Each line is parsed as the pass reaches it; a bad line
    is a DataError naming ``file:line`` and the field, as when the file is loaded whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._checked = False

    def chunks(self, size: int) -> Iterator[list[Sample]]:
        seen = None if self._checked else SeenIds()
        chunk: list[Sample] = []
        lines: list[int] = []
        for lineno, obj in json_lines(read_lines(self.path)):
            try:
                sample = _to_sample(obj)
            except DataError as exc:
                self._check(seen, chunk, lines)  # a repeated id on an earlier line comes first
                raise DataError(f"{self.path}:{lineno}: {exc}") from None
            chunk.append(sample)
            lines.append(lineno)
            if len(chunk) == size:
                self._check(seen, chunk, lines)
                yield chunk
                chunk, lines = [], []
        if chunk:
            self._check(seen, chunk, lines)
            yield chunk
        elif seen is not None and not seen:
            raise DataError(f"{self.path}: contains no samples")
        self._checked = True

    def checked(self) -> None:
        """Read without checking the ids: another reader of the same file checks them."""
        self._checked = True

    def _check(self, seen: SeenIds | None, chunk: list[Sample], lines: list[int]) -> None:
        """A DataError at the first sample of ``chunk`` whose id an earlier line used."""
        if seen is None:
            return
        for at in seen.add([s.id for s in chunk]):
            first = self._first_line(chunk[at].id, lines[at])
            if first is not None:  # else two ids that share a hash
                message = f"field 'id': sample id {chunk[at].id!r} already used on line {first}"
                raise DataError(f"{self.path}:{lines[at]}: {message}")

    def _first_line(self, sid: str, lineno: int) -> int | None:
        # Only hashes of ids are kept while checking; the first line of a repeated id is
        # found again.
        for first, obj in json_lines(read_lines(self.path)):
            if first >= lineno:
                return None
            if isinstance(obj, dict) and str(obj.get("id")) == sid:
                return first
        return None  # pragma: no cover - the line itself is there


class SeenIds:
    """The ids of a pass so far, kept as 64-bit hashes in sorted runs (8 bytes an id, not a set
    of strings: a million ids in 8 MB). A hash seen before marks a candidate repeat, which the
    caller confirms, since two ids can share a hash."""

    def __init__(self) -> None:
        self._runs: list[NDArray[np.int64]] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, ids: Sequence[str]) -> list[int]:
        """Add ``ids``; the positions among them whose hash an earlier id had, in order."""
        hashes = np.fromiter((hash(i) for i in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(hashes, kind="stable")
        ranked = hashes[order]
        again = np.zeros(len(ids), dtype=np.bool_)
        again[order[1:][ranked[1:] == ranked[:-1]]] = True  # a repeat within ``ids``
        for run in self._runs:
            at = np.minimum(np.searchsorted(run, hashes), len(run) - 1)
            again |= run[at] == hashes
        if len(ids):
            self._runs.append(ranked)
        self._n += len(ids)
        # Runs merged while the newer is as long as the older: log2(n) runs at most.
        while len(self._runs) > 1 and len(self._runs[-2]) <= len(self._runs[-1]):
            # Sorted in place once the two runs are let go: the merge holds one copy of them.
            merged = np.concatenate([self._runs.pop(), self._runs.pop()])
            merged.sort()  # equal hashes are alike: any sort gives the same run
            self._runs.append(merged)
        return [int(i) for i in np.flatnonzero(again)]


class SampleRows(SampleSource):
    """Samples a run wrote one per line (``Sample.model_dump_json``), read back."""

    def __init__(self, rows: RowFile[Sample]) -> None:
        self.rows = rows

    def chunks(self, size: int) -> Iterator[list[Sample]]:
        it = iter(self.rows)
        while chunk := list(itertools.islice(it, size)):
            yield chunk


def parse_sample(line: bytes) -> Sample:
    try:
        return Sample.model_validate_json(line)
    except ValidationError as exc:  # pragma: no cover - the run wrote these rows itself
        raise DataError(f"a sample the run wrote cannot be read back: {exc}") from None


def open_source(
    path: Path, *, format: str | None = None, layout: str | None = None
) -> SampleSource:
    """A JSON Lines dataset in the rag-judge layout streams; any other (OTLP traces too) is
    loaded whole."""
    suffix = path.suffix.lower()
    is_jsonl = format == "jsonl" or (format is None and suffix in (".jsonl", ".ndjson"))
    is_jsonl = is_jsonl and not (format is None and is_otlp(path))  # traces: loaded whole
    if is_jsonl and path.exists() and (layout or _jsonl_layout(path)) == "rag-judge":
        return JsonlSource(path)
    return InMemory(load_dataset(path, format=format, layout=layout).samples)
