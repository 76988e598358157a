"""Agreement with trec_eval (pytrec_eval) to 1e-9 on random qrels and runs with every edge case:
ties (also below float32 resolution), unjudged and negatively judged documents, all-zero
queries, empty rankings, and queries present on one side only."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval  # a dev dependency: the agreement tests must never skip silently

from rag_judge.data.ranking import Run, rankings_for
from rag_judge.data.trec import read_qrels, read_run, write_qrels, write_run
from rag_judge.metrics.retrieval import Rankings, compute

CUTS = (1, 3, 5, 10, 20)
# our metric -> pytrec_eval measure key
OURS_TO_TREC = {"map": "map", "mrr": "recip_rank", "ndcg": "ndcg", "r_precision": "Rprec"}
for _k in CUTS:
    OURS_TO_TREC |= {
        f"precision@{_k}": f"P_{_k}",
        f"recall@{_k}": f"recall_{_k}",
        f"map@{_k}": f"map_cut_{_k}",
        f"ndcg@{_k}": f"ndcg_cut_{_k}",
        f"hit_rate@{_k}": f"success_{_k}",
    }
CUT = ",".join(map(str, CUTS))
TREC_MEASURES = {
    "map", "recip_rank", "ndcg", "Rprec", f"P.{CUT}", f"recall.{CUT}", f"map_cut.{CUT}",
    f"ndcg_cut.{CUT}", f"success.{CUT}",
}  # fmt: skip


def random_collection(seed: int, n_queries: int = 60):
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(40)] + ["D7", "dé", "d-ü", "10", "9"]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        kind = rng.integers(0, 10)
        if kind != 0:  # kind 0: query only in the run
            judged = rng.choice(docs, size=rng.integers(1, 25), replace=False)
            grades = rng.choice([-1, 0, 0, 1, 1, 2, 3], size=len(judged))
            if kind == 1:
                grades[:] = 0  # judged, nothing relevant
            grades[0] = max(grades[0], 0)  # pytrec_eval misbehaves on all-negative queries
            qrels[qid] = {str(d): int(g) for d, g in zip(judged, grades)}
        if kind == 2:
            continue  # query only in the qrels
        depth = 0 if kind == 3 else int(rng.integers(1, 30))
        retrieved = rng.choice(docs, size=depth, replace=False)
        pool = [1.0, 0.5, 0.25, 1.0 + 1e-12, 1.0 + 6e-8, -2.0, 3e9, 3e9 + 1]
        scores = rng.choice(pool + list(rng.normal(size=4)), size=depth)
        run[qid] = {str(d): float(s) for d, s in zip(retrieved, scores)}
    return qrels, run


def trec_eval(qrels, run, level=1):
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=level)
    return evaluator.evaluate(run)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("join", ["dense", "search"])
def test_equal_to_pytrec_eval(seed: int, level: int, join: str, monkeypatch) -> None:
    if join == "search":  # the binary-search join used for huge key spaces or odd grades
        monkeypatch.setattr("rag_judge.data.ranking._DENSE_LIMIT", 0)
    qrels, run = random_collection(seed)
    expected = trec_eval(qrels, run, level)
    qids, rankings = rankings_for(qrels, Run.from_dict(run))
    assert sorted(qids) == sorted(expected)
    got = compute(rankings, list(OURS_TO_TREC), threshold=level)
    for ours, theirs in OURS_TO_TREC.items():
        for i, q in enumerate(qids):
            assert got[ours][i] == pytest.approx(expected[q][theirs], abs=1e-9), (ours, q)


def test_same_numbers_through_trec_files(tmp_path: Path) -> None:
    qrels, run = random_collection(11)
    write_qrels(qrels, tmp_path / "qrels.txt")
    run.pop("q3", None)
    for q in [q for q, d in run.items() if not d]:
        del run[q]  # a TREC file cannot hold an empty ranking
    write_run(Run.from_dict(run), tmp_path / "run.txt")
    expected = trec_eval(qrels, run)
    qids, rankings = rankings_for(
        read_qrels(tmp_path / "qrels.txt"), read_run(tmp_path / "run.txt")
    )
    got = compute(rankings, ["ndcg@10", "map", "precision@5"])
    for i, q in enumerate(qids):
        assert got["ndcg@10"][i] == pytest.approx(expected[q]["ndcg_cut_10"], abs=1e-9)
        assert got["map"][i] == pytest.approx(expected[q]["map"], abs=1e-9)
        assert got["precision@5"][i] == pytest.approx(expected[q]["P_5"], abs=1e-9)


def test_zero_missing_counts_qrels_queries_absent_from_the_run() -> None:
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}}
    run = Run.from_dict({"a": {"d1": 1.0}})
    assert rankings_for(qrels, run)[0] == ["a"]
    qids, rankings = rankings_for(qrels, run, zero_missing=True)
    assert qids == ["a", "b"]
    assert compute(rankings, ["map"])["map"].tolist() == [1.0, 0.0]


def test_float32_ties_break_by_doc_id_descending() -> None:
    # 1 + 1e-12 equals 1 in float32, so trec_eval orders d9 before d10 (strcmp, descending).
    run = Run.from_dict({"q": {"d10": 1.0 + 1e-12, "d9": 1.0, "d2": 1.0}})
    assert [d for d, _ in run.ordered()["q"]] == ["d9", "d2", "d10"]


def reference_ndcg_exp(grades: list[float], judged: list[float], k: int) -> float:
    def dcg(gs: list[float]) -> float:
        return sum((2.0**g - 1.0) / math.log2(i + 2) for i, g in enumerate(gs[:k]) if g > 0)

    ideal = dcg(sorted(judged, reverse=True))
    return dcg(grades) / ideal if ideal > 0 else 0.0


@pytest.mark.parametrize("seed", range(4))
def test_ndcg_exp_against_an_independent_implementation(seed: int) -> None:
    qrels, run = random_collection(seed)
    qids, rankings = rankings_for(qrels, Run.from_dict(run))
    ordered = Run.from_dict(run).ordered()
    got = compute(rankings, ["ndcg_exp@5", "ndcg_exp@20"])
    for i, q in enumerate(qids):
        grades = [float(qrels[q].get(d, 0)) for d, _ in ordered.get(q, [])]
        judged = [float(g) for g in qrels[q].values()]
        for k in (5, 20):
            want = reference_ndcg_exp(grades, judged, k)
            assert got[f"ndcg_exp@{k}"][i] == pytest.approx(want, abs=1e-12)


def test_batch_padding_does_not_change_a_query() -> None:
    one = Rankings.from_lists([[1, 0, 2]], [[1, 2, 3]])
    padded = Rankings.from_lists([[1, 0, 2], list(range(50))], [[1, 2, 3], [1] * 60])
    for metric in ["ndcg", "map", "mrr", "r_precision", "precision@10"]:
        assert compute(one, [metric])[metric][0] == compute(padded, [metric])[metric][0]


@pytest.mark.parametrize("seed", range(5))
def test_order_matches_a_plain_sort(seed: int) -> None:
    """Grouped, shuffled, tied: the vectorised order equals sorting each query in Python."""
    rng = np.random.default_rng(seed)
    entries = [
        (f"q{rng.integers(0, 5)}", f"d{i}", float(rng.choice([0.5, 0.25, 1.0, rng.random()])))
        for i in rng.permutation(200)
    ]
    if seed % 2:  # grouped by query, as files usually are
        entries.sort(key=lambda e: e[0])
    run = Run.from_columns(*zip(*entries))
    want: dict[str, list[tuple[str, float]]] = {}
    for q, d, s in entries:
        want.setdefault(q, []).append((d, s))
    for q, docs in want.items():
        docs.sort(key=lambda ds: (np.float32(ds[1]), ds[0]), reverse=True)
        assert run.ordered()[q] == docs
