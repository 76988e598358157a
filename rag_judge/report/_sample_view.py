"""The samples as report.html draws them: the sample table's columns (which metrics, grouped by
kind) and rows (cells shaded on each metric's scale), and what a sample's details add to its
scores (each context's gold grade, the relevant documents not retrieved).

Plain values computed from the Report, kept apart from the page's assembly (``html.py``) because
the template's environment (``_jinja.py``) and the selection of the samples a large page holds
(``_inline.py``) use them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_judge.data.sample import Context, Sample
from rag_judge.report.charts import Scale
from rag_judge.report.model import MetricKind, Report, SampleResult

__all__ = [
    "UNJUDGED",
    "Cell",
    "Row",
    "column_groups",
    "context_grades",
    "is_twin",
    "not_retrieved",
    "table_row",
]

UNJUDGED = "unjudged"
# The sample table's column groups, in order: answer quality first, so a judge's scores are
# not off-screen behind a score of retrieval columns.
_GROUPS: tuple[tuple[str, frozenset[MetricKind]], ...] = (
    ("judge", frozenset({MetricKind.JUDGE})),
    ("generation", frozenset({MetricKind.LEXICAL, MetricKind.EMBEDDING})),
    ("retrieval", frozenset({MetricKind.RETRIEVAL})),
    ("other", frozenset({MetricKind.LATENCY, MetricKind.CUSTOM})),
)


def is_twin(metric: str, report: Report) -> bool:
    """A judge's normalised twin restates its rubric on [0, 1]; the page shows one of them."""
    normalises = report.summary[metric].normalises
    return normalises is not None and normalises in report.summary


def column_groups(report: Report, metrics: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``metrics`` grouped by kind for the sample table (judge, generation: lexical and
    embedding, retrieval, other), each group in summary order; empty groups left out."""
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


@dataclass(frozen=True)
class Cell:
    value: float | None
    failed: bool
    shade: int


@dataclass(frozen=True)
class Row:
    id: str
    err: int
    cells: list[Cell]


def table_row(r: SampleResult, metrics: Sequence[str], scales: Mapping[str, Scale]) -> Row:
    """``r``'s row of the sample table: a cell per metric, shaded in fifths of its scale."""
    cells = [_cell(r.scores.get(m), scales[m], m in r.errors) for m in metrics]
    return Row(r.id, int(bool(r.errors)), cells)


def _cell(value: float | None, scale: Scale, failed: bool) -> Cell:
    frac = 0.0
    if value is not None and scale.hi is not None:
        frac = (value - scale.lo) / ((scale.hi - scale.lo) or 1.0)
    return Cell(value, failed, min(max(int(frac * 5), 0), 4))
