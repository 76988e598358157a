"""TREC qrels and run files: readers, writers, trec_eval ordering, and conversion to samples.

A run is kept column-wise (query ids, doc ids, scores) so that ordering ten thousand queries is
a handful of numpy sorts rather than a Python sort per query.

The readers take the files trec_eval 10 takes: ``#`` comment lines are skipped, and so are a
run's fields after the tag (see ``_Layout``); blank lines are skipped too.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import ne
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from rag_judge.data import _trec_columns as columns
from rag_judge.data._files import decode, read_bytes
from rag_judge.data.ranking import Qrels, Run, encode, encode_runs, rankings_for
from rag_judge.errors import DataError

if TYPE_CHECKING:  # the sample model (pydantic) is imported by the functions that build one
    from rag_judge.data.sample import Sample

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


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic GC while building millions of small strings and lists: it would rescan
    them over and over (about 3x slower parsing), and they hold no reference cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class _Layout:
    """What trec_eval 10 takes as a line of one kind of TREC file.

    A line holds ``width`` whitespace-separated fields, or more where ``extra_ok`` (trec_eval
    ignores anything after a run's tag, and refuses anything after a qrels grade). A comment
    line starts with ``#``; with ``indented_comments`` (runs) also after leading blanks, while
    trec_eval reads an indented qrels line as a judgment. Blank lines are skipped in both kinds
    (trec_eval refuses them in qrels).
    """

    name: str
    fields: tuple[str, ...]
    extra_ok: bool
    indented_comments: bool

    @property
    def width(self) -> int:
        return len(self.fields)

    def lines(self, text: str) -> Iterator[tuple[int, list[str]]]:
        """(line number, fields) of each data line: the slow path, also for error messages."""
        for lineno, line in enumerate(text.split("\n"), start=1):
            parts = line.split()
            if parts and not (parts[0] if self.indented_comments else line).startswith("#"):
                yield lineno, parts

    def field_at(self, head: str) -> str:
        """What a line holds where its text ``head`` ends (a byte that is not UTF-8 follows):
        ``field 'docid'``, a comment, or a field past the layout's."""
        parts = head.split()
        if parts and (parts[0] if self.indented_comments else head).startswith("#"):
            return "a comment line"
        index = len(parts) - 1 if head and not head[-1].isspace() else len(parts)
        if index < self.width:
            return f"field '{self.fields[index]}'"
        return f"field {index + 1} (past the {self.width} a line holds)"

    def line_of_entry(self, text: str, entry: int) -> int:
        return next(n for i, (n, _) in enumerate(self.lines(text)) if i == entry)

    def check(self, path: Path, lineno: int, parts: list[str]) -> None:
        if len(parts) < self.width or (len(parts) > self.width and not self.extra_ok):
            raise DataError(
                f"{path}:{lineno}: a {self.name} line has {self.width} columns, found {len(parts)}"
            )


_QRELS = _Layout(
    "qrels (qid iter docid grade)",
    ("qid", "iter", "docid", "grade"),
    extra_ok=False,
    indented_comments=False,
)
_RUN = _Layout(
    "run (qid Q0 docid rank score tag)",
    ("qid", "Q0", "docid", "rank", "score", "tag"),
    extra_ok=True,
    indented_comments=True,
)


def _tokens(path: Path, text: str, layout: _Layout) -> list[str]:
    """The first ``layout.width`` fields of every data line, in order.

    A plain file (ASCII; each line blank or of exactly ``width`` fields, none starting with
    ``#``) is checked over its bytes with numpy and split in one call. Anything else takes the
    per-line path, which skips comments, drops extra fields where allowed and names a bad line.
    """
    if text.isascii() and _fields_per_line_ok(text, layout.width):
        return text.split()
    tokens: list[str] = []
    for lineno, parts in layout.lines(text):
        layout.check(path, lineno, parts)
        tokens += parts[: layout.width]
    return tokens


# Bytes str.split() treats as whitespace, and the other bytes a plain ASCII file may hold.
_ASCII_SPACE = bytes([9, 10, 11, 12, 13, 28, 29, 30, 31, 32])
_ASCII_PLAIN = _ASCII_SPACE + bytes(range(33, 128))


def _fields_per_line_ok(text: str, width: int) -> bool:
    """Does every non-blank line hold exactly ``width`` fields, the first not starting with
    ``#`` (which could make it a comment)? One numpy pass over the bytes.

    Only for text of plain ASCII (no other control bytes), where "byte <= 32" is exactly the
    set of separators str.split() uses; anything else returns False for the exact slow path.
    """
    data = text.encode("ascii")
    if data.translate(None, _ASCII_PLAIN):
        return False
    buf = np.frombuffer(data, dtype=np.uint8)
    space = buf <= 32
    starts = ~space
    starts[1:] &= space[:-1]
    token_at = np.flatnonzero(starts)
    before = np.searchsorted(token_at, np.flatnonzero(buf == 10))  # fields before each newline
    per_line = np.diff(np.r_[0, before, len(token_at)])
    if not np.all((per_line == 0) | (per_line == width)):
        return False
    if b"#" not in data:
        return True
    heads = token_at[np.r_[0, before][per_line > 0]]  # where each non-blank line's fields start
    return not np.any(buf[heads] == ord("#"))


def read_qrels(path: str | Path) -> Qrels:
    """Read ``qid iter docid grade`` lines; a repeated (qid, docid) pair is an error.

    Blank lines and ``#`` comment lines are skipped.
    """
    path = Path(path)
    data = read_bytes(path)
    with _no_gc():
        fast = columns.qrels_columns(data) if columns.available() else None
        qids, docids, grades = fast or _qrels_fields(path, decode(path, data, _QRELS.field_at))
        # Judgments come grouped by query: build each query's dict in one C-level call.
        change = np.fromiter(map(ne, qids[1:], qids[:-1]), dtype=bool, count=max(len(qids) - 1, 0))
        bounds = [0, *(np.flatnonzero(change) + 1).tolist(), len(qids)] if qids else [0]
        qrels: Qrels = {}
        for start, end in itertools.pairwise(bounds):
            group = dict(zip(docids[start:end], grades[start:end]))
            qid = qids[start]
            if qid in qrels:  # the query also appears earlier in the file
                qrels[qid].update(group)
            else:
                qrels[qid] = group
    if not qrels:
        raise DataError(f"{path}: contains no judgments")
    if sum(map(len, qrels.values())) != len(qids):
        seen: set[tuple[str, str]] = set()
        for entry, pair in enumerate(zip(qids, docids)):
            if pair in seen:
                raise DataError(
                    f"{path}:{_QRELS.line_of_entry(decode(path, data), entry)}: query "
                    f"{pair[0]!r} judges doc {pair[1]!r} twice"
                )
            seen.add(pair)
    return qrels


def _qrels_fields(path: Path, text: str) -> tuple[list[str], list[str], list[int]]:
    """The exact reader's (qids, docids, grades), naming the line of a bad field."""
    tokens = _tokens(path, text, _QRELS)
    raw = tokens[3::4]
    try:
        grades = list(map(int, raw))
    except ValueError:
        entry = next(i for i, g in enumerate(raw) if not _is_int(g))
        raise DataError(
            f"{path}:{_QRELS.line_of_entry(text, entry)}: field 'grade': {raw[entry]!r} "
            "is not an integer"
        ) from None
    return tokens[0::4], tokens[2::4], grades


_CHUNK = 1 << 22  # characters of a run file handled at once: bounds the peak of live strings


def read_run(path: str | Path, name: str | None = None) -> Run:
    """Read ``qid Q0 docid rank score tag`` lines. As trec_eval does, the rank column and any
    fields after the tag are ignored, and so are blank lines and ``#`` comment lines."""
    path = Path(path)
    data = read_bytes(path)
    fast = columns.run_columns(data) if columns.available() else None
    if fast is None:
        text = decode(path, data, _RUN.field_at)
        del data  # the exact reader holds the text alone
        fast = _run_fields(path, text)
    query_ids, q, doc_ids, d, scores, tag = fast
    if not query_ids:
        raise DataError(f"{path}: contains no results")
    dindex = dict(zip(doc_ids, range(len(doc_ids))))
    run = Run(query_ids, doc_ids, q, d, scores, name or tag, (), dindex)
    dup = run.first_duplicate()
    if dup is not None:
        text = decode(path, read_bytes(path))
        raise DataError(
            f"{path}:{_RUN.line_of_entry(text, dup)}: query {run.query_ids[run.q[dup]]!r} "
            f"retrieves doc {run.doc_ids[run.d[dup]]!r} twice"
        )
    return run


def _run_fields(path: Path, text: str) -> columns.RunColumns:
    """The exact reader: the text in slices of whole lines, so at most one slice's fields are
    alive as Python strings at a time; ids become integer codes as they are read."""
    qindex: dict[str, int] = {}
    dindex: dict[str, int] = {}
    q, d, scores = [], [], []
    tag = ""
    with _no_gc():
        for chunk in _line_slices(text, _CHUNK):
            try:
                tokens = _tokens(path, chunk, _RUN)
                raw = tokens[4::6]
                values = np.fromiter(map(float, raw), dtype=np.float64, count=len(raw))
            except (DataError, ValueError):
                _raise_first_bad_run_line(path, text)
            tag = tag or (tokens[5] if tokens else "")
            q.append(encode_runs(tokens[0::6], qindex))
            d.append(encode(tokens[2::6], dindex))
            scores.append(values)
    codes = [np.concatenate(c) if c else np.zeros(0, dtype=np.int64) for c in (q, d)]
    all_scores = np.concatenate(scores) if scores else np.zeros(0)
    return tuple(qindex), codes[0], tuple(dindex), codes[1], all_scores, tag


def _line_slices(text: str, size: int) -> Iterator[str]:
    """Consecutive slices of ``text`` of about ``size`` characters, each ending at a newline."""
    start = 0
    while start < len(text):
        end = text.find("\n", min(start + size, len(text)))
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def _raise_first_bad_run_line(path: Path, text: str) -> NoReturn:
    """The slow path: find the first line with a wrong field count or score, with its number."""
    for lineno, parts in _RUN.lines(text):
        _RUN.check(path, lineno, parts)
        if not _is_float(parts[4]):
            raise DataError(f"{path}:{lineno}: field 'score': {parts[4]!r} is not a number")
    raise AssertionError("unreachable: both paths parse fields the same way")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
                fh.write(f"{qid} Q0 {docid} {rank} {score!r} {run.name}\n")


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
    from rag_judge.data.sample import Context, Sample

    return [
        Sample(
            id=qid,
            contexts=tuple(Context(id=d, score=s) for d, s in docs),
            relevance={d: float(g) for d, g in qrels[qid].items()} if qid in qrels else None,
        )
        for qid, docs in run.ordered().items()
    ]
