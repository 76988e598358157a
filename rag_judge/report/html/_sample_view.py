"""The samples as report.html draws them: the sample table's columns (which metrics, grouped by
kind) and rows (cells shaded on each metric's scale), and what a sample's details add to its
scores (each context's gold grade, the relevant documents not retrieved).

A sample with a grounding judgment shows its answer cut into pieces at the claims the judge
found in it (:func:`grounding_view`), each claim marked with its verdict, and its failures apart
from the metrics that do not apply to it (:func:`failures`).

Plain values computed from the Report, kept apart from the page's assembly (``page.py``) because
the template's environment (``_jinja.py``) and the selection of the samples a large page holds
(``_inline.py``) use them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_judge.data.sample import Context, Sample
from rag_judge.report.format import MISSING
from rag_judge.report.html.charts import Scale
from rag_judge.report.model import (
    CLAIM_VERDICTS,
    GROUNDING,
    UNCHECKED,
    BaseJudgment,
    ClaimJudgment,
    Direction,
    Failure,
    FailureKind,
    GroundingJudgment,
    Judgment,
    MetricKind,
    Report,
    RubricJudgment,
    SampleResult,
)

__all__ = [
    "GROUNDING",
    "UNJUDGED",
    "Cell",
    "ClaimView",
    "GroundingView",
    "Piece",
    "Row",
    "column_groups",
    "context_grades",
    "failures",
    "grounding_view",
    "is_twin",
    "judgment_state",
    "not_retrieved",
    "part_label",
    "table_row",
]

UNJUDGED = "unjudged"
# The sample table's column groups, in order: answer quality first, so a judge's scores are
# not off-screen behind a score of retrieval columns.
_GROUPS: tuple[tuple[str, frozenset[MetricKind]], ...] = (
    ("judge", frozenset({MetricKind.JUDGE})),
    ("generation", frozenset({MetricKind.LEXICAL, MetricKind.EMBEDDING})),
    ("retrieval", frozenset({MetricKind.RETRIEVAL})),
    ("tools", frozenset({MetricKind.TOOLS})),
    ("other", frozenset({MetricKind.LATENCY, MetricKind.CUSTOM})),
)


def is_twin(metric: str, report: Report) -> bool:
    """A judge's normalised twin restates its rubric on [0, 1]; the page shows one of them."""
    normalises = report.summary[metric].normalises
    return normalises is not None and normalises in report.summary


def column_groups(report: Report, metrics: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``metrics`` grouped by kind for the sample table (judge, generation: lexical and
    embedding, retrieval, tools, other), each group in summary order; empty groups left out."""
    groups = [
        (label, [m for m in metrics if report.summary[m].kind in kinds]) for label, kinds in _GROUPS
    ]
    return [(label, ms) for label, ms in groups if ms]


def context_grades(sample: Sample) -> list[tuple[Context, float | None]]:
    """Each retrieved context with its gold grade: its own ``relevance``, else the sample's
    ``relevance`` table's grade for its id; None (unjudged) when neither has one."""
    table = sample.relevance or {}
    out: list[tuple[Context, float | None]] = []
    for ctx in sample.contexts:
        grade = ctx.relevance
        if grade is None and ctx.id is not None:
            grade = table.get(ctx.id)
        out.append((ctx, grade))
    return out


def not_retrieved(sample: Sample) -> list[tuple[str, float]]:
    """Judged-relevant documents (grade > 0 in the sample's ``relevance`` table) that are not
    among the retrieved contexts, highest grade first."""
    retrieved = {c.id for c in sample.contexts if c.id is not None}
    missed = [(d, g) for d, g in (sample.relevance or {}).items() if g > 0 and d not in retrieved]
    return sorted(missed, key=lambda p: -p[1])


# How a judgment without a score reads, by the failure of the metric it scores: n/a and a
# missing input are not a judge's unreadable reply (CSS class "na": neutral; "bad": a failure).
_NO_SCORE = {
    FailureKind.NOT_APPLICABLE: ("n/a", "na"),
    FailureKind.MISSING_INPUT: ("missing input", "bad"),
    FailureKind.ERROR: ("error", "bad"),
    FailureKind.UNSCORED: ("unscored", "bad"),
}


def judgment_state(r: SampleResult, rubric: str, j: Judgment) -> tuple[str, str]:
    """What the judgments table shows for ``j``, a judgment of ``r`` under ``rubric`` without a
    score, and its CSS class: read from the failure of the metric it scores (the grounding
    judgment scores ``claim_support``); ``unscored`` where no failure says otherwise (a jury's
    judge or a context's judgment, which have no metric of their own)."""
    failure = r.errors.get("claim_support" if rubric == GROUNDING else rubric)
    if isinstance(j, GroundingJudgment) and j.abstained:
        return _NO_SCORE[FailureKind.NOT_APPLICABLE]  # no claims to score, whatever the metric
    return _NO_SCORE[failure.kind] if failure is not None else _NO_SCORE[FailureKind.UNSCORED]


def part_label(j: BaseJudgment) -> str:
    """How the judgments table names one part of a judgment: a jury's verdict by its judge,
    a context's verdict by its rank and id."""
    if j.judge:
        return f"judge {j.judge}"
    rank = j.rank if isinstance(j, RubricJudgment) else None
    context = j.id if isinstance(j, RubricJudgment) else None
    return f"rank {rank if rank is not None else '?'} · {context or MISSING}"


def failures(r: SampleResult) -> tuple[dict[str, Failure], dict[str, Failure]]:
    """``r``'s failures, and apart from them the metrics that do not apply to it (which are
    not failures: an abstention has no claims to check)."""
    failed = {m: f for m, f in r.errors.items() if f.counts}
    return failed, {m: f for m, f in r.errors.items() if not f.counts}


@dataclass(frozen=True)
class ClaimView:
    """One claim as the page lists it: ``n`` its 1-based place in the judge's list, ``css``
    its verdict as a class name, ``detail`` the reason, the contexts behind the verdict and
    the ranks cited, on one line; ``located`` whether it is marked in the answer shown."""

    n: int
    text: str
    verdict: str
    css: str
    detail: str
    located: bool

    @property
    def title(self) -> str:
        """The mark's tooltip: the verdict and the detail."""
        return f"claim {self.n}: {self.verdict}" + (f" · {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class Piece:
    """A run of the answer's text: a claim's (marked) or the text between claims."""

    text: str
    claim: ClaimView | None = None


@dataclass(frozen=True)
class GroundingView:
    """A sample's grounding judgment as the page draws it: the answer in pieces (empty
    without an answer), every claim in the judge's order, and whether the answer abstains."""

    abstained: bool
    pieces: list[Piece]
    claims: list[ClaimView]


def grounding_view(r: SampleResult) -> GroundingView | None:
    """``r``'s grounding judgment for the page, or None when it has none. A claim is marked
    in the answer where its span holds its very text (a span past the answer shown, cut on a
    large page, or overlapping an earlier claim's, is not), else only listed."""
    j = r.judgments.get(GROUNDING)
    if not isinstance(j, GroundingJudgment) or (j.claims is None and j.abstained is None):
        return None
    answer = (r.sample.answer if r.sample is not None else None) or ""
    claims = j.claims or []
    spans: dict[int, tuple[int, int]] = {}  # claim index -> its span, in the answer's order
    end = 0
    for i in sorted(range(len(claims)), key=lambda i: claims[i].span or (-1, -1)):
        span = claims[i].span
        if span is None or not end <= span[0] < span[1] <= len(answer):
            continue
        if answer[span[0] : span[1]] == claims[i].text:
            spans[i], end = span, span[1]
    views = [_claim_view(n, c, n - 1 in spans) for n, c in enumerate(claims, 1)]
    pieces: list[Piece] = []
    at = 0
    for i, (a, b) in spans.items():
        if a > at:
            pieces.append(Piece(answer[at:a]))
        pieces.append(Piece(answer[a:b], views[i]))
        at = b
    if at < len(answer):
        pieces.append(Piece(answer[at:]))
    return GroundingView(bool(j.abstained), pieces, views)


def _claim_view(n: int, c: ClaimJudgment, located: bool) -> ClaimView:
    # each verdict is a CSS class of its mark (unchecked: drawn neutrally, never as a verdict);
    # anything else read from a file: "other"
    css = c.verdict if c.verdict in (*CLAIM_VERDICTS, UNCHECKED) else "other"
    parts = [c.reason] if c.reason else []
    if c.support:
        by = "contradicted by" if c.verdict == "contradicted" else "supported by"
        parts.append(f"{by} {_ranks(c.support, c.support_ids)}")
    elif c.verdict == "supported":
        parts.append("no supporting context named")
    if c.cited is not None:
        retrieved = [r for r in c.cited if r > 0]
        cites = f"cites {_ranks(retrieved, None)}" if retrieved else ""
        outside = len(c.cited) - len(retrieved)
        if outside:
            what = "a context that was" if outside == 1 else f"{outside} contexts that were"
            cites += (" and " if cites else "cites ") + f"{what} not retrieved"
        parts.append(cites or "no citation")
    return ClaimView(n, c.text, c.verdict, css, " · ".join(parts), located)


def _ranks(ranks: Sequence[int], ids: Sequence[str | None] | None) -> str:
    """``context 2`` or ``contexts 1 (d1), 3 (d7)``: ranks with their ids where known."""
    named = [
        f"{r} ({ids[k]})" if ids is not None and k < len(ids) and ids[k] else str(r)
        for k, r in enumerate(ranks)
    ]
    return ("context " if len(named) == 1 else "contexts ") + ", ".join(named)


@dataclass(frozen=True)
class Cell:
    value: float | None
    failed: bool
    shade: int
    na: bool = False  # the metric does not apply to the sample


@dataclass(frozen=True)
class Row:
    id: str
    err: int
    cells: list[Cell]


def table_row(
    r: SampleResult,
    metrics: Sequence[str],
    scales: Mapping[str, Scale],
    directions: Mapping[str, Direction],
) -> Row:
    """``r``'s row of the sample table: a cell per metric, shaded in fifths of its scale, the
    darker the better: mirrored for a metric whose direction is ``lower`` (a contradiction
    rate of 1 is the palest), unshaded for a neutral one and on an unbounded scale."""
    cells = [_cell(r.scores.get(m), scales[m], directions[m], r.errors.get(m)) for m in metrics]
    return Row(r.id, int(any(f.counts for f in r.errors.values())), cells)


def _cell(value: float | None, scale: Scale, direction: Direction, failure: Failure | None) -> Cell:
    shade = 0
    if value is not None and scale.hi is not None and direction is not Direction.NEUTRAL:
        frac = (value - scale.lo) / ((scale.hi - scale.lo) or 1.0)
        shade = min(max(int(frac * 5), 0), 4)
        shade = 4 - shade if direction is Direction.LOWER else shade
    na = failure is not None and not failure.counts
    return Cell(value, failure is not None and failure.counts, shade, na)
