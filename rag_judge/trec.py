"""TREC qrels and run files: readers, writers, trec_eval ordering, and conversion to samples.

A run is kept column-wise (query ids, doc ids, scores) so that ordering ten thousand queries is
a handful of numpy sorts rather than a Python sort per query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from rag_judge.data import Context, Sample
from rag_judge.errors import DataError
from rag_judge.metrics.retrieval import Rankings

__all__ = [
    "Qrels",
    "Run",
    "qrels_from_samples",
    "rankings_for",
    "read_qrels",
    "read_run",
    "run_from_samples",
    "samples_from_trec",
    "write_qrels",
    "write_run",
]

Qrels = dict[str, dict[str, int]]
"""query id -> doc id -> grade, as pytrec_eval takes it."""


def _lines(path: Path) -> Iterable[tuple[int, list[str]]]:
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    with fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.split()
            if parts:
                yield lineno, parts


def read_qrels(path: str | Path) -> Qrels:
    """Read ``qid iter docid grade`` lines; a repeated (qid, docid) pair is an error."""
    path = Path(path)
    qrels: Qrels = {}
    for lineno, parts in _lines(path):
        if len(parts) != 4:
            raise DataError(
                f"{path}:{lineno}: a qrels line has 4 columns (qid iter docid grade), "
                f"found {len(parts)}"
            )
        qid, _, docid, raw = parts
        try:
            grade = int(raw)
        except ValueError:
            raise DataError(f"{path}:{lineno}: field 'grade': {raw!r} is not an integer") from None
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise DataError(f"{path}:{lineno}: query {qid!r} judges doc {docid!r} twice")
        judged[docid] = grade
    if not qrels:
        raise DataError(f"{path}: contains no judgments")
    return qrels


@dataclass(frozen=True)
class Run:
    """A retrieval run, column-wise: one entry per (query, document) with its score."""

    qids: NDArray[np.str_]
    docids: NDArray[np.str_]
    scores: NDArray[np.float64]
    name: str = "rag-judge"
    empty: tuple[str, ...] = ()  # queries the run answered with no documents at all

    @classmethod
    def from_dict(cls, run: dict[str, dict[str, float]], name: str = "rag-judge") -> Run:
        """From pytrec_eval's layout: query id -> doc id -> score."""
        qids = [q for q, docs in run.items() for _ in docs]
        docids = [d for docs in run.values() for d in docs]
        scores = [s for docs in run.values() for s in docs.values()]
        return cls(
            np.array(qids, dtype=np.str_),
            np.array(docids, dtype=np.str_),
            np.array(scores, dtype=np.float64),
            name,
            tuple(q for q, docs in run.items() if not docs),
        )

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {q: {} for q in self.empty}
        for q, d, s in zip(self.qids.tolist(), self.docids.tolist(), self.scores.tolist()):
            out.setdefault(q, {})[d] = s
        return out

    def ordered(self) -> dict[str, list[tuple[str, float]]]:
        """Each query's documents in trec_eval order."""
        out: dict[str, list[tuple[str, float]]] = {q: [] for q in self.empty}
        order = self._order()
        for q, d, s in zip(
            self.qids[order].tolist(), self.docids[order].tolist(), self.scores[order].tolist()
        ):
            out.setdefault(q, []).append((d, s))
        return out

    def _order(self) -> NDArray[np.intp]:
        """trec_eval's order: by query, then score as float32 descending, then doc id descending.

        numpy compares str arrays by code point, which for UTF-8 is the byte order strcmp uses.
        """
        _, doc_rank = np.unique(self.docids, return_inverse=True)
        score32 = self.scores.astype(np.float32)
        return np.lexsort((-doc_rank.ravel(), -score32, self.qids))


def read_run(path: str | Path, name: str | None = None) -> Run:
    """Read ``qid Q0 docid rank score tag`` lines. The rank column is ignored, as trec_eval does."""
    path = Path(path)
    qids: list[str] = []
    docids: list[str] = []
    raw_scores: list[str] = []
    linenos: list[int] = []
    tag = None
    for lineno, parts in _lines(path):
        if len(parts) != 6:
            raise DataError(
                f"{path}:{lineno}: a run line has 6 columns (qid Q0 docid rank score tag), "
                f"found {len(parts)}"
            )
        qids.append(parts[0])
        docids.append(parts[2])
        raw_scores.append(parts[4])
        linenos.append(lineno)
        tag = tag or parts[5]
    if not qids:
        raise DataError(f"{path}: contains no results")
    try:
        scores = np.array(raw_scores, dtype=np.float64)
    except ValueError:
        bad = next(i for i, s in enumerate(raw_scores) if not _is_float(s))
        raise DataError(
            f"{path}:{linenos[bad]}: field 'score': {raw_scores[bad]!r} is not a number"
        ) from None
    run = Run(
        np.array(qids, dtype=np.str_), np.array(docids, dtype=np.str_), scores, name or tag or ""
    )
    dup = _first_duplicate(run)
    if dup is not None:
        raise DataError(
            f"{path}:{linenos[dup]}: query {qids[dup]!r} retrieves doc {docids[dup]!r} twice"
        )
    return run


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _first_duplicate(run: Run) -> int | None:
    """Index of the later entry of the first repeated (query, doc) pair, or None."""
    order = np.lexsort((run.docids, run.qids))
    same = (run.qids[order][1:] == run.qids[order][:-1]) & (
        run.docids[order][1:] == run.docids[order][:-1]
    )
    if not same.any():
        return None
    pairs = np.stack([order[:-1][same], order[1:][same]])
    return int(pairs.max(axis=0).min())


def rankings_for(
    qrels: Qrels, run: Run, *, zero_missing: bool = False
) -> tuple[list[str], Rankings]:
    """The queries trec_eval would evaluate, in its order, with their graded rankings.

    Evaluated queries are those in both the qrels and the run; with ``zero_missing`` (trec_eval
    ``-c``) qrels queries absent from the run are added with an empty ranking.
    """
    order = run._order()
    qids, docids = run.qids[order], run.docids[order]
    # Like pytrec_eval, a query with no judgments at all is not a judged query.
    judged_qids = [q for q, docs in qrels.items() if docs]
    keep = np.isin(qids, np.array(judged_qids, dtype=np.str_))
    qids, docids = qids[keep], docids[keep]
    evaluated = set(qids.tolist()) | (set(run.empty) & set(judged_qids))
    if zero_missing:
        evaluated |= set(judged_qids)
    names = sorted(evaluated)
    row_of = {q: i for i, q in enumerate(names)}

    grades = np.fromiter(
        (qrels[q].get(d, 0) for q, d in zip(qids.tolist(), docids.tolist())),
        dtype=np.float64,
        count=len(qids),
    )
    rows = np.array([row_of[q] for q in qids.tolist()], dtype=np.intp)
    counts = np.bincount(rows, minlength=len(names))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    cols = np.arange(len(rows)) - starts[rows] if len(rows) else rows
    ranked = np.full((len(names), int(counts.max(initial=0))), np.nan)
    ranked[rows, cols] = grades

    judged_lists = [list(qrels[q].values()) for q in names]
    judged = np.full((len(names), max((len(j) for j in judged_lists), default=0)), np.nan)
    for i, values in enumerate(judged_lists):
        judged[i, : len(values)] = values
    return names, Rankings(ranked, judged)


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as fh:
        for qid, docs in qrels.items():
            for docid, grade in docs.items():
                fh.write(f"{qid} 0 {docid} {grade}\n")


def write_run(run: Run, path: str | Path) -> None:
    """Write in trec_eval order with ranks 1..n; scores keep full precision (repr)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for qid, docs in run.ordered().items():
            for rank, (docid, score) in enumerate(docs, start=1):
                fh.write(f"{qid} Q0 {docid} {rank} {score!r} {run.name or 'rag-judge'}\n")


def qrels_from_samples(samples: Sequence[Sample]) -> Qrels:
    """Judgments of every sample that carries any (integer grades, as TREC files hold)."""
    out: Qrels = {}
    for sample in samples:
        grades = sample.judged_grades()
        if grades is not None:
            out[sample.id] = {d: _int_grade(sample.id, d, g) for d, g in grades.items()}
    return out


def _int_grade(qid: str, docid: str, grade: float) -> int:
    if grade != int(grade):
        raise DataError(f"query {qid!r} doc {docid!r}: grade {grade} is not an integer")
    return int(grade)


def run_from_samples(samples: Sequence[Sample], name: str = "rag-judge") -> Run:
    """A run whose trec_eval order is each sample's list order: rank r gets score n - r."""
    run: dict[str, dict[str, float]] = {}
    for sample in samples:
        ids = [c.id for c in sample.contexts]
        if any(i is None for i in ids):
            raise DataError(f"sample {sample.id!r}: field 'contexts': every context needs an id")
        run[sample.id] = {str(d): float(len(ids) - r) for r, d in enumerate(ids)}
    return Run.from_dict(run, name)


def samples_from_trec(qrels: Qrels, run: Run) -> list[Sample]:
    """One sample per run query, contexts in trec_eval order, with the query's judgments."""
    return [
        Sample(
            id=qid,
            contexts=tuple(Context(id=d, score=s) for d, s in docs),
            relevance={d: float(g) for d, g in qrels[qid].items()} if qid in qrels else None,
        )
        for qid, docs in run.ordered().items()
    ]
