"""`rag-judge compare`: paired differences, bootstrap CIs, sign-flip p-values, corrections."""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats  # the reference: the dev extra installs it, so these never skip

from rag_judge.analysis.compare import (
    CompareOptions,
    compare_all,
    compare_pairs,
    compare_reports,
    compare_runs,
)
from rag_judge.cli.compare import add_parser, render_markdown, render_table
from rag_judge.errors import ConfigError, DataError
from rag_judge.report import write_report
from rag_judge.report.model import MetricSummary, Report, SampleResult, Signature
from rag_judge.stats import adjust_pvalues, sign_flip_pvalue

BLEU_AGG = "corpus BLEU (per-sample: sentence BLEU)"


def make_report(
    scores: dict[str, dict[str, float | None]],
    aggregates: dict[str, str] | None = None,
    signatures: dict[str, str] | None = None,
) -> Report:
    metrics = dict.fromkeys(m for s in scores.values() for m in s)
    summary = {
        m: MetricSummary(mean=0.0, n=len(scores), aggregate=(aggregates or {}).get(m, "mean"))
        for m in metrics
    }
    samples = [SampleResult(id=i, scores=s) for i, s in scores.items()]
    signed = {m: Signature.parse(text) for m, text in (signatures or {}).items()}
    return Report(summary=summary, samples=samples, signatures=signed)


def write(tmp_path: Path, name: str, report: Report) -> str:
    write_report(report, tmp_path / name)
    return str(tmp_path / name / "report.json")


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rag-judge")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", *argv])
    code: int = args.handler(args)
    return code


def exact_reference(d: list[float]) -> float:
    """Two-sided sign-flip p by enumerating every sign vector with exact sums."""
    obs = abs(math.fsum(d))
    hits = sum(
        abs(math.fsum(s * x for s, x in zip(signs, d))) >= obs
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return hits / 2 ** len(d)


BASE = [0.12, 0.5, 0.33, 0.9, 0.05, 0.61, 0.72, 0.28, 0.44, 0.8]


# ---- statistics ---------------------------------------------------------------------------


def test_constant_shift_has_a_point_ci_and_the_exact_p() -> None:
    base = np.array(BASE)
    result = compare_pairs(base, base + 0.1, CompareOptions())
    assert result.n == 10 and result.exact
    assert result.diff == pytest.approx(0.1, abs=1e-12)
    assert result.ci_low == pytest.approx(0.1, abs=1e-12)
    assert result.ci_high == pytest.approx(0.1, abs=1e-12)
    assert result.p_value == 2 / 2**10  # only all-plus and all-minus reach |T_obs|
    assert result.base_mean == pytest.approx(np.mean(BASE))
    assert result.new_mean == pytest.approx(np.mean(BASE) + 0.1)


def test_no_difference_gives_p_one() -> None:
    base = np.array(BASE)
    result = compare_pairs(base, base.copy(), CompareOptions())
    assert (result.diff, result.ci_low, result.ci_high, result.p_value) == (0.0, 0.0, 0.0, 1.0)
    # also through Monte Carlo: every sign flip ties with 0
    assert sign_flip_pvalue(np.zeros(40), permutations=99) == (1.0, False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-6, 6), min_size=1, max_size=12))
def test_exact_p_equals_full_enumeration(ints: list[int]) -> None:
    d = [i / 4 for i in ints]  # quarters: every sum is exact, so ties are real ties
    p, exact = sign_flip_pvalue(np.array(d))
    assert exact
    assert p == exact_reference(d)


def test_exact_p_equals_scipy_permutation_test() -> None:
    rng = np.random.default_rng(3)
    for n in (3, 7, 12):
        d = rng.normal(0.2, 1.0, size=n)
        ref = stats.permutation_test(
            (d,), np.mean, permutation_type="samples", n_resamples=np.inf
        ).pvalue
        assert sign_flip_pvalue(d)[0] == pytest.approx(ref, rel=1e-12)


def test_monte_carlo_p_agrees_with_exact_within_its_error() -> None:
    d = np.array([0.3, -0.1, 0.25, 0.4, -0.05, 0.2, 0.1, -0.2, 0.35, 0.15, 0.05, -0.3])
    exact = exact_reference(d.tolist())
    n_perm = 20_000
    p, is_exact = sign_flip_pvalue(d, permutations=n_perm, seed=1, exact_max=0)
    assert not is_exact
    assert abs(p - exact) < 4 * math.sqrt(exact * (1 - exact) / n_perm) + 1 / n_perm


def test_monte_carlo_counts_the_observed_statistic() -> None:
    # n = 30 equal differences: no random flip of 9 draws reaches |T_obs|, so p = 1/(N+1)
    assert sign_flip_pvalue(np.full(30, 0.1), permutations=9)[0] == pytest.approx(0.1)


def test_seeded_results_are_reproducible() -> None:
    rng = np.random.default_rng(0)
    base, new = rng.random(60), rng.random(60)
    a = compare_pairs(base, new, CompareOptions(resamples=500, permutations=500, seed=7))
    b = compare_pairs(base, new, CompareOptions(resamples=500, permutations=500, seed=7))
    c = compare_pairs(base, new, CompareOptions(resamples=500, permutations=500, seed=8))
    assert a == b
    assert (a.ci_low, a.p_value) != (c.ci_low, c.p_value)


def test_bootstrap_ci_matches_the_normal_approximation_for_large_n() -> None:
    rng = np.random.default_rng(5)
    base = rng.random(400)
    new = base + rng.normal(0.05, 0.2, size=400)
    r = compare_pairs(base, new, CompareOptions(resamples=10_000, seed=0))
    d = new - base
    half = 1.959964 * d.std(ddof=1) / math.sqrt(len(d))
    assert r.diff == pytest.approx(d.mean(), abs=1e-12)
    assert r.ci_low == pytest.approx(d.mean() - half, abs=0.15 * half)
    assert r.ci_high == pytest.approx(d.mean() + half, abs=0.15 * half)


def test_corrections_match_hand_computation() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert adjust_pvalues(p, "none").tolist() == p.tolist()
    np.testing.assert_allclose(adjust_pvalues(p, "bonferroni"), [0.04, 0.16, 0.12, 0.02])
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1 = .02 .03 .06 .04 -> running max
    np.testing.assert_allclose(adjust_pvalues(p, "holm"), [0.03, 0.06, 0.06, 0.02])
    # BH: sorted 0.005*4/1, 0.01*4/2, 0.03*4/3, 0.04*4/4 = .02 .02 .04 .04 -> running min
    np.testing.assert_allclose(adjust_pvalues(p, "bh"), [0.02, 0.04, 0.04, 0.02])
    np.testing.assert_allclose(adjust_pvalues(np.array([0.6, 0.9]), "bonferroni"), [1.0, 1.0])
    with pytest.raises(ConfigError, match=r"'fdr'.*none, holm, bonferroni, bh"):
        adjust_pvalues(p, "fdr")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=20))
def test_bh_matches_scipy_and_holm_is_between(ps: list[float]) -> None:
    p = np.array(ps)
    np.testing.assert_allclose(adjust_pvalues(p, "bh"), stats.false_discovery_control(p))
    holm, bonf = adjust_pvalues(p, "holm"), adjust_pvalues(p, "bonferroni")
    assert np.all(p <= holm + 1e-15) and np.all(holm <= bonf + 1e-15)


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="resamples must be a positive integer, got 0"):
        CompareOptions(resamples=0)
    with pytest.raises(ConfigError, match=r"confidence must be between 0 and 1.*got 95"):
        CompareOptions(confidence=95)


# ---- reports ------------------------------------------------------------------------------


def test_samples_on_one_side_and_missing_scores_are_counted() -> None:
    base_scores: dict[str, dict[str, float | None]] = {
        f"q{i}": {"acc": v, "f1": v} for i, v in enumerate(BASE)
    }
    new_scores = {k: {m: v + 0.1 for m, v in s.items()} for k, s in base_scores.items()}
    base_scores["only-base"] = {"acc": 1.0, "f1": 1.0}
    new_scores["only-new-1"] = {"acc": 0.0, "f1": 0.0}
    new_scores["only-new-2"] = {"acc": 0.0, "f1": 0.0}
    base_scores["q0"]["acc"] = None  # unscored in base
    base_scores["q1"]["acc"] = float("nan")  # NaN counts as unscored
    del new_scores["q2"]["acc"]  # absent in new
    c = compare_reports(make_report(base_scores), make_report(new_scores))
    assert (c.only_in_base, c.only_in_new) == (1, 2)
    assert (c.metrics["acc"].n, c.metrics["acc"].missing) == (7, 3)
    assert (c.metrics["f1"].n, c.metrics["f1"].missing) == (10, 0)
    assert c.metrics["acc"].base_mean == pytest.approx(np.mean(BASE[3:]))
    assert c.metrics["acc"].diff == pytest.approx(0.1)


def test_metric_selection_and_metrics_on_one_side() -> None:
    base = make_report({"a": {"x": 0.1, "y": 0.2, "old": 1.0}})
    new = make_report({"a": {"x": 0.3, "y": 0.2, "fresh": 1.0}})
    c = compare_reports(base, new)
    assert list(c.metrics) == ["x", "y"]
    assert (c.metrics_only_in_base, c.metrics_only_in_new) == (["old"], ["fresh"])
    assert list(compare_reports(base, new, metrics=["y"]).metrics) == ["y"]
    with pytest.raises(ConfigError, match="'old' is only in BASE; metrics in both: x, y"):
        compare_reports(base, new, metrics=["old"])
    with pytest.raises(ConfigError, match="'nope' is in neither report"):
        compare_reports(base, new, metrics=["nope"])


def test_metric_without_pairs_has_no_statistics() -> None:
    base = make_report({"a": {"x": None}, "b": {"x": 0.5}})
    new = make_report({"a": {"x": 0.2}, "b": {"x": None}})
    mc = compare_reports(base, new).metrics["x"]
    assert (mc.n, mc.missing, mc.diff, mc.p_value, mc.ci_low) == (0, 2, None, None, None)


def test_a_judge_seed_option_is_a_different_metric_but_the_run_seed_is_not() -> None:
    """Regression: the judge's own sampling seed is an option of the metric, and differs even
    though the run's interval seed (the signature's run part) is the same on both sides."""
    run = {"ci": "bootstrap-1000@0.95", "seed": "0"}
    judge = {"model": "stub", "n": "5", "temperature": "0.7"}

    def signed(judge_seed: str, ci_seed: str = "0") -> Report:
        report = make_report({"a": {"faithfulness": 4.0}, "b": {"faithfulness": 3.0}})
        options = {**judge, "seed": judge_seed}
        sig = Signature(name="faithfulness", options=options, run={**run, "seed": ci_seed})
        return report.model_copy(update={"signatures": {"faithfulness": sig}})

    assert compare_reports(signed("0"), signed("7")).metrics["faithfulness"].signature_differs
    assert (
        not compare_reports(signed("0"), signed("0", ci_seed="3"))
        .metrics["faithfulness"]
        .signature_differs
    )
    # the same through report.json, whose signatures are rendered strings
    legacy = Report.model_validate_json(signed("7").to_json())
    assert compare_reports(signed("0"), legacy).metrics["faithfulness"].signature_differs


def test_reports_in_memory_and_on_disk_give_the_same_result(tmp_path: Path) -> None:
    base = make_report({f"q{i}": {"x": v} for i, v in enumerate(BASE)})
    new = make_report({f"q{i}": {"x": v + 0.05} for i, v in enumerate(BASE)})
    paths = write(tmp_path, "base", base), write(tmp_path, "new", new)
    in_memory = compare_all(base, [(paths[1], new)], correction="holm", base_label=paths[0])
    on_disk = compare_runs(paths[0], [paths[1]], correction="holm")
    assert in_memory == on_disk
    mc = in_memory.comparisons[0].metrics["x"]
    assert (mc.n, mc.diff, mc.p_value) == (10, pytest.approx(0.05), 2 / 1024)
    assert render_table(in_memory) == render_table(on_disk)
    assert "| x | 10 |" in render_markdown(in_memory)


def test_missing_values_render_as_one_glyph() -> None:
    base = make_report({"a": {"x": None}})
    result = compare_all(base, [("NEW", make_report({"a": {"x": 0.5}}))], correction="bh")
    row = render_table(result).splitlines()[2].split()
    assert row == ["x", "0", "–", "–", "–", "–", "–", "–", "–", "1"]


def test_duplicate_sample_ids_are_an_error() -> None:
    report = Report(
        summary={},
        samples=[SampleResult(id="a", scores={"x": 1}), SampleResult(id="a", scores={"x": 0})],
        signatures={},
    )
    with pytest.raises(DataError, match="BASE: sample id 'a' appears twice"):
        compare_reports(report, make_report({"a": {"x": 1.0}}))


# ---- command line -------------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, str]:
    ids = [f"q{i}" for i in range(10)]
    base = {i: {"rouge1_f1": v, "bleu": v / 2} for i, v in zip(ids, BASE)}
    better = {i: {"rouge1_f1": v + 0.1, "bleu": v / 2} for i, v in zip(ids, BASE)}
    same = {i: dict(s) for i, s in base.items()}
    same["extra"] = {"rouge1_f1": 0.5, "bleu": 0.5}
    agg = {"bleu": BLEU_AGG}
    sig = {"bleu": "bleu|tok:13a|ci:bootstrap-1000@0.95|seed:0"}
    other_sig = {"bleu": "bleu|tok:13a|ci:bootstrap-200@0.9|seed:4"}  # only the CI differs
    return {
        "base": write(tmp_path, "base", make_report(base, agg, sig)),
        "better": write(tmp_path, "better", make_report(better, agg, other_sig)),
        "same": str(tmp_path / "same"),  # a run folder is accepted
        "_": write(tmp_path, "same", make_report(same, agg, {"bleu": "bleu|tok:intl"})),
    }


def test_cli_json_shape_and_numbers(runs, capsys) -> None:
    assert cli(runs["base"], runs["better"], runs["same"], "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["base"] == runs["base"]
    assert (out["seed"], out["resamples"], out["permutations"]) == (0, 10_000, 10_000)
    assert out["correction"] == "none"
    better, same = out["comparisons"]
    assert better["new"] == runs["better"] and same["new"] == runs["same"]
    assert (better["only_in_base"], better["only_in_new"]) == (0, 0)
    assert (same["only_in_base"], same["only_in_new"]) == (0, 1)
    r = better["metrics"]["rouge1_f1"]
    assert set(r) >= {"n", "base_mean", "new_mean", "diff", "ci_low", "ci_high", "p_value",
                      "p_adjusted", "missing"}  # fmt: skip
    assert r["diff"] == pytest.approx(0.1) and r["p_value"] == 2 / 1024 == r["p_adjusted"]
    assert better["metrics"]["bleu"]["corpus"] == BLEU_AGG
    assert better["metrics"]["bleu"]["p_value"] == 1.0
    assert not better["metrics"]["bleu"]["signature_differs"]
    assert same["metrics"]["bleu"]["signature_differs"]
    assert same["metrics"]["rouge1_f1"]["diff"] == 0.0


def test_cli_correction_spans_every_comparison(runs, capsys) -> None:
    argv = [runs["base"], runs["better"], runs["same"], "--format", "json", "-m", "rouge1_f1"]
    assert cli(*argv, "--correction", "bonferroni", "--seed", "3") == 0
    out = json.loads(capsys.readouterr().out)
    better, same = (c["metrics"]["rouge1_f1"] for c in out["comparisons"])
    assert list(out["comparisons"][0]["metrics"]) == ["rouge1_f1"]
    assert better["p_adjusted"] == pytest.approx(2 * 2 / 1024)  # family of 2
    assert same["p_adjusted"] == 1.0
    assert out["seed"] == 3


def test_cli_markdown_and_table(runs, capsys) -> None:
    assert cli(runs["base"], runs["better"], "--format", "md", "--correction", "holm") == 0
    md = capsys.readouterr().out
    assert md.startswith(f"# Comparison with `{runs['base']}`")
    assert "| metric | n | base | new | diff | change | 95% CI | p | p (holm) | missing |" in md
    assert "| rouge1_f1 | 10 |" in md
    assert "+0.1000 | better | [+0.1000, +0.1000] | 0.0020 |" in md
    assert "bleu\\*: the report's aggregate is corpus BLEU" in md  # a "*" from data: text
    assert "per-sample (sentence-level) values" in md
    assert cli(runs["base"], runs["same"]) == 0
    table = capsys.readouterr().out
    assert f"{runs['same']} vs {runs['base']}" in table
    assert "only in base 0, only in new 1" in table
    assert "bleu*: the two reports computed it with different options" in table


def test_cli_errors_name_the_file(tmp_path, runs) -> None:
    with pytest.raises(DataError, match=r"nope.json: file not found"):
        cli(runs["base"], str(tmp_path / "nope.json"))
    (tmp_path / "other.json").write_text('{"metrics": {"map": 0.3}}')
    with pytest.raises(DataError, match=r"other.json: not a rag-judge report.json"):
        cli(str(tmp_path / "other.json"), runs["base"])
    with pytest.raises(ConfigError, match="'map' is in neither report"):
        cli(runs["base"], runs["better"], "-m", "map")
    with pytest.raises(SystemExit):
        cli(runs["base"], runs["better"], "--permutations", "0")


# ---- the PPI++ difference of labelled runs ------------------------------------------------------


def test_json_has_the_ppi_fields_null_without_labels_and_set_with_them(
    tmp_path: Path, capsys
) -> None:
    def judged(scores: list[float], labels: dict[str, dict[str, float]]) -> Report:
        summary = {"faith": MetricSummary(mean=3.0, n=len(scores), kind="judge", scale=(1, 5))}
        samples = [SampleResult(id=f"q{i}", scores={"faith": v}) for i, v in enumerate(scores)]
        return Report(summary=summary, samples=samples, signatures={}, labels=labels)

    base = judged([3, 4, 2, 5, 3, 4], {"q0": {"faith": 3}, "q1": {"faith": 5}, "q2": {"faith": 2}})
    new = judged([4, 4, 3, 5, 4, 4], {"q0": {"faith": 4}, "q1": {"faith": 5}, "q2": {"faith": 4}})
    paths = [write(tmp_path, "base", base), write(tmp_path, "new", new)]
    assert cli(*paths, "--format", "json") == 0
    faith = json.loads(capsys.readouterr().out)["comparisons"][0]["metrics"]["faith"]
    # d_y = 1 0 2 on q0..q2; d_f = 1 0 1 there, 0 1 0 on q3..q5. Cov(d_y, d_f) = 1/3 (ddof 0);
    # every d_f: Var (ddof 1) = (3 − 6·0.5²) / 5 = 3/10; λ = (1/3) / (2·3/10) = 5/9;
    # θ = λ/3 + 1 − λ·2/3 = 1 − λ/3 = 22/27
    assert faith["ppi_n_labelled"] == 3
    assert faith["ppi_diff"] == pytest.approx(22 / 27, abs=1e-12)
    assert faith["ppi_ci_low"] < 22 / 27 < faith["ppi_ci_high"]
    assert faith["diff"] == pytest.approx(0.5)
    unlabelled = judged([3, 4, 2, 5, 3, 4], {})
    assert cli(paths[0], write(tmp_path, "plain", unlabelled), "--format", "json") == 0
    plain = json.loads(capsys.readouterr().out)["comparisons"][0]["metrics"]["faith"]
    assert [plain[k] for k in ("ppi_diff", "ppi_ci_low", "ppi_ci_high", "ppi_n_labelled")] == [
        None, None, None, None,
    ]  # fmt: skip
