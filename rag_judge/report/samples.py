"""Every sample's result, in memory or in ``samples.jsonl`` beside report.json, and the index
the report's readers use instead of walking every sample: the ids, each metric's values as an
array, the failures, and each judge rubric's uncertain verdicts.

A run past ``inline_samples`` keeps its samples in a file (:class:`SampleFile`), so a million
samples cost their score columns in memory, not their texts; the index then comes from the run
(built as the file is written) or from one pass over the file when a report is loaded.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.rows import RowFile
from rag_judge.report.types import Failure, SampleResult

__all__ = ["SampleFile", "SampleIndex", "parse_result"]


class SampleIndex:
    """Per sample, in order: id, each metric's value (NaN and not ``present`` where it has
    none), its failures; per judge rubric, how uncertain each verdict is."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.failures: list[tuple[int, str, Failure]] = []  # (sample index, metric, failure)
        self._values: dict[str, array[float]] = {}
        self._present: dict[str, bytearray] = {}
        # rubric -> (uncertainty key: minus the spread, or top probability - 1; NaN: certain or
        # no verdict) and whether the key is a spread
        self._uncertainty: dict[str, tuple[array[float], bytearray]] = {}

    @classmethod
    def build(cls, results: Iterable[SampleResult]) -> SampleIndex:
        index = cls()
        for r in results:
            index.add(r)
        return index

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, r: SampleResult, *, scores: bool = True) -> None:
        """One more sample; ``scores=False`` leaves its scores to :meth:`attach`."""
        i = len(self.ids)
        self.ids.append(r.id)
        if not scores:
            self._add_details(r, i)
            return
        for metric, value in r.scores.items():
            values, present = self._column(metric, i)
            values.append(np.nan if value is None else value)
            present.append(value is not None)
        for values, present in self._values_items():
            if len(values) == i:  # not scored for this sample
                values.append(np.nan)
                present.append(False)
        self._add_details(r, i)

    def _add_details(self, r: SampleResult, i: int) -> None:
        for metric, failure in r.errors.items():
            self.failures.append((i, metric, failure))
        for rubric, j in r.judgments.items():
            keys, spread = self._uncertainty.setdefault(rubric, (array("d"), bytearray()))
            keys.extend([np.nan] * (i - len(keys)))
            spread.extend(bytes(i - len(spread)))
            key, is_spread = np.nan, False
            if j.score is not None and j.spread is not None:
                key, is_spread = (-j.spread if j.spread > 0 else np.nan), True
            elif j.score is not None and j.probs and max(j.probs.values()) < 1:
                key = max(j.probs.values()) - 1
            keys.append(key)
            spread.append(is_spread)

    def attach(self, metric: str, values: array[float], present: bytearray) -> None:
        """A whole column at once, shared, not copied (a run's own columns)."""
        self._values[metric], self._present[metric] = values, present

    def _column(self, metric: str, i: int) -> tuple[array[float], bytearray]:
        if metric not in self._values:
            self._values[metric] = array("d", [np.nan] * i)
            self._present[metric] = bytearray(i)
        return self._values[metric], self._present[metric]

    def _values_items(self) -> Iterable[tuple[array[float], bytearray]]:
        return ((v, self._present[m]) for m, v in self._values.items())

    def metrics(self) -> list[str]:
        return list(self._values)

    def column(self, metric: str) -> NDArray[np.float64]:
        """``metric`` over every sample, NaN where it has no value: a read-only view of the
        column where it is complete (a million samples are not copied per reader)."""
        values = self._values.get(metric, array("d"))
        return _padded(np.frombuffer(values, dtype=np.float64), len(self.ids), np.nan)

    def present(self, metric: str) -> NDArray[np.bool_]:
        """Where ``metric`` has a value (a value may itself be NaN)."""
        flags = self._present.get(metric, bytearray())
        return _padded(np.frombuffer(flags, dtype=np.bool_), len(self.ids), False)

    def value(self, metric: str, i: int) -> float | None:
        flags = self._present.get(metric)
        if flags is None or i >= len(flags) or not flags[i]:
            return None
        return self._values[metric][i]

    def uncertainty(self, rubric: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Per sample, how uncertain its verdict on ``rubric`` is (lower: more; NaN: certain,
        or no verdict) and whether that is the spread of sampled verdicts (else the
        probability of the top verdict, minus 1)."""
        keys, spread = self._uncertainty.get(rubric, (array("d"), bytearray()))
        n = len(self.ids)
        return (
            _padded(np.frombuffer(keys, dtype=np.float64), n, np.nan),
            _padded(np.frombuffer(spread, dtype=np.bool_), n, False),
        )


def _padded(view: NDArray[Any], n: int, fill: float | bool) -> NDArray[Any]:
    """``view`` read-only when it is ``n`` long, else a copy padded to ``n`` with ``fill``."""
    if len(view) == n:
        view.flags.writeable = False
        return view
    return np.concatenate([view, np.full(n - len(view), fill, dtype=view.dtype)])


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
