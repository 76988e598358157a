"""trec_eval's further measures (bpref, infAP, iprec_at_recall, 11pt_avg, set_*, gm_map,
Rprec_mult, counts) equal to pytrec_eval to 1e-12 per query and in the all-queries value, at
relevance levels 1 and 2 and under -M, on the random collections of the agreement test (ties,
unjudged documents, grade -1 = in the pool but unjudged, all-zero queries); judged@k by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.data.ranking import Run, rankings_for
from rag_judge.errors import ConfigError
from rag_judge.metrics.retrieval import (
    Rankings,
    aggregate,
    compute,
    is_geometric,
    parse_metric,
    uses_threshold,
)
from tests.metrics.test_retrieval_trec_eval import random_collection

LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
OURS = {
    "bpref": "bpref",
    "infap": "infAP",
    "11pt_avg": "11pt_avg",
    "set_precision": "set_P",
    "set_recall": "set_recall",
    "set_f1": "set_F",
    "gm_map": "gm_map",
    "num_rel": "num_rel",
    "num_rel_ret": "num_rel_ret",
    "num_ret": "num_ret",
    **{f"iprec@{x:g}": f"iprec_at_recall_{x:.2f}" for x in LEVELS},
    **{f"rprec_mult@{x:g}": f"Rprec_mult_{x:.2f}" for x in MULTS},
}
MEASURES = {
    "bpref", "infAP", "11pt_avg", "set_P", "set_recall", "set_F", "gm_map", "num_rel",
    "num_rel_ret", "num_ret", "iprec_at_recall", "Rprec_mult",
}  # fmt: skip


def top(run: dict[str, dict[str, float]], m: int | None) -> dict[str, dict[str, float]]:
    """The run cut to its top m per query in trec_eval order: what trec_eval -M m reads."""
    if m is None:
        return run
    ordered = Run.from_dict(run).ordered()
    return {q: dict(ordered.get(q, [])[:m]) for q in run}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("max_docs", [None, 1, 5])
def test_equal_to_pytrec_eval(seed: int, level: int, max_docs: int | None) -> None:
    qrels, run = random_collection(seed)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, MEASURES, relevance_level=level)
    expected = evaluator.evaluate(top(run, max_docs))
    qids, rankings = rankings_for(qrels, Run.from_dict(run))
    assert sorted(qids) == sorted(expected)
    got = compute(rankings, list(OURS), threshold=level, max_docs=max_docs)
    for ours, theirs in OURS.items():
        want = [expected[q][theirs] for q in qids]
        # trec_eval divides 0 by 0 for iprec@0 (and so 11pt_avg) of an empty ranking: NaN;
        # an empty ranking has no precision to interpolate, so rag-judge says 0
        empty = [not run.get(q) for q in qids]
        assert all(e for w, e in zip(want, empty, strict=True) if math.isnan(w)), ours
        want = [0.0 if math.isnan(w) else w for w in want]
        np.testing.assert_allclose(got[ours], want, rtol=0, atol=1e-12, err_msg=ours)
        # trec_eval's all-queries line as pytrec_eval aggregates it: the mean, exp of the mean
        # log AP for gm_map, the sum of the counts (num_ret all 1500, not 500)
        assert aggregate(ours, got[ours]) == pytest.approx(
            pytrec_eval.compute_aggregated_measure(theirs, want), rel=1e-12, abs=1e-12
        ), ours


def test_bpref_and_infap_by_hand() -> None:
    # ranked: unjudged, rel, judged nonrel, pooled-unjudged (-1), rel; R = 3, N = 1
    rankings = Rankings.from_lists(
        [[0, 1, 0, -1, 2]], [[1, 2, 3, 0, -1]], [[False, True, True, True, True]]
    )
    got = compute(rankings, ["bpref", "infap", "map"])
    assert got["bpref"][0] == pytest.approx((1 + (1 - 1 / 1)) / 3)
    eps = 0.00001
    second = 1 / 5 + (4 / 5) * ((2 - 1 + 1 + 1) / 4) * ((2 - 1 + eps) / (2 - 1 + 1 + 2 * eps))
    # infAP's first relevant is at j = 1: 1/2 + (1/2) * (0 / 1) * (...) = 1/2
    assert got["infap"][0] == pytest.approx((0.5 + second) / 3, abs=1e-15)
    assert got["map"][0] == pytest.approx((1 / 2 + 2 / 5) / 3)


def test_judged_at_k_by_hand() -> None:
    rankings = Rankings.from_lists(
        [[1, 0, 0, 2], [0, 0], []],
        [[1, 2], [1], [1]],
        [[True, False, True, True], [False, False], []],
    )
    got = compute(rankings, ["judged@2", "judged@3", "judged@10"])
    assert got["judged@2"].tolist() == [0.5, 0.0, 0.0]
    assert got["judged@3"].tolist() == [2 / 3, 0.0, 0.0]
    assert got["judged@10"].tolist() == [0.75, 0.0, 0.0]  # a short ranking is not penalised
    # without a mask every ranked document is judged
    plain = Rankings.from_lists([[1, 0]], [[1]])
    assert compute(plain, ["judged@5"])["judged@5"].tolist() == [1.0]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("iprec@1.5", r"recall level must be in \[0, 1\]"),
        ("iprec", "needs a parameter"),
        ("rprec_mult@0", "multiple of R must be > 0"),
        ("rprec_mult@x", "multiple of R must be > 0"),
        ("judged", "needs a cut-off"),
        ("bpref@10", "takes no cut-off"),
        ("gm_map@5", "takes no cut-off"),
    ],
)
def test_bad_names_are_named(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_metric(name)


def test_canonical_names() -> None:
    assert parse_metric("IPREC@0.10").name == "iprec@0.1"
    assert parse_metric("rprec_mult@2").name == "rprec_mult@2"
    assert parse_metric("11pt_avg").name == "11pt_avg"
    assert compute(Rankings.from_lists([[1]], [[1]]), ["iprec@0.10"]).keys() == {"iprec@0.1"}


def test_a_query_judged_only_negatively_is_evaluated() -> None:
    # pytrec_eval answers zeros or crashes here (trec_eval sizes its grade table by the top
    # grade), so the random collections avoid it; rag-judge evaluates it as nothing relevant.
    qids, rankings = rankings_for(
        {"a": {"d1": -1, "d2": -2}}, Run.from_dict({"a": {"d1": 2.0, "d3": 1.0}})
    )
    got = compute(rankings, ["num_ret", "num_rel", "bpref", "infap", "judged@2", "gm_map"])
    assert qids == ["a"]
    assert [got[n][0] for n in ["num_ret", "num_rel", "bpref", "infap", "judged@2"]] == [
        2.0, 0.0, 0.0, 0.0, 0.5,
    ]  # fmt: skip
    assert got["gm_map"][0] == math.log(1e-5)


def test_aggregate_geometric_and_threshold_markers() -> None:
    logs = np.log([0.5, 0.125])
    assert aggregate("gm_map", logs) == pytest.approx(0.25, rel=1e-15)
    assert aggregate(parse_metric("map"), np.array([0.1, 0.2, 0.3])) == 0.6 / 3
    assert math.isnan(aggregate("bpref", np.array([])))
    assert is_geometric("GM_MAP") and not is_geometric(parse_metric("map"))
    assert [uses_threshold(n) for n in ["ndcg@5", "num_ret", "judged@5", "idcg"]] == [False] * 4
    assert all(uses_threshold(n) for n in ["bpref", "infap", "iprec@0.5", "num_rel", "gm_map"])


grades = st.lists(st.sampled_from([0.0, 1.0, 2.0, -1.0]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    queries=st.lists(
        st.tuples(grades, st.lists(st.sampled_from([0.0, 1.0, 2.0, -1.0]), min_size=1,
                  max_size=8), st.lists(st.booleans(), min_size=12, max_size=12)),
        min_size=1, max_size=6,
    ),
    max_docs=st.sampled_from([None, 1, 3]),
)  # fmt: skip
def test_a_query_scores_the_same_alone_and_in_a_batch(queries, max_docs) -> None:
    names = [*OURS, "judged@3", "judged@10"]
    ranked = [r for r, _, _ in queries]
    judged = [j for _, j, _ in queries]
    known = [k[: len(r)] for r, _, k in queries]
    batch = compute(Rankings.from_lists(ranked, judged, known), names, max_docs=max_docs)
    for i in range(len(queries)):
        alone = compute(
            Rankings.from_lists([ranked[i]], [judged[i]], [known[i]]), names, max_docs=max_docs
        )
        for name in names:
            assert alone[name][0] == batch[name][i], name
