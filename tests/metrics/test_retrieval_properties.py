"""Invariants of the retrieval kernels, checked with hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.metrics.retrieval import Rankings, compute

BOUNDED = [
    "precision@3", "recall@3", "f1@3", "hit_rate@3", "mrr", "mrr@2", "map", "map@4",
    "r_precision", "ndcg", "ndcg@3", "ndcg_exp", "ndcg_exp@5",
]  # fmt: skip
grade = st.integers(min_value=-1, max_value=3)


@st.composite
def query(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """A ranking's grades and the query's judged grades (retrieved judged docs included)."""
    ranked = draw(st.lists(grade, max_size=12))
    extra = draw(st.lists(grade, max_size=8))
    judged = [g for g in ranked if draw(st.booleans()) or g > 0] + extra
    return ranked, judged


@given(st.lists(query(), min_size=1, max_size=6), st.sampled_from([1, 2, 3]))
@settings(max_examples=200, deadline=None)
def test_scores_lie_in_unit_interval(queries, threshold: int) -> None:
    batch = Rankings.from_lists([q[0] for q in queries], [q[1] for q in queries])
    for metric, values in compute(batch, BOUNDED, threshold).items():
        assert np.all((values >= 0) & (values <= 1 + 1e-12)), metric


@given(st.lists(st.integers(0, 3), min_size=1, max_size=12).filter(lambda g: max(g) > 0))
@settings(max_examples=100, deadline=None)
def test_ideal_ranking_gives_ndcg_one(grades: list[int]) -> None:
    ideal = sorted(grades, reverse=True)
    out = compute(Rankings.from_lists([ideal], [grades]), ["ndcg", "ndcg@3", "ndcg_exp@5"])
    for metric, values in out.items():
        assert values[0] == pytest.approx(1.0), metric


@given(query(), st.data())
@settings(max_examples=200, deadline=None)
def test_moving_a_non_relevant_doc_below_all_relevant_never_lowers_a_score(q, data) -> None:
    ranked, judged = q
    zeros = [i for i, g in enumerate(ranked) if g <= 0]
    positives = [i for i, g in enumerate(ranked) if g > 0]
    if not zeros or not positives:
        return
    i = data.draw(st.sampled_from(zeros))
    last = max(positives)
    if i > last:
        return
    moved = ranked[:i] + ranked[i + 1 : last + 1] + [ranked[i]] + ranked[last + 1 :]
    before = compute(Rankings.from_lists([ranked], [judged]), BOUNDED)
    after = compute(Rankings.from_lists([moved], [judged]), BOUNDED)
    for metric in BOUNDED:
        assert after[metric][0] >= before[metric][0] - 1e-12, metric


@given(st.lists(query(), min_size=1, max_size=8))
@settings(max_examples=100, deadline=None)
def test_batch_mean_equals_mean_of_single_query_calls(queries) -> None:
    metrics = [*BOUNDED, "dcg@5", "idcg"]
    batch = compute(Rankings.from_lists([q[0] for q in queries], [q[1] for q in queries]), metrics)
    for metric in metrics:
        singles = [compute(Rankings.from_lists([r], [j]), [metric])[metric][0] for r, j in queries]
        assert batch[metric].mean() == pytest.approx(np.mean(singles), abs=1e-12), metric
