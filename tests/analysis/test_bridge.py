"""Bridging a judge change: the maps, the refusal, and the coverage of the bridged difference.

The simulation draws paired runs whose answers have a latent quality; the old judge reads it
with noise, the new judge reads it shifted (+0.7, lenient) with noise, both rounded to 1-5 (or
left continuous for the linear case). BASE is judged by the old judge, NEW by the new one, and
a bridge subset of BASE by both. The truth is the new judge's difference NEW − BASE in
expectation (a Monte-Carlo mean of 4 million draws). Run as a module it prints the table that
docs/judge-estimates.md quotes: ``.venv/bin/python -m tests.analysis.test_bridge``.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from rag_judge.analysis.bridge import (
    assign_folds,
    bridged_difference,
    cross_fit,
    fit_map,
    fit_rubric,
)
from rag_judge.analysis.compare import compare_reports
from rag_judge.analysis.judge_change import JudgeChangeError, judge_fields
from rag_judge.report.model import Signature
from rag_judge.stats.isotonic import isotonic_fit, pava
from tests import REPO
from tests.analysis.test_compare import make_report

GAIN = 0.3  # the new system's true gain in latent quality
SHIFT = 0.7  # the new judge's leniency


def test_pava_pools_violators_and_keeps_the_mean() -> None:
    assert pava([3.0, 1.0, 2.0], [1, 1, 1]).tolist() == [2.0, 2.0, 2.0]
    assert pava([1.0, 3.0, 2.0, 4.0], [1, 1, 3, 1]).tolist() == [1.0, 2.25, 2.25, 4.0]
    knots, values, df = isotonic_fit([1, 1, 2, 3, 3], [2.0, 4.0, 1.0, 5.0, 5.0])
    assert knots.tolist() == [1, 2, 3] and values.tolist() == [7 / 3, 7 / 3, 5.0] and df == 2
    g = fit_map("isotonic", np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0]))
    assert g.predict([0.0, 1.5, 9.0]).tolist() == [2.0, 2.5, 4.0]  # flat beyond the knots


def test_judge_fields_name_each_difference_but_not_the_version() -> None:
    old = Signature.parse("f|judge:openai/gpt-4o-mini|template:f6daf79b70e7|n:1|version:0.1.0")
    new = Signature.parse("f|judge:openai/gpt-4.1|template:0a1b2c3d4e5f|n:1|version:0.2.0")
    assert judge_fields(old, new) == [
        ("judge", "openai/gpt-4o-mini", "openai/gpt-4.1"),
        ("template", "f6daf79b70e7", "0a1b2c3d4e5f"),
    ]
    assert (
        judge_fields(old, old.model_copy(update={"options": {**old.options, "version": "9"}})) == []
    )


def _pair(old_sig: str, new_sig: str) -> tuple:
    scores = {f"q{i}": {"faithfulness": float(1 + i % 5), "ndcg@5": 0.5} for i in range(6)}
    sigs = {"ndcg@5": "ndcg@5|k:5|version:0.1.0"}
    base = make_report(scores, signatures={"faithfulness": old_sig, **sigs})
    new = make_report(scores, signatures={"faithfulness": new_sig, **sigs})
    return base, new


def test_compare_refuses_a_judge_change_and_names_the_fields() -> None:
    base, new = _pair(
        "faithfulness|judge:openai/gpt-4o-mini|template:f6daf79b70e7|scoring:json",
        "faithfulness|judge:openai/gpt-4.1|template:0a1b2c3d4e5f|scoring:json",
    )
    with pytest.raises(JudgeChangeError) as err:
        compare_reports(base, new)
    assert (
        "faithfulness: judge openai/gpt-4o-mini -> openai/gpt-4.1; template f6daf79b70e7 -> "
        "0a1b2c3d4e5f" in str(err.value)
    )
    assert "ndcg@5" not in str(err.value)
    # the other metrics compare as before; opted out, the judge metric is compared, flagged
    assert set(compare_reports(base, new, metrics=["ndcg@5"]).metrics) == {"ndcg@5"}
    assert (
        compare_reports(base, new, allow_judge_change=True)
        .metrics["faithfulness"]
        .signature_differs
    )


def test_a_shared_judge_or_a_new_version_is_not_a_judge_change() -> None:
    sig = "faithfulness|judge:stub/s|template:ab|version:0.1.0"
    base, new = _pair(sig, sig.replace("0.1.0", "0.2.0"))
    mc = compare_reports(base, new).metrics["faithfulness"]
    assert mc.signature_differs and mc.bridged is None  # flagged (*), as before


def test_fit_rubric_recovers_a_known_monotone_map() -> None:
    rng = np.random.default_rng(1)
    old_all = rng.integers(1, 6, size=200).astype(float)
    old = old_all[:60]
    new = np.minimum(old + 1, 5)
    r = fit_rubric("f", [str(i) for i in range(60)], old, new, old_all, resamples=300)
    assert r.mapping == "isotonic" and r.isotonic is not None
    assert r.isotonic.predict([1, 2, 3, 4, 5]).tolist() == [2, 3, 4, 5, 5]
    assert r.residuals().tolist() == [0.0] * 60
    truth = float(np.minimum(old_all + 1, 5).mean())
    assert r.mapped_mean == pytest.approx(truth)
    assert r.mapped_ci is not None and r.mapped_ci[0] <= truth <= r.mapped_ci[1]
    assert r.linear.slope < 1 and r.kappa is not None and r.alpha is not None
    assert set(r.isotonic.ci) == {"g(1)", "g(2)", "g(3)", "g(4)", "g(5)"}


def test_an_identical_judge_gives_the_old_mean_back_for_non_integer_scores() -> None:
    # means of 3 verdicts: knots between the integers, a few old values outside the subset's
    # range; a map fitted on all the pairs would be biased here (flat beyond its knots)
    rng = np.random.default_rng(4)
    old_all = np.clip(np.floor(rng.normal(2.2, 0.9, size=(300, 3)) + 0.5), 1, 5).mean(axis=1)
    ids = [f"q{i}" for i in range(300)]
    for n in (8, 20, 34):
        r = fit_rubric("c", ids[:n], old_all[:n], old_all[:n], old_all, all_ids=ids)
        assert r.mapped_ci is not None and r.old_mean is not None
        assert r.mapped_ci[0] <= r.old_mean <= r.mapped_ci[1]  # the old mean, up to its CI


def test_cross_fitting_makes_the_correction_real() -> None:
    # continuous scores: one knot per pair, a saturated step map with residuals all 0, which
    # added no width; out of fold the residuals are not 0 and the interval has a width
    rng = np.random.default_rng(2)
    old = rng.normal(3.0, 1.0, size=30)
    new = old + 0.7 + rng.normal(0.0, 0.5, size=30)
    full = fit_map("isotonic", old, new)
    assert abs(float((new - full.predict(old)).mean())) < 1e-9  # in-sample: corrects nothing
    cf = cross_fit("isotonic", old, new, assign_folds(30, 0), [str(i) for i in range(30)])
    assert sorted(np.bincount(cf.fold).tolist()) == [6] * 5 and len(cf.maps) == 5
    assert float(np.abs(cf.residuals).sum()) > 1.0
    # a sample of the subset is mapped by the map that did not see it
    k = int(cf.fold[3])
    assert cf.predict(old[3:4], ["3"])[0] == cf.maps[k].predict(old[3:4])[0]
    others = np.mean([g.predict(old[3:4]) for g in cf.maps])
    assert cf.predict(old[3:4], ["x"])[0] == pytest.approx(others)
    _, se, q = bridged_difference(-cf.predict(old), cf.residuals)
    assert float(se) > 0 and float(q) == pytest.approx(2.045230, abs=1e-6)  # t, 29 df


# ---- the coverage simulation ------------------------------------------------------------------

KINDS = {  # how each judge scores a reading of quality, and the map the CLI fits to it
    "continuous, linear": ("continuous", "linear"),
    "1-5, isotonic": ("integer", "isotonic"),
    "mean of 3 verdicts, isotonic": ("mean3", "isotonic"),
}


def _judge(q: NDArray[np.float64], rng: np.random.Generator, scores: str) -> NDArray[np.float64]:
    if scores == "continuous":
        return q + rng.normal(0.0, 0.5, size=q.shape)
    k = 3 if scores == "mean3" else 1  # a mean of k verdicts: n > 1, a jury, per-context
    noisy = q[..., None] + rng.normal(0.0, 0.5 if k == 1 else 0.7, size=(*q.shape, k))
    return np.clip(np.floor(noisy + 0.5), 1, 5).mean(axis=-1)


def _draw(rng: np.random.Generator, shape: tuple[int, ...], scores: str) -> tuple:
    """Per sample: BASE by the old judge, BASE by the new judge, NEW by the new judge."""
    q = rng.normal(3.0, 1.0, size=shape)
    q_new = q + GAIN + rng.normal(0.0, 0.5, size=shape)
    return (
        _judge(q, rng, scores),
        _judge(q + SHIFT, rng, scores),
        _judge(q_new + SHIFT, rng, scores),
    )


def simulate(
    name: str, sims: int = 1000, big: int = 300, small: int = 50, seed: int = 7
) -> dict[str, float]:
    """Coverage of the 95% bridged interval of NEW − BASE (new judge's truth), its mean
    width and bias, and the coverage of the naive paired interval that ignores the change.
    Each dataset's bridge is cross-fitted as the CLI does it (assign_folds, cross_fit)."""
    scores, kind = KINDS[name]
    rng = np.random.default_rng(seed)
    _, truth_n, truth_y = _draw(np.random.default_rng(0), (4_000_000,), scores)
    truth = float(truth_y.mean() - truth_n.mean())
    o, n, y = _draw(rng, (sims, big), scores)
    ids = [str(j) for j in range(big)]  # the bridge subset: the first `small` (iid draws)
    h, res = np.empty_like(o), np.empty((sims, small))
    for s in range(sims):
        cf = cross_fit(kind, o[s, :small], n[s, :small], assign_folds(small, s), ids[:small])
        h[s], res[s] = cf.predict(o[s], ids), cf.residuals
    diff, se, q = bridged_difference(y - h, res)
    covered = np.abs(diff - truth) <= q * se
    naive = y - o
    naive_se = naive.std(axis=1, ddof=1) / np.sqrt(big)
    naive_cov = np.abs(naive.mean(axis=1) - truth) <= 1.96 * naive_se
    return {
        "truth": truth,
        "coverage": float(covered.mean()),
        "width": float((2 * q * se).mean()),
        "bias": float(diff.mean() - truth),
        "naive": float(naive_cov.mean()),
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "small", "coverage"),
    [
        ("continuous, linear", 50, 0.957),
        ("1-5, isotonic", 50, 0.959),
        ("mean of 3 verdicts, isotonic", 50, 0.960),
        ("continuous, linear", 20, 0.957),
        ("1-5, isotonic", 20, 0.960),
        ("mean of 3 verdicts, isotonic", 20, 0.965),
        ("continuous, linear", 8, 0.967),
        ("1-5, isotonic", 8, 0.962),
        ("mean of 3 verdicts, isotonic", 8, 0.959),
    ],
)
def test_the_bridged_interval_covers_the_new_judges_difference(name, small, coverage) -> None:
    got = simulate(name, small=small)
    assert got["coverage"] >= 0.93
    assert got["naive"] < 0.10  # the judge change alone moves the naive difference
    assert got["coverage"] == pytest.approx(coverage)  # the figures docs/judge-estimates.md quotes
    assert got["naive"] == 0.0


def _main() -> None:
    for small in (50, 20, 8):
        for name in KINDS:
            r = simulate(name, small=small)
            print(
                f"| {name} | {small} | {r['truth']:+.3f} | {r['coverage']:.1%} "
                f"| {r['width']:.3f} | {r['bias']:+.4f} | {r['naive']:.1%} |"
            )


def test_the_worked_example_in_the_docs_prints_what_they_show(capsys) -> None:
    text = (REPO / "docs" / "judge-estimates.md").read_text(encoding="utf-8")
    section = text.split("## Bridging a judge change", 1)[1].split("\n## ", 1)[0]
    example = section.split("**Worked example**", 1)[1]
    code = example.split("```python\n", 1)[1].split("```", 1)[0]
    shown = example.split("```text\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/judge-estimates.md", "exec"), {})
    assert capsys.readouterr().out == shown


if __name__ == "__main__":
    _main()
