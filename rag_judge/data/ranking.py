"""Runs held column-wise with integer codes, trec_eval's ordering, and the join with qrels into
``Rankings``, the padded batch the retrieval kernels (``rag_judge.metrics.retrieval``) read.

Everything per entry is a numpy operation, so ordering and joining a million run lines costs a
few array passes instead of a Python step per line. Only tied or out-of-order queries are
re-sorted, and doc ids are compared as strings only where scores tie.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import ne

import numpy as np
from numpy.typing import NDArray

__all__ = ["Qrels", "Rankings", "Run", "rankings_for"]

Array = NDArray[np.float64]


def _padded(rows: Sequence[Sequence[float]]) -> Array:
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


@dataclass(frozen=True)
class Rankings:
    """A batch of graded rankings, padded into 2-D arrays with NaN past each row's end.

    ``ranked[q, i]`` is the grade of the document at rank ``i + 1`` for query ``q`` (0 when it
    is unjudged); ``judged[q]`` holds every judged grade of query ``q``, in any order.

    ``extra_rank``/``extra_grade`` (chunk level only): the labels a ranked chunk earns beyond
    the one whose grade it carries, as (rank index, grade) pairs padded with NaN. The ranked
    item stays one item with its best grade (precision, MRR, nDCG), but each label it earns is
    one of the R relevant units that recall, R-precision, AP, bpref and infAP count.
    """

    ranked: Array
    judged: Array
    # known[q, i]: the document at rank i + 1 carries a judgment (any grade); None: all do.
    known: NDArray[np.bool_] | None = None
    extra_rank: Array | None = None
    extra_grade: Array | None = None

    def __post_init__(self) -> None:
        if self.ranked.ndim != 2 or self.judged.ndim != 2:
            raise ValueError("ranked and judged must be 2-D arrays")
        if self.ranked.shape[0] != self.judged.shape[0]:
            raise ValueError(
                f"ranked has {self.ranked.shape[0]} queries but judged has {self.judged.shape[0]}"
            )
        if self.known is not None and self.known.shape != self.ranked.shape:
            raise ValueError(f"known has shape {self.known.shape}, ranked {self.ranked.shape}")
        if (self.extra_rank is None) != (self.extra_grade is None):
            raise ValueError("extra_rank and extra_grade come together")
        if self.extra_rank is not None and self.extra_grade is not None:
            shape = self.extra_rank.shape
            if self.extra_grade.shape != shape or len(shape) != 2 or shape[0] != len(self):
                raise ValueError(
                    f"extra_rank {shape} and extra_grade {self.extra_grade.shape} must be 2-D "
                    f"with one row per query ({len(self)})"
                )

    @classmethod
    def from_lists(
        cls,
        ranked: Sequence[Sequence[float]],
        judged: Sequence[Sequence[float]],
        known: Sequence[Sequence[bool]] | None = None,
        extra: Sequence[Sequence[tuple[int, float]]] | None = None,
    ) -> Rankings:
        """Build a batch from ragged per-query lists of grades (and of whether each ranked
        document carries a judgment, and of the further labels a chunk earns: (rank index,
        grade) pairs)."""
        mask = None
        if known is not None:
            mask = np.nan_to_num(_padded(known), nan=0.0).astype(bool)
        if extra is None or not any(extra):
            return cls(_padded(ranked), _padded(judged), mask)
        ranks = _padded([[r for r, _ in row] for row in extra])
        grades = _padded([[g for _, g in row] for row in extra])
        return cls(_padded(ranked), _padded(judged), mask, ranks, grades)

    def top(self, depth: int) -> Rankings:
        """Only the top ``depth`` of each ranking (trec_eval's ``-M``); the kernels skip the
        extra labels of chunks past it."""
        known = None if self.known is None else self.known[:, :depth]
        ranked = self.ranked[:, :depth]
        return Rankings(ranked, self.judged, known, self.extra_rank, self.extra_grade)

    def __len__(self) -> int:
        return int(self.ranked.shape[0])


Qrels = dict[str, dict[str, int]]
"""query id -> doc id -> grade, as pytrec_eval takes it."""


def encode(values: Sequence[str], index: dict[str, int]) -> NDArray[np.int64]:
    """Codes of ``values`` in first-appearance order, extending ``index`` with new ones."""
    for value in dict.fromkeys(values):
        index.setdefault(value, len(index))
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))


def encode_runs(values: Sequence[str], index: dict[str, int]) -> NDArray[np.int64]:
    """:func:`encode` for columns made of long runs of one value (a run file's query ids):
    one string comparison per entry and one dict lookup per run, instead of a hash each."""
    if not values:
        return np.zeros(0, dtype=np.int64)
    change = np.fromiter(map(ne, values[1:], values[:-1]), dtype=bool, count=len(values) - 1)
    starts = np.flatnonzero(np.r_[True, change])
    heads = encode([values[i] for i in starts.tolist()], index)
    return np.repeat(heads, np.diff(np.r_[starts, len(values)]))


@dataclass(frozen=True, eq=False)
class Run:
    """A retrieval run: entry ``i`` is doc ``doc_ids[d[i]]`` retrieved for ``query_ids[q[i]]``."""

    query_ids: tuple[str, ...]
    doc_ids: tuple[str, ...]
    q: NDArray[np.int64]
    d: NDArray[np.int64]
    scores: NDArray[np.float64]
    name: str = "rag-judge"
    empty: tuple[str, ...] = ()  # queries the run answered with no documents at all
    doc_index: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def from_columns(
        cls,
        qids: Sequence[str],
        docids: Sequence[str],
        scores: Iterable[float],
        name: str = "rag-judge",
        empty: tuple[str, ...] = (),
    ) -> Run:
        qindex: dict[str, int] = {}
        dindex: dict[str, int] = {}
        q, d = encode(qids, qindex), encode(docids, dindex)
        values = np.asarray(scores if isinstance(scores, np.ndarray) else list(scores), np.float64)
        return cls(tuple(qindex), tuple(dindex), q, d, values, name, empty, dindex)

    @classmethod
    def from_dict(cls, run: dict[str, dict[str, float]], name: str = "rag-judge") -> Run:
        """From pytrec_eval's layout: query id -> doc id -> score."""
        return cls.from_columns(
            [q for q, docs in run.items() for _ in docs],
            [d for docs in run.values() for d in docs],
            [s for docs in run.values() for s in docs.values()],
            name,
            tuple(q for q, docs in run.items() if not docs),
        )

    def first_duplicate(self) -> int | None:
        """Index of the later entry of the first repeated (query, doc) pair, or None."""
        key = self.q * (len(self.doc_ids) + 1) + self.d
        space = len(self.query_ids) * (len(self.doc_ids) + 1)
        if space <= _DENSE_LIMIT and len(key) < 1 << 31:
            # Scatter each entry's position to its key and read it back: a repeated key keeps
            # one of its positions, so the other reads back wrong. Pages never written are
            # never touched, and a clean run (the usual case) skips the sort below.
            at = np.arange(len(key), dtype=np.int32)
            table = np.empty(space, dtype=np.int32)
            table[key] = at
            if np.array_equal(table[key], at):
                return None
        order = np.argsort(key, kind="stable")
        same = np.flatnonzero(key[order][1:] == key[order][:-1])
        return int(order[same + 1].min()) if len(same) else None

    def __len__(self) -> int:
        return len(self.q)

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {q: {} for q in self.empty}
        for q, d, s in zip(self.q.tolist(), self.d.tolist(), self.scores.tolist()):
            out.setdefault(self.query_ids[q], {})[self.doc_ids[d]] = s
        return out

    def ordered(self) -> dict[str, list[tuple[str, float]]]:
        """Each query's documents in trec_eval order."""
        out: dict[str, list[tuple[str, float]]] = {q: [] for q in self.empty}
        o = self.order()
        for q, d, s in zip(self.q[o].tolist(), self.d[o].tolist(), self.scores[o].tolist()):
            out.setdefault(self.query_ids[q], []).append((self.doc_ids[d], s))
        return out

    def order(self) -> NDArray[np.intp]:
        """Entries grouped by query, each query in trec_eval order: the score as float32
        descending, ties broken by doc id descending (strcmp; numpy compares str by code
        point, which is UTF-8 byte order).

        Run files usually arrive grouped and score-sorted, so each step first checks whether
        it has anything to do, and doc ids are compared only inside groups of tied scores.
        """
        order = np.arange(len(self.q))
        if np.any(self.q[1:] < self.q[:-1]):
            order = np.argsort(self.q, kind="stable")
        q, s32 = self.q[order], self.scores[order].astype(np.float32)
        same_q = q[1:] == q[:-1]
        if np.any(same_q & (s32[1:] > s32[:-1])):
            order = order[np.lexsort((-s32, q))]  # stable: ties keep file order for now
            s32 = self.scores[order].astype(np.float32)
        tie = same_q & (s32[1:] == s32[:-1])
        if not tie.any():
            return order
        member = np.r_[tie, False] | np.r_[False, tie]  # entries inside a group of ties
        group = np.cumsum(np.r_[True, ~tie])[member]  # id of the tie group of each member
        docs = np.asarray(self.doc_ids, dtype=np.str_)[self.d[order[member]]]
        _, rank = np.unique(docs, return_inverse=True)
        order[member] = order[member][np.lexsort((-rank.ravel(), group))]
        return order


def rankings_for(
    qrels: Qrels, run: Run, *, zero_missing: bool = False
) -> tuple[list[str], Rankings]:
    """The queries trec_eval would evaluate, sorted by id, with their graded rankings.

    Evaluated queries are those with judgments that the run answers; with ``zero_missing``
    (trec_eval ``-c``) judged queries absent from the run are added with an empty ranking.
    """
    judged = [qid for qid, docs in qrels.items() if docs]  # pytrec_eval ignores empty ones
    answered = set(run.query_ids) | set(run.empty)
    names = sorted(set(judged) if zero_missing else answered.intersection(judged))
    row_of_name = {name: i for i, name in enumerate(names)}

    # Every judgment of the evaluated queries, flattened: its row, doc code in the run, grade.
    sizes = np.fromiter(map(len, map(qrels.__getitem__, names)), np.int64, len(names))
    total = int(sizes.sum())
    j_rows = np.repeat(np.arange(len(names)), sizes)
    j_docs = np.fromiter(
        map(run.doc_index.get, chain.from_iterable(map(qrels.__getitem__, names)), repeat(-1)),
        np.int64,
        total,
    )
    j_grades = np.fromiter(chain.from_iterable(qrels[n].values() for n in names), np.float64, total)
    judged_m = np.full((len(names), int(sizes.max(initial=0))), np.nan)
    judged_m[j_rows, _positions(sizes)] = j_grades

    # Every run entry of the evaluated queries, in trec_eval order, with its grade.
    row_of_code = np.array([row_of_name.get(qid, -1) for qid in run.query_ids], dtype=np.int64)
    order = run.order()
    rows, d = row_of_code[run.q[order]], run.d[order]
    keep = rows >= 0
    rows, d = rows[keep], d[keep]
    width = len(run.doc_ids) + 1  # doc code -1 (judged, never retrieved) cannot collide
    grades, found = _lookup(j_rows * width + j_docs, j_grades, rows * width + d, len(names) * width)

    counts = np.bincount(rows, minlength=len(names))
    starts = np.zeros(len(names), dtype=np.int64)
    first = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if len(rows) else rows
    starts[rows[first]] = first
    ranked = np.full((len(names), int(counts.max(initial=0))), np.nan)
    known = np.zeros(ranked.shape, dtype=bool)
    at = (rows, np.arange(len(rows)) - starts[rows])
    ranked[at] = grades
    known[at] = found
    return names, Rankings(ranked, judged_m, known)


def _positions(sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """0..size-1 for each group, concatenated."""
    ends = np.cumsum(sizes)
    return np.arange(ends[-1] if len(ends) else 0) - np.repeat(ends - sizes, sizes)


_DENSE_LIMIT = 1 << 26  # key-space size up to which a byte-per-key table (64 MiB) is used


def _lookup(
    keys: NDArray[np.int64], values: NDArray[np.float64], want: NDArray[np.int64], space: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """values[keys == w] for each w in ``want``, 0 where absent (unjudged), and whether it was
    present; keys < ``space``.

    Small integer grades in a small key space go through a dense int8 table (one memory access
    per lookup); anything else through a binary search of the sorted keys.
    """
    if not len(keys):
        return np.zeros(len(want)), np.zeros(len(want), dtype=bool)
    fits = np.all((values >= -128) & (values <= 127) & (values == np.round(values)))
    if space <= _DENSE_LIMIT and fits:
        table = np.zeros(space + 1, dtype=np.int8)  # key -1 (never retrieved) lands at the end
        table[keys] = values
        seen = np.zeros(space + 1, dtype=bool)
        seen[keys] = True
        return table[want].astype(np.float64), seen[want]
    sort = np.argsort(keys)
    keys, values = keys[sort], values[sort]
    at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    hit = keys[at] == want
    return np.where(hit, values[at], 0.0), hit
