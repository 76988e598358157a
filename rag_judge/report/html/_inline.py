"""The samples a report.html page holds inline, so the page stays small whatever the number of
samples: every sample's table row and details while they fit in :data:`SAMPLE_BUDGET` bytes;
past that, at most :data:`INLINE_ROWS` samples within the same budget, the most telling first
(where a metric failed, the lowest of each metric, the most uncertain judge verdicts, then a
seeded random draw of the rest), their long texts cut, and a banner saying how many of each the
page shows and where the rest is.

Kept apart from the page's assembly (``page.py``) because it is its own policy: a budget, a
ranking and a truncation that the page only places.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from markupsafe import Markup

from rag_judge.data.conversation import RetrievalStep, Turn
from rag_judge.report.format import short
from rag_judge.report.html._conversation_view import conversation_view
from rag_judge.report.html._jinja import sample_macros
from rag_judge.report.html._picks import Others, first_k
from rag_judge.report.html._sample_view import is_twin, not_retrieved, table_row
from rag_judge.report.html.charts import Bins, Scale, bin_blocks, bin_scores
from rag_judge.report.model import (
    BaseJudgment,
    Failure,
    FailureKind,
    MetricKind,
    PerContextJudgment,
    Report,
    SampleResult,
)
from rag_judge.report.result import UNIT_PREFIXES
from rag_judge.stats.pages import blocks

__all__ = ["INLINE_ROWS", "SAMPLE_BUDGET", "SEED", "Columns", "Inline", "inline_samples"]

# The page holds every sample's table row and details while they fit in SAMPLE_BUDGET bytes
# (UTF-8); past it, at most INLINE_ROWS samples within the same budget: up to _FAILED_ROWS
# where a metric failed, _WORST_ROWS lowest per metric and _UNCERTAIN_ROWS most uncertain judge
# verdicts (each shared among the metrics or rubrics: 3 to 50 each), then a random draw seeded
# with SEED. Their texts are cut at _CUT characters, their contexts and the relevant documents
# not retrieved listed up to _MAX_LISTED; a sample still larger than _MAX_SAMPLE is left out.
SAMPLE_BUDGET = 4_000_000
INLINE_ROWS = 1_000
SEED = 0
_FAILED_ROWS = 100
_WORST_ROWS = 200
_UNCERTAIN_ROWS = 100
_PER_METRIC = (3, 50)
_CUT = {"question": 500, "answer": 1_500, "reference": 1_000, "context": 300, "reason": 500}
_CUT_RAW = 1_000
_MAX_LISTED = 20
_MAX_SAMPLE = 60_000


class Columns:
    """Each metric's values over every sample, as float arrays (NaN where missing), for the
    histograms and the selection of samples: views of the index's columns, asked for each time
    and not kept (a run's columns map files: a column read is let go when its reader is done,
    not held with twenty others)."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._index = report.index()

    def column(self, metric: str) -> npt.NDArray[np.float64]:
        return self._index.column(metric)

    def bins(self, metric: str, scale: Scale) -> Bins:
        """The histogram of ``metric``'s values (a column in a file read a block at a time)."""
        if metric.startswith(UNIT_PREFIXES):  # scored per unit: every turn's or step's value
            units = self._report.column(metric).values()
            return bin_scores([v for v in units if v is not None], scale)
        return bin_blocks(lambda: (block for _, block in blocks(self.column(metric))), scale)


@dataclass(frozen=True)
class _Cut:
    """Why a sample is on a page that cannot hold every sample, and what its details leave out
    (``missed``: the relevant documents not retrieved that are listed)."""

    why: str
    more_contexts: int = 0
    missed: list[tuple[str, float]] = field(default_factory=list)
    more_missed: int = 0


@dataclass(frozen=True)
class Inline:
    """The sample table's rows and the samples' details as the page holds them; ``text`` says
    which samples a page that cannot hold every one shows, and why."""

    rows: Markup
    details: Markup
    shown: int
    text: str = ""
    indices: tuple[int, ...] = ()  # the samples the page holds, by their place in the report


@dataclass
class _Picks:
    """Samples in the order a page that cannot hold them all takes them: (index, stage, why)."""

    order: list[tuple[int, str, str]] = field(default_factory=list)
    failed: int = 0  # samples with a failed metric
    lowest: int = 0  # how many per metric
    uncertain: int = 0  # how many per rubric
    rest: int = 0  # samples the random draw was taken from


def inline_samples(
    report: Report, metrics: Sequence[str], scales: Mapping[str, Scale], columns: Columns
) -> Inline:
    """Every sample while their rows and details fit in :data:`SAMPLE_BUDGET` bytes, else the
    selection of :func:`_pick`, texts cut, within the same budget (in the report's order)."""
    macros = sample_macros()
    directions = {m: report.summary[m].direction for m in metrics}
    hidden = {m for m in report.summary if is_twin(m, report)}
    rows: list[str] = []
    dets: list[str] = []
    size = 0
    for r in report.samples:
        row = str(macros.row(table_row(r, metrics, scales, directions)))
        det = str(macros.details(r, None, conversation_view(r, hidden)))
        size += _size(row) + _size(det) + 2
        if size > SAMPLE_BUDGET:
            break
        rows.append(row)
        dets.append(det)
    else:
        return Inline(_lines(rows), _lines(dets), len(rows), indices=tuple(range(len(rows))))
    picks = _pick(report, metrics, columns)
    chosen: list[tuple[int, str, str, str]] = []
    size = 0
    for i, stage, why in picks.order:
        if len(chosen) == INLINE_ROWS:
            break
        r = report.samples[i]
        row = str(macros.row(table_row(r, metrics, scales, directions)))
        cut_r, cut = _cut_sample(r, why)
        det = str(macros.details(cut_r, cut, conversation_view(cut_r, hidden)))
        n = _size(row) + _size(det) + 2
        if n > _MAX_SAMPLE:
            continue
        if size + n > SAMPLE_BUDGET:
            break
        size += n
        chosen.append((i, stage, row, det))
    chosen.sort()
    counts = {stage: 0 for stage in ("failed", "lowest", "uncertain", "random")}
    for _, stage, _, _ in chosen:
        counts[stage] += 1
    return Inline(
        _lines(c[2] for c in chosen),
        _lines(c[3] for c in chosen),
        len(chosen),
        _inline_text(len(chosen), len(report.samples), counts, picks),
        tuple(c[0] for c in chosen),
    )


def _pick(report: Report, metrics: Sequence[str], columns: Columns) -> _Picks:
    """Samples for a page that cannot hold them all, most telling first, each once: up to
    ``_FAILED_ROWS`` where a metric failed (each metric's in turn), each metric's lowest values
    (the highest for a latency) and each judge rubric's most uncertain verdicts (the widest
    spread of sampled verdicts, else the least probable verdict), then a random draw seeded with
    :data:`SEED` from the others, enough to make :data:`INLINE_ROWS`."""
    index = report.index()
    picks = _Picks()
    taken: set[int] = set()

    def take(stage: str, ranked: Iterable[list[tuple[int, str]]], limit: int | None) -> None:
        count = 0
        for tier in zip_longest(*ranked):  # each list's first, then each list's second, ...
            for item in tier:
                if item is None or item[0] in taken:
                    continue
                if count == limit:
                    return
                taken.add(item[0])
                picks.order.append((item[0], stage, item[1]))
                count += 1

    failing: dict[str, list[tuple[int, str]]] = {}
    picks.failed = len({i for i, _, _ in index.failures})
    for i, m, failure in index.failures:
        if m not in report.summary or not is_twin(m, report):
            failing.setdefault(m, []).append((i, _failed(m, failure)))
    take("failed", failing.values(), _FAILED_ROWS)

    picks.lowest = _share(_WORST_ROWS, len(metrics))
    take("lowest", (_lowest(report, m, columns, picks.lowest) for m in metrics), None)

    rubrics = report.judge_rubrics()
    picks.uncertain = _share(_UNCERTAIN_ROWS, len(rubrics))
    take("uncertain", (_uncertain(report, m, picks.uncertain) for m in rubrics), None)

    rest = Others(len(index), taken)
    picks.rest = len(rest)
    draw = random.Random(SEED).sample(rest, max(min(len(rest), INLINE_ROWS - len(taken)), 0))
    picks.order += [(i, "random", "random") for i in draw]
    return picks


def _share(total: int, ways: int) -> int:
    low, high = _PER_METRIC
    return min(max(total // max(ways, 1), low), high)


def _failed(metric: str, failure: Failure) -> str:
    if failure.kind is FailureKind.UNSCORED:
        return f"{metric} unscored"
    if failure.kind is FailureKind.MISSING_INPUT:
        return f"{metric}: missing input"
    return f"{metric} failed"


def _lowest(report: Report, metric: str, columns: Columns, k: int) -> list[tuple[int, str]]:
    """The ``k`` samples with the lowest values of ``metric`` (the highest for a latency), the
    earliest first among ties."""
    high = report.summary[metric].kind is MetricKind.LATENCY
    column = columns.column(metric)
    order = first_k(((s, -b if high else b) for s, b in blocks(column)), k)
    why = f"{'highest' if high else 'lowest'} {metric}"
    return [(int(i), why) for i in order]


def _uncertain(report: Report, rubric: str, k: int) -> list[tuple[int, str]]:
    """The ``k`` verdicts of ``rubric`` with the widest spread of sampled verdicts, or (where
    none was sampled) the lowest probability of the most probable verdict; the earliest first
    among ties."""
    keys, spread = report.index().uncertainty(rubric)
    order = first_k(blocks(keys), k)
    out = []
    for i in order:
        key = float(keys[i])
        what = f"spread {short(-key, 2)}" if spread[i] else f"top verdict p={short(key + 1, 2)}"
        out.append((int(i), f"uncertain {rubric} ({what})"))
    return out


def _cut_sample(r: SampleResult, why: str) -> tuple[SampleResult, _Cut]:
    """``r`` with its long texts cut and its lists shortened, and what was left out."""
    cut = _Cut(why)
    s = r.sample
    if s is not None:
        missed = not_retrieved(s)  # from every context, before they are shortened
        cut = _Cut(
            why,
            more_contexts=max(len(s.contexts) - _MAX_LISTED, 0),
            missed=missed[:_MAX_LISTED],
            more_missed=max(len(missed) - _MAX_LISTED, 0),
        )
        contexts = tuple(
            c.model_copy(update={"text": _shorten(c.text, _CUT["context"])})
            for c in s.contexts[:_MAX_LISTED]
        )
        s = s.model_copy(
            update={
                "question": _shorten(s.question, _CUT["question"]),
                "answer": _shorten(s.answer, _CUT["answer"]),
                "references": tuple(
                    _shorten(ref, _CUT["reference"]) for ref in s.references[:_MAX_LISTED]
                ),
                "contexts": contexts,
                "turns": None if s.turns is None else tuple(_cut_turn(t) for t in s.turns),
            }
        )
    errors = {
        m: f.model_copy(update={"message": _shorten(f.message, _CUT["reason"])})
        for m, f in r.errors.items()
    }
    judgments = {m: _cut_judgment(j) for m, j in r.judgments.items()}
    update = {"sample": s, "errors": errors, "judgments": judgments}
    return r.model_copy(update=update), cut


def _cut_turn(turn: Turn) -> Turn:
    """A turn's texts cut as a sample's are, each retrieval's contexts listed up to
    ``_MAX_LISTED`` (a tool call's arguments and result are cut where the page draws them)."""
    steps = tuple(
        s.model_copy(
            update={
                "contexts": tuple(
                    c.model_copy(update={"text": _shorten(c.text, _CUT["context"])})
                    for c in s.contexts[:_MAX_LISTED]
                )
            }
        )
        if isinstance(s, RetrievalStep)
        else s
        for s in turn.steps
    )
    return turn.model_copy(
        update={
            "question": _shorten(turn.question, _CUT["question"]),
            "answer": _shorten(turn.answer, _CUT["answer"]),
            "references": tuple(_shorten(r, _CUT["reference"]) for r in turn.references),
            "steps": steps,
        }
    )


_J = TypeVar("_J", bound=BaseJudgment)


def _cut_judgment(j: _J) -> _J:
    update: dict[str, Any] = {
        "reason": _shorten(j.reason, _CUT["reason"]),
        "raw": _shorten(j.raw, _CUT_RAW),
    }
    if isinstance(j, PerContextJudgment):
        update["contexts"] = [_cut_judgment(c) for c in j.contexts[:_MAX_LISTED]]
    return j.model_copy(update=update)


def _shorten(text: str | None, limit: int) -> str | None:
    """``text`` up to ``limit`` characters, marked where it was cut with its full length."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… (truncated, {len(text):,} characters)"


def _inline_text(shown: int, total: int, counts: Mapping[str, int], picks: _Picks) -> str:
    """What a page that cannot hold every sample shows: how many of each kind, and where the
    rest is."""
    parts = []
    if counts["failed"]:
        failed = f"{counts['failed']:,} where a metric failed"
        parts.append(f"{failed} (of {picks.failed:,} such samples)")
    if counts["lowest"]:
        parts.append(
            f"{counts['lowest']:,} more among the {picks.lowest} lowest of each metric (the "
            "highest, for a latency)"
        )
    if counts["uncertain"]:
        parts.append(
            f"{counts['uncertain']:,} more among the {picks.uncertain} most uncertain verdicts "
            "of each judge rubric (the widest spread of sampled verdicts, or the least probable "
            "verdict)"
        )
    if counts["random"]:
        parts.append(
            f"{counts['random']:,} drawn at random (seed {SEED}) from the other {picks.rest:,}"
        )
    picked = "; ".join(parts[:-1]) + ("; and " if len(parts) > 1 else "") + "".join(parts[-1:])
    head = (
        f"Showing {shown:,} of {total:,} samples: all of them would make this page too large. "
        f"Shown, in the order they were picked: {picked}. Each sample's tag says why it is here."
    )
    if not parts:
        head = f"Showing none of {total:,} samples: each is too large for this page."
    elif shown == total:
        head = (
            f"Showing all {total:,} samples, but not in full: that would make this page too large."
        )
    return (
        f"{head} Long texts are cut where marked “truncated”: contexts at {_CUT['context']:,} "
        f"characters, answers at {_CUT['answer']:,}; at most {_MAX_LISTED} contexts a sample. "
        f"The summary, the distributions and the charts count all {total:,} samples; "
        "report.json holds every sample in full."
    )


def _size(text: str) -> int:
    """``text``'s length in UTF-8."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _lines(parts: Iterable[str]) -> Markup:
    return Markup("".join(f"{p}\n" for p in parts))  # each part is the macros' markup
