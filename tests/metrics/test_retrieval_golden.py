"""The seed documents' worked numbers (../shared/seeds/README.md), through the Python API."""

from __future__ import annotations

import pytest

from rag_judge.metrics.retrieval import Rankings, compute

# (grades in rank order, {metric: value}) — IDCG comes from the same judged grades.
GRADED = [
    ([3, 2, 0, 1], {"dcg@4": 4.6925, "idcg@4": 4.7619, "ndcg@4": 0.985442}),  # seed 000
    ([1, 3, 0, 2, 2], {"dcg@5": 4.5278, "idcg@5": 5.6925, "ndcg@5": 0.795401}),  # seed 002
    ([3, 2, 3, 0, 1], {"dcg@5": 6.1487, "idcg@5": 6.3235, "ndcg@5": 0.972364}),  # seed 003
    ([3, 2, 3, 0, 1], {"ndcg_exp@5": 0.957478}),  # seed 004, exponential gain
    (
        [5, 3, 5, 0, 2],  # seed 001
        {
            "dcg@3": 9.3928,
            "dcg@5": 10.1665,
            "idcg@3": 9.6546,
            "idcg@5": 10.5160,
            "ndcg@3": 0.972877,
            "ndcg@5": 0.966764,
        },
    ),
]


@pytest.mark.parametrize(("grades", "expected"), GRADED)
def test_graded_seed_numbers(grades: list[int], expected: dict[str, float]) -> None:
    got = compute(Rankings.from_lists([grades], [grades]), expected)
    for metric, value in expected.items():
        assert got[metric][0] == pytest.approx(value, abs=5e-5), metric


def test_exponential_gain_dcg_of_seed_004() -> None:
    # 004 works DCG and IDCG with gain 2^g - 1: 12.7796 / 13.3472.
    grades = [3, 2, 3, 0, 1]
    ndcg = compute(Rankings.from_lists([grades], [grades]), ["ndcg_exp@5"])["ndcg_exp@5"][0]
    assert ndcg == pytest.approx(12.7796 / 13.3472, abs=1e-5)


# Seed 001, binary: relevant at ranks 1, 3, 5 of the top 5; the query has 10 relevant documents.
BINARY = Rankings.from_lists([[1, 0, 1, 0, 1]], [[1] * 10])


@pytest.mark.parametrize(
    ("metric", "value"),
    [
        ("precision@2", 0.5),
        ("recall@3", 0.2),
        ("precision@3", 2 / 3),  # erratum: the document writes 0.5
        ("f1@3", 0.307692),  # erratum: follows from the corrected precision
        ("map", (1 + 2 / 3 + 3 / 5) / 10),
    ],
)
def test_binary_seed_numbers(metric: str, value: float) -> None:
    assert compute(BINARY, [metric])[metric][0] == pytest.approx(value, abs=1e-6)


def test_ap_with_relevant_at_first_three_ranks() -> None:
    ranked = Rankings.from_lists([[1, 1, 1]], [[1] * 10])
    assert compute(ranked, ["map"])["map"][0] == pytest.approx(0.3)


def test_mrr_over_two_queries() -> None:
    batch = Rankings.from_lists([[1, 0, 0], [0, 1, 0]], [[1], [1]])
    assert compute(batch, ["mrr"])["mrr"].mean() == pytest.approx(0.75)


def test_all_zero_ideal_gives_zero_ndcg() -> None:  # seed 004
    out = compute(Rankings.from_lists([[0, 0, 0]], [[0, 0]]), ["ndcg@3", "ndcg_exp@3", "ndcg"])
    assert all(v[0] == 0.0 for v in out.values())


def test_k_beyond_the_list_counts_only_what_was_retrieved() -> None:  # seed 003's code
    grades = [3, 2, 3, 0, 1]
    out = compute(Rankings.from_lists([grades], [grades]), ["dcg@5", "dcg@50", "ndcg@50"])
    assert out["dcg@50"][0] == out["dcg@5"][0]
    assert out["ndcg@50"][0] == pytest.approx(0.972364, abs=5e-7)
    # precision@k still divides by k, as trec_eval does
    p = compute(Rankings.from_lists([[1, 1]], [[1, 1]]), ["precision@4"])["precision@4"][0]
    assert p == 0.5
