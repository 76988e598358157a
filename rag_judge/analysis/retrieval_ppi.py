"""Retrieval metrics from judge grades, corrected with human chunk grades (PPI++).

A retrieval evaluator with ``relevance_from`` scores a sample's ranking with the judge's
per-context grades. For each of its metrics with a cut-off (NDCG@k, P@k, R@k, ...), f_i is
the value the evaluator reported for sample i; on the labelled queries, Y_i is the same metric
of the same ranking under the human grades (a label line's ``relevance``), computed by the
same kernels with the same options. The PPI++ mean of Y, with the judge-only and labels-only
means beside it, is stored as the metric's estimate (``report.estimates['ndcg@5']``), and Y_i
as the sample's label of the metric, so gates and ``compare`` read them as a rubric's.

The human grades cover the top k chunks, k the deepest cut-off of the metrics corrected: a
metric without a cut-off (MRR, MAP), a count or a geometric mean is not corrected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rag_judge.analysis.ppi import paired_estimate
from rag_judge.analysis.relevance_labels import GRADES, ChunkGrades, by_rank
from rag_judge.data.chunks import Graded
from rag_judge.data.ranking import Rankings
from rag_judge.errors import DataError
from rag_judge.evaluators.base import Evaluator
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.judge.relevance import graded_by_judge
from rag_judge.metrics.retrieval import MetricSpec, compute, is_count, is_geometric, parse_metric
from rag_judge.report.model import (
    ChunkGrading,
    GradeConfusion,
    PPIEstimate,
    Report,
    ReportWarning,
    WarningKind,
)
from rag_judge.stats.ppi import PPIMethod

__all__ = [
    "RetrievalCorrection",
    "chunk_grading",
    "corrected_metrics",
    "judge_graded",
    "retrieval_corrections",
]

SCALE = (0.0, 1.0)
# Families whose value at k reads only the top k chunks; the others (recall, NDCG, F1, MAP@k)
# divide by what the whole retrieved list holds, so they need every retrieved chunk graded.
TOP_K_ONLY = frozenset({"precision", "hit_rate", "dcg", "mrr"})


@dataclass
class RetrievalCorrection:
    """What the human chunk grades give: the estimates by metric, each labelled sample's Y by
    metric, the grade confusion, and a warning for the queries left out."""

    estimates: dict[str, PPIEstimate] = field(default_factory=dict)
    labels: dict[str, dict[str, float]] = field(default_factory=dict)
    grades: dict[str, list[int]] = field(default_factory=dict)  # by rank, the first rubric's
    confusion: GradeConfusion | None = None
    warnings: list[ReportWarning] = field(default_factory=list)


def judge_graded(evaluators: Sequence[Evaluator]) -> list[RetrievalEvaluator]:
    """The retrieval evaluators graded by a judge (``relevance_from``)."""
    return [
        e for e in evaluators if isinstance(e, RetrievalEvaluator) and e.relevance_from is not None
    ]


def corrected_metrics(ev: RetrievalEvaluator) -> dict[str, MetricSpec]:
    """The evaluator's metrics a top-k grading corrects, by reported name: those with a
    cut-off, less judged@k (always 1 on a graded pool), counts and geometric means."""
    out = {}
    for name in ev.metric_names():
        spec = parse_metric(name.removeprefix(ev.name_prefix))
        if spec.k is None or spec.family == "judged" or is_count(spec) or is_geometric(spec):
            continue
        out[name] = spec
    return out


def chunk_grading(
    evaluators: Sequence[Evaluator], seed: int, human: Mapping[str, list[int]]
) -> ChunkGrading | None:
    """What the review mode needs to take chunk grades (the first judge-graded evaluator's
    rubric, the deepest cut-off a grading corrects), or None when no metric is corrected."""
    graded = [(ev, corrected_metrics(ev)) for ev in judge_graded(evaluators)]
    graded = [(ev, specs) for ev, specs in graded if specs and ev.relevance_from is not None]
    if not graded:
        return None
    depth = max(int(s.k) for _, specs in graded for s in specs.values() if s.k is not None)
    whole = any(s.family not in TOP_K_ONLY for _, specs in graded for s in specs.values())
    rubric = str(graded[0][0].relevance_from)
    return ChunkGrading(rubric=rubric, k=depth, whole=whole, seed=seed, human=dict(human))


def retrieval_corrections(
    report: Report,
    evaluators: Sequence[Evaluator],
    relevance: Mapping[str, ChunkGrades],
    *,
    confidence: float = 0.95,
    method: PPIMethod = PPIMethod.T,
) -> RetrievalCorrection:
    """The corrected metrics of every judge-graded retrieval evaluator, from ``relevance``."""
    out = RetrievalCorrection()
    if not relevance:
        return out
    matrix = [[0] * len(GRADES) for _ in GRADES]
    confused: set[str] = set()
    left_out: dict[str, str] = {}
    top_only: set[tuple[str, str]] = set()  # (query, metric) left out: only its top k graded
    rubric = None
    for ev in judge_graded(evaluators):
        specs = corrected_metrics(ev)
        if not specs:
            continue
        rubric = rubric or ev.relevance_from
        depth = int(max(s.k for s in specs.values() if s.k is not None))
        f_values: dict[str, dict[str, float]] = {m: {} for m in specs}
        human: dict[str, list[int]] = {}
        whole: set[str] = set()  # queries whose every retrieved chunk was graded
        for result in report.samples:
            sample = result.sample
            if sample is None or sample.has_judgments() or ev.relevance_from is None:
                continue  # graded by its own labels, not by the judge
            llm = graded_by_judge(sample, result.judgments.get(ev.relevance_from))
            if llm is None:
                continue
            for m in specs:
                value = result.scores.get(m)
                if value is not None and math.isfinite(value):
                    f_values[m][result.id] = value
            if result.id not in relevance:
                continue
            try:
                grades = by_rank(relevance[result.id], [c.id for c in sample.contexts], depth)
            except DataError as exc:
                left_out[result.id] = str(exc)
                continue
            human[result.id] = grades
            if len(grades) >= len(sample.contexts):
                whole.add(result.id)
            if ev.relevance_from == rubric and result.id not in out.grades:
                out.grades[result.id] = grades
            if ev.relevance_from == rubric and result.id not in confused:
                confused.add(result.id)
                for h, j in zip(grades, llm.ranked, strict=False):
                    matrix[h][int(j)] += 1
        y_values = _human_values(ev, specs, human)
        for m, spec in specs.items():
            if spec.family not in TOP_K_ONLY:
                y_values[m] = {sid: y for sid, y in y_values[m].items() if sid in whole}
                top_only.update((sid, m) for sid in human if sid not in whole)
        for m in specs:
            for sid, y in y_values[m].items():
                if sid in f_values[m]:
                    out.labels.setdefault(sid, {})[m] = y
            estimate = _estimate(m, f_values[m], y_values[m], confidence, method)
            if estimate is not None:
                out.estimates[m] = estimate
    if confused and rubric is not None:
        out.confusion = GradeConfusion(rubric=rubric, queries=len(confused), matrix=matrix)
    out.warnings = _left_out_warning(left_out) + _top_only_warning(top_only)
    return out


def _human_values(
    ev: RetrievalEvaluator, specs: Mapping[str, MetricSpec], human: Mapping[str, list[int]]
) -> dict[str, dict[str, float]]:
    """Each metric of each labelled query under the human grades: the kernels the evaluator
    runs, on the ranking graded by people (the ideal ranking is the graded chunks')."""
    if not human:
        return {m: {} for m in specs}
    queries = [Graded([float(g) for g in grades], [True] * len(grades), [float(g) for g in grades])
               for grades in human.values()]  # fmt: skip
    batch = Rankings.from_lists([q.ranked for q in queries], [q.ideal for q in queries],
                                [q.known for q in queries])  # fmt: skip
    values = compute(batch, specs.values(), ev.relevance_threshold, max_docs=ev.max_docs)
    return {
        m: {sid: float(v) for sid, v in zip(human, values[spec.name], strict=True)}
        for m, spec in specs.items()
    }


def _estimate(
    metric: str,
    f: Mapping[str, float],
    y: Mapping[str, float],
    confidence: float,
    method: PPIMethod,
) -> PPIEstimate | None:
    """The PPI++ estimate of ``metric`` beside the judge's and the labels' own, as a judge
    rubric's (``analysis.ppi.paired_estimate``); None without a labelled query."""
    if not any(sid in y for sid in f):
        return None
    return paired_estimate(metric, f, y, confidence, method, SCALE)


def _left_out_warning(left_out: Mapping[str, str]) -> list[ReportWarning]:
    if not left_out:
        return []
    first = next(iter(left_out.values()))
    return _partial(
        len(left_out),
        f"{len(left_out)} queries with human chunk grades were left out of the corrected "
        f"retrieval metrics, their grading incomplete (e.g. {first})",
    )


def _top_only_warning(top_only: set[tuple[str, str]]) -> list[ReportWarning]:
    """A warning for the queries whose people graded only the top k of more retrieved chunks:
    left out of the metrics that read the whole list (a relevant chunk below k that nobody
    graded would be missing from their ideal ranking, and Y would measure something else)."""
    if not top_only:
        return []
    queries = sorted({sid for sid, _ in top_only})
    metrics = sorted({m for _, m in top_only})
    return _partial(
        len(queries),
        f"{len(queries)} queries with human chunk grades graded only their top k of more "
        f"retrieved chunks (e.g. {queries[0]!r}): they are left out of {', '.join(metrics)}, "
        "which read every retrieved chunk (grade them all to use them there)",
    )


def _partial(count: int, what: str) -> list[ReportWarning]:
    """A ``partial_grades`` warning: ``what`` was left out, and why that matters."""
    message = (
        f"{what}; the estimates use the other labelled queries, which are then no longer "
        "quite a random subset."
    )
    warning = ReportWarning(
        kind=WarningKind.PARTIAL_GRADES, metric="relevance", value=count, threshold=0,
        message=message,
    )  # fmt: skip
    return [warning]
