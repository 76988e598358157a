"""The corrected retrieval metrics' coverage, simulated: synthetic qrels of five retrieved
chunks a query, a judge that raises a grade by one with p = 0.3, and the truth from
pytrec_eval on the true qrels. The per-query metrics come from the evaluator's own kernels
(checked against pytrec_eval on every grading of five chunks), the estimates from stats/ppi.

Run ``.venv/bin/python -m tests.analysis.test_retrieval_ppi_coverage`` for the figures that
docs/judge-estimates.md quotes."""

from __future__ import annotations

import itertools

import numpy as np
import pytrec_eval
from numpy.typing import NDArray

from rag_judge.data.ranking import Rankings
from rag_judge.metrics.retrieval import compute
from rag_judge.stats.ppi import mean_ci, ppi_mean

K = 5
METRICS = {"ndcg@5": "ndcg_cut_5", "precision@5": "P_5", "recall@5": "recall_5"}
TRUE_GRADES = (0.85, 0.07, 0.05, 0.03)  # P(grade 0..3) of a retrieved chunk
QUERIES, LABELLED, SIMULATIONS = 1000, 100, 1000
# Every grading of five chunks (4**5), by index: grade of rank r is (index // 4**r) % 4.
GRADINGS = np.array(list(itertools.product(range(4), repeat=K)))[:, ::-1]


def _core() -> dict[str, NDArray[np.float64]]:
    """Each metric of every grading, by the evaluator's kernels (ideal: the graded chunks)."""
    lists = [[float(g) for g in row] for row in GRADINGS]
    values = compute(Rankings.from_lists(lists, lists), list(METRICS))
    return {m: np.asarray(values[m], dtype=np.float64) for m in METRICS}


def _trec() -> dict[str, NDArray[np.float64]]:
    """The same by pytrec_eval (float32 inside), each grading a query of its own."""
    qrels = {
        f"g{i}": {f"d{r}": int(g) for r, g in enumerate(row)} for i, row in enumerate(GRADINGS)
    }
    run = {f"g{i}": {f"d{r}": float(K - r) for r in range(K)} for i in range(len(GRADINGS))}
    found = pytrec_eval.RelevanceEvaluator(qrels, set(METRICS.values())).evaluate(run)
    return {
        m: np.array([found[f"g{i}"][t] for i in range(len(GRADINGS))]) for m, t in METRICS.items()
    }


def _index(grades: NDArray[np.int64]) -> NDArray[np.int64]:
    return (grades * 4 ** np.arange(K)).sum(axis=-1)


def simulate(judge: str, seed: int = 33) -> dict[str, dict[str, float]]:
    """Coverage of the truth (pytrec_eval's mean over the true distribution of gradings) by
    the PPI, the judge-only and the labels-only 95% intervals, and their mean widths, for a
    ``lenient`` judge (each grade raised by one with p = 0.3, at most 3) or an ``unbiased``
    one (each grade, with p = 0.3, drawn afresh from the true grades' distribution: the
    judge's gradings are distributed as the true ones, so its means are unbiased)."""
    core, trec = _core(), _trec()
    probs = np.prod(np.array(TRUE_GRADES)[GRADINGS], axis=1)
    truth = {m: float(probs @ trec[m]) for m in METRICS}
    rng = np.random.default_rng(seed)
    true = rng.choice(4, p=TRUE_GRADES, size=(SIMULATIONS, QUERIES, K))
    wrong = rng.random(true.shape) < 0.3
    if judge == "lenient":
        judged = np.minimum(true + wrong, 3)
    else:
        judged = np.where(wrong, rng.choice(4, p=TRUE_GRADES, size=true.shape), true)
    t_idx, j_idx = _index(true), _index(judged)
    out: dict[str, dict[str, float]] = {}
    for m in METRICS:
        y, f = core[m][t_idx], core[m][j_idx]
        hits = {"ppi": 0, "judge": 0, "labels": 0}  # intervals that cover the truth
        widths = {"ppi": 0.0, "labels": 0.0}
        for s in range(SIMULATIONS):
            ppi = ppi_mean(y[s, :LABELLED], f[s, :LABELLED], f[s, LABELLED:])
            judge = mean_ci(f[s])
            assert ppi.ci_low is not None and ppi.ci_high is not None
            assert ppi.classical_ci_low is not None and ppi.classical_ci_high is not None
            assert judge.low is not None and judge.high is not None
            hits["ppi"] += ppi.ci_low <= truth[m] <= ppi.ci_high
            hits["judge"] += judge.low <= truth[m] <= judge.high
            hits["labels"] += ppi.classical_ci_low <= truth[m] <= ppi.classical_ci_high
            widths["ppi"] += ppi.ci_high - ppi.ci_low
            widths["labels"] += ppi.classical_ci_high - ppi.classical_ci_low
        out[m] = {f"{k} coverage": v / SIMULATIONS for k, v in hits.items()}
        out[m] |= {f"{k} width": v / SIMULATIONS for k, v in widths.items()}
        out[m]["truth"] = truth[m]
        out[m]["judge mean"] = float(f.mean())
    return out


def test_the_core_agrees_with_pytrec_eval_on_every_grading() -> None:
    core, trec = _core(), _trec()
    for m in METRICS:
        np.testing.assert_allclose(core[m], trec[m], atol=1e-6)  # pytrec_eval's float32


def test_the_corrected_interval_covers_where_the_judges_does_not() -> None:
    found = simulate("lenient")
    for m, row in found.items():
        assert row["ppi coverage"] >= 0.93, (m, row)
        assert row["judge coverage"] < 0.10, (m, row)
    # The figures docs/judge-estimates.md quotes.
    assert [round(found[m]["ppi coverage"], 3) for m in METRICS] == PINNED_BIASED


def test_with_an_unbiased_judge_the_interval_is_no_wider_than_the_labels() -> None:
    found = simulate("unbiased")
    for m, row in found.items():
        assert row["ppi width"] <= row["labels width"], (m, row)
        assert row["ppi coverage"] >= 0.93, (m, row)
    assert [round(found[m]["ppi width"] / found[m]["labels width"], 3) for m in METRICS] == (
        PINNED_RATIO
    )


PINNED_BIASED = [0.957, 0.959, 0.943]  # ndcg@5, precision@5, recall@5
PINNED_RATIO = [0.779, 0.754, 0.802]  # PPI width / labels-only width


if __name__ == "__main__":
    for name in ("lenient", "unbiased"):
        print(name)
        for metric, row in simulate(name).items():
            print(" ", metric, {k: round(v, 4) for k, v in row.items()})
