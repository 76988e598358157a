"""Every sample's result, in memory or in ``samples.jsonl`` beside report.json, and the index
the report's readers use instead of walking every sample: the ids, each metric's values as an
array, the failures, and each judge rubric's uncertain verdicts.

A run past ``inline_samples`` keeps its samples in a file (:class:`SampleFile`), so a million
samples cost their score columns in memory, not their texts; the index then comes from the run
(built as the file is written) or from one pass over the file when a report is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, overload

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.column import Column, FileArray
from rag_judge.data.rows import RowFile
from rag_judge.data.sample import Sample
from rag_judge.report.result import Degradation, SampleResult
from rag_judge.report.types import Failure

__all__ = ["About", "Column", "Ids", "SampleFile", "SampleIndex", "parse_result"]


class Ids(Sequence[str]):
    """Sample ids in order, packed: their UTF-8 bytes end to end and where each ends (an id's
    length plus 8 bytes, not a string object each: a million ids in ~20 MB, not ~60), in
    memory or, given ``spill`` (a folder), in files (``data.column``)."""

    def __init__(self, ids: Iterable[str] = (), spill: str | Path | None = None) -> None:
        self._data = FileArray("B", spill)
        self._ends = FileArray("q", spill)
        self._end = 0
        for sid in ids:
            self.append(sid)

    def append(self, sid: str) -> None:
        encoded = sid.encode("utf-8", "surrogatepass")  # JSON can carry a lone surrogate
        self._data.extend(encoded)
        self._end += len(encoded)
        self._ends.append(self._end)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("sample index out of range")
        ends = self._ends.read(i - 1, i + 1).tolist()
        start, end = (0, ends[0]) if i == 0 else ends
        return self._data.read(start, end).tobytes().decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        start = 0
        for at in range(0, len(self), _READ):
            ends = self._ends.read(at, at + _READ).tolist()
            data = self._data.read(start, ends[-1]).tobytes()
            offset = start
            for end in ends:
                yield data[start - offset : end - offset].decode("utf-8", "surrogatepass")
                start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Ids | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list is


_READ = 65_536  # ids read from their files at a time


class About(NamedTuple):
    """What the index keeps of a sample itself (not of its scores): its answer's length in
    words (NaN: no answer), the generator its metadata names, and whether it is a
    conversation."""

    answer_words: float
    generator: str | None
    conversation: bool

    @classmethod
    def of(cls, sample: Sample | None) -> About:
        if sample is None:
            return cls(math.nan, None, False)
        answer = sample.answer
        meta: Mapping[str, Any] = sample.metadata
        named = meta.get("generator") or meta.get("model")
        generator = named if isinstance(named, str) and named else None
        words = math.nan if answer is None else float(len(answer.split()))
        return cls(words, generator, sample.is_conversation())


class SampleIndex:
    """Per sample, in order: id, each metric's value (NaN and not ``present`` where it has
    none), its failures; per judge rubric, how uncertain each verdict is."""

    def __init__(self, spill: str | Path | None = None) -> None:
        # ``spill``: a folder whose unnamed temporary files hold the per-sample arrays past a
        # few thousand samples (``data.column``), so a run's index costs no memory per sample
        self._spill = spill
        self.ids = Ids(spill=spill)
        self.failures: list[tuple[int, str, Failure]] = []  # (sample index, metric, failure)
        self._columns: dict[str, Column] = {}
        # rubric -> a column of uncertainty keys (minus the spread, or top probability - 1;
        # NaN: certain or no verdict), flagged where the key is a spread
        self._uncertainty: dict[str, Column] = {}
        # What the report's pages ask of every sample, kept as the samples pass: the failing
        # turns (few), and whether any sample is a conversation or has per-unit rows.
        self.degraded: list[tuple[str, Degradation]] = []
        self.conversations = False
        # What the judge audit reads of every sample: its answer's length in words (NaN: no
        # answer), and the generator its metadata names (a code into ``_generator_names``;
        # -1: none), so the audit does not read the samples again.
        self.answer_words = FileArray("d", spill)
        self._generator_codes = FileArray("i", spill)
        self._generator_names: dict[str, int] = {}

    @classmethod
    def build(cls, results: Iterable[SampleResult]) -> SampleIndex:
        index = cls()
        for r in results:
            index.add(r)
        return index

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, r: SampleResult, *, scores: bool = True, about: About | None = None) -> None:
        """One more sample; ``scores=False`` leaves its scores to :meth:`attach`; ``about``:
        what its sample says, for a result that does not hold it (read where it was parsed)."""
        i = len(self.ids)
        self.ids.append(r.id)
        about = About.of(r.sample) if about is None else about
        self.answer_words.append(about.answer_words)
        code = -1
        if about.generator is not None:
            code = self._generator_names.setdefault(about.generator, len(self._generator_names))
        self._generator_codes.append(code)
        self.degraded.extend((r.id, d) for d in r.degraded)
        self.conversations = self.conversations or bool(r.units) or about.conversation
        if scores:
            for metric, value in r.scores.items():
                if metric not in self._columns:
                    self._columns[metric] = Column(spill=self._spill)
                column = self._columns[metric]
                column.push(i, math.nan if value is None else value, value is not None)
        for metric, failure in r.errors.items():
            if failure.counts:  # a metric that does not apply to the sample did not fail
                self.failures.append((i, metric, failure))
        for rubric, j in r.judgments.items():
            key, is_spread = np.nan, False
            spread, probs = j.spread_of_verdicts(), j.distribution()
            if j.score is not None and spread is not None:
                key, is_spread = (-spread if spread > 0 else np.nan), True
            elif j.score is not None and probs and max(probs.values()) < 1:
                key = max(probs.values()) - 1
            if rubric not in self._uncertainty:
                self._uncertainty[rubric] = Column(spill=self._spill)
            self._uncertainty[rubric].push(i, key, is_spread)

    def generators(self) -> list[str | None]:
        """Per sample, the generator its metadata names (``generator``, else ``model``)."""
        codes, names = self.generator_codes()
        return [names[c] if c >= 0 else None for c in codes.tolist()]

    def generator_codes(self) -> tuple[NDArray[np.int32], list[str]]:
        """Per sample, the generator its metadata names as a code into the names returned
        (-1: none): 4 bytes a sample, not a string each (a read-only view)."""
        codes: NDArray[np.int32] = self._generator_codes.numpy()
        codes.flags.writeable = False
        return codes, list(self._generator_names)

    def attach(self, metric: str, column: Column) -> None:
        """A whole column at once, shared, not copied (a run's own columns)."""
        self._columns[metric] = column

    def column(self, metric: str) -> NDArray[np.float64]:
        """``metric`` over every sample, NaN where it has no value (read-only)."""
        return self._columns.get(metric, Column()).arrays(len(self.ids))[0]

    def present(self, metric: str) -> NDArray[np.bool_]:
        """Where ``metric`` has a value (a value may itself be NaN)."""
        return self._columns.get(metric, Column()).arrays(len(self.ids))[1]

    def value(self, metric: str, i: int) -> float | None:
        column = self._columns.get(metric)
        return None if column is None else column.get(i)

    def uncertainty(self, rubric: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Per sample, how uncertain its verdict on ``rubric`` is (lower: more; NaN: certain,
        or no verdict) and whether that is the spread of sampled verdicts (else the
        probability of the top verdict, minus 1)."""
        return self._uncertainty.get(rubric, Column()).arrays(len(self.ids))


def parse_result(line: bytes) -> SampleResult:
    return SampleResult.model_validate_json(line)


class SampleFile(RowFile[SampleResult]):
    """The samples of a report, one JSON object per line (a :class:`SampleResult`), with the
    index built by the run that wrote them or, when first asked for, by one pass over them."""

    def __init__(
        self,
        path: str | Path,
        offsets: NDArray[np.int64] | None = None,
        *,
        index: SampleIndex | None = None,
        owned: bool = False,
    ) -> None:
        super().__init__(path, parse_result, offsets, owned=owned)
        self._index = index

    def indexed(self) -> SampleIndex:
        if self._index is None:
            self._index = SampleIndex.build(self)
        return self._index


def index_of(samples: Sequence[SampleResult]) -> SampleIndex:
    """The index of ``samples``: the file's own, or built from a list."""
    if isinstance(samples, SampleFile):
        return samples.indexed()
    return SampleIndex.build(samples)
