"""CI gates: thresholds, pseudo-metrics, CI bounds, baseline regressions, the `gate` command."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag_judge.analysis.compare import CompareOptions, compare_reports
from rag_judge.analysis.gates import RegressionRule, check_gates
from rag_judge.cli.gate import add_parser
from rag_judge.errors import ConfigError, DataError
from rag_judge.pipeline import summarize
from rag_judge.report.model import Failure, MetricSummary, Report, SampleResult, Signature
from rag_judge.report.thresholds import parse_threshold


def make_report(scores: dict[str, list[float | None]]) -> Report:
    """Samples s0..sN with these per-metric scores; summaries as the pipeline computes them."""
    n = len(next(iter(scores.values())))
    samples = [
        SampleResult(
            id=f"s{i}",
            scores={m: v[i] for m, v in scores.items()},
            errors={m: Failure(message="failed") for m, v in scores.items() if v[i] is None},
        )
        for i in range(n)
    ]
    summary = {m: summarize(v, resamples=200, confidence=0.95, seed=0) for m, v in scores.items()}
    return Report(
        summary=summary, samples=samples, signatures={m: Signature(name=m) for m in scores}
    )


def summary_report(entries: dict[str, dict[str, float | int | None]]) -> Report:
    summary = {m: MetricSummary.model_validate(e) for m, e in entries.items()}
    return Report(summary=summary, samples=[], signatures={})


RUBRIC = {"kind": "judge", "scale": (1, 5)}
REPORT = summary_report(
    {
        "ndcg@10": {"mean": 0.58124, "ci_low": 0.51, "ci_high": 0.65, "n": 10,
                    "kind": "retrieval"},
        "faithfulness": {"mean": 4.1, "ci_low": 3.8, "ci_high": 4.4, "n": 8, "errors": 2,
                         "unscored": 1, **RUBRIC},
        "faithfulness_norm": {"mean": 0.775, "n": 8, "errors": 2, "unscored": 1, "kind": "judge",
                              "normalises": "faithfulness"},
        "correctness": {"mean": 3.0, "n": 9, "errors": 1, "unscored": 1, **RUBRIC},
        "correctness_norm": {"mean": 0.5, "n": 9, "errors": 1, "unscored": 1, "kind": "judge",
                             "normalises": "correctness"},
        "empty": {"mean": None, "n": 0, "errors": 3},
    }
)  # fmt: skip


def test_passing_and_failing_thresholds_with_exact_messages() -> None:
    result = check_gates(REPORT, {"ndcg@10": ">= 0.6", "faithfulness": ">= 4.0"})
    assert not result.passed
    assert [f.metric for f in result.failures] == ["ndcg@10"]
    failure = result.failures[0]
    assert (failure.value, failure.bound, failure.op) == (0.58124, 0.6, ">=")
    assert result.render() == "FAIL ndcg@10 = 0.5812 (needs >= 0.6)\n1 of 2 gates failed"
    assert result.render(verbose=True).splitlines()[1] == "PASS faithfulness = 4.1000 (needs >= 4)"
    assert check_gates(REPORT, {"ndcg@10": "> 0.5", "correctness": "== 3"}).passed


@pytest.mark.parametrize(
    ("op", "bound", "ok"),
    [(">=", 3.0, True), (">", 3.0, False), ("<=", 3.0, True), ("<", 3.0, False),
     ("==", 3.0, True), ("==", 3.0001, False), ("<", 3.5, True), (">", 2.5, True)],
)  # fmt: skip
def test_every_operator(op: str, bound: float, ok: bool) -> None:
    assert check_gates(REPORT, {"correctness": f"{op} {bound}"}).passed is ok
    assert check_gates(REPORT, {"correctness": f"{op}{bound}"}).passed is ok  # no space


def test_unscored_rate_and_error_rate() -> None:
    # rubrics: faithfulness (1 unscored of 8+2) and correctness (1 of 9+1); their normalised
    # twins and ndcg@10 (not a judge metric) are not counted: 2 / 20.
    result = check_gates(REPORT, {"unscored_rate": "<= 0.02"})
    assert result.failures[0].value == pytest.approx(0.1)
    assert result.render().splitlines()[0] == "FAIL unscored_rate = 0.1000 (needs <= 0.02)"
    assert check_gates(REPORT, {"unscored_rate": "<= 0.1"}).passed
    # errors 0+2+2+1+1+3 of (10)+(10)+(10)+(10)+(10)+(3) values.
    (check,) = check_gates(REPORT, {"error_rate": "< 1"}).checked
    assert check.value == pytest.approx(9 / 53)


def test_unscored_rate_without_rubrics_fails_with_a_reason() -> None:
    report = summary_report({"ndcg@10": {"mean": 0.7, "n": 3}})
    (failure,) = check_gates(report, {"unscored_rate": "<= 0.02"}).failures
    assert "no judge rubric" in failure.message


def test_unscored_rate_reads_kinds_not_names() -> None:
    # A judge rubric whose twin is not called "<rubric>_norm" counts; a "_norm" name that is
    # not a judge's twin is not a rubric.
    report = summary_report(
        {
            "verdict": {"mean": 3.0, "n": 3, "errors": 1, "unscored": 1, **RUBRIC},
            "verdict01": {"mean": 0.5, "n": 3, "errors": 1, "unscored": 1, "kind": "judge",
                          "normalises": "verdict"},
            "recall": {"mean": 0.5, "n": 4},
            "recall_norm": {"mean": 0.5, "n": 4, "unscored": 4},
        }
    )  # fmt: skip
    (check,) = check_gates(report, {"unscored_rate": "<= 1"}).checked
    assert check.value == pytest.approx(1 / 4)


def test_interval_bounds() -> None:
    assert check_gates(REPORT, {"ndcg@10.ci_low": ">= 0.5", "ndcg@10.ci_high": "<= 0.65"}).passed
    (failure,) = check_gates(REPORT, {"faithfulness.ci_low": ">= 4"}).failures
    assert failure.message == "faithfulness.ci_low = 3.8000 (needs >= 4)"
    (failure,) = check_gates(REPORT, {"faithfulness_norm.ci_low": ">= 0"}).failures
    assert "no confidence interval" in failure.message


def test_a_misspelled_metric_is_bad_input_and_a_metric_without_value_fails_clearly() -> None:
    with pytest.raises(ConfigError) as info:
        check_gates(REPORT, {"ndgc@10": ">= 0.6", "empty": ">= 0"})
    assert str(info.value).startswith(
        "gate 'ndgc@10': no such metric; did you mean 'ndcg@10'? (the metrics: ndcg@10, "
    )
    assert "unscored_rate, error_rate; or <metric>.ci_low/.ci_high" in str(info.value)
    (failure,) = check_gates(REPORT, {"empty": ">= 0"}).failures
    assert failure.message == "empty: no value (0 scored, 3 errors) (needs >= 0)"
    assert failure.value is None


@pytest.mark.parametrize("expr", ["=> 0.6", "0.6", ">= abc", "~ 1", ">= 0.6 0.7", ">= nan", ""])
def test_bad_expressions_name_the_expression_and_the_operators(expr: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_gates(REPORT, {"ndcg@10": expr})
    message = str(info.value)
    assert "ndcg@10" in message
    assert repr(expr) in message or "not a" in message


def test_parse_threshold() -> None:
    assert parse_threshold(">= 0.6") == (">=", 0.6)
    assert parse_threshold("<1e-3") == ("<", 0.001)
    assert parse_threshold(0.6) == (">=", 0.6)  # a bare YAML number means "at least"
    with pytest.raises(ConfigError, match=r"operator of >=, <=, ==, >, <"):
        parse_threshold("=> 0.6", metric="x")


# ---- regression ------------------------------------------------------------------------------

BASE = [0.6, 0.7, 0.5, 0.8, 0.65, 0.55, 0.75, 0.6, 0.7, 0.5] * 2


def regression_pair(diffs: list[float]) -> tuple[Report, Report]:
    new = [b + d for b, d in zip(BASE, diffs)]
    return make_report({"m": new}), make_report({"m": list(BASE)})


def test_regression_without_significance() -> None:
    new, base = regression_pair([-0.03] * 20)
    result = check_gates(new, {}, RegressionRule(base, max_drop=0.02))
    (failure,) = result.failures
    assert failure.kind == "regression"
    assert failure.bound == pytest.approx(0.635 - 0.02)
    assert failure.message == (
        "m = 0.6050 (baseline 0.6350, paired n=20, max_drop 0.02: dropped 0.0300)"
    )
    assert check_gates(new, {}, RegressionRule(base, max_drop=0.03 + 1e-9)).passed
    # a drop of 0.03 up to rounding (0.030000000000000027), printed 0.0300: not over 0.03
    (check,) = check_gates(new, {}, RegressionRule(base, max_drop=0.03)).checked
    assert check.passed and check.message.endswith("max_drop 0.03: drop 0.0300)")
    assert not check_gates(new, {}, RegressionRule(base, max_drop=0.03 - 1e-9)).passed
    assert check_gates(base, {}, RegressionRule(new, max_drop=0.0)).passed  # an improvement
    # lower is better: the same change is an improvement, the reverse a regression.
    assert check_gates(new, {}, RegressionRule(base, max_drop=0.02, lower_is_better=["m"])).passed
    assert not check_gates(
        base, {}, RegressionRule(new, max_drop=0.02, lower_is_better=["m"])
    ).passed


def test_large_but_noisy_drop_is_not_significant() -> None:
    new, base = regression_pair([-1.1, 0.9] * 10)  # mean change -0.1, sd 1
    assert not check_gates(new, {}, RegressionRule(base, max_drop=0.02)).passed
    result = check_gates(new, {}, RegressionRule(base, max_drop=0.02, significant_only=True))
    assert result.passed
    assert (
        "dropped 0.1000, not significant: paired 95% CI of the change ["
        in result.checked[0].message
    )


def test_large_consistent_drop_is_significant() -> None:
    rng = np.random.default_rng(1)
    new, base = regression_pair(list(-0.1 + rng.uniform(-0.01, 0.01, 20)))
    result = check_gates(new, {}, RegressionRule(base, max_drop=0.02, significant_only=True))
    (failure,) = result.failures
    assert ", significant: paired 95% CI of the change [-0.1" in failure.message
    assert "(baseline 0.6350, paired n=20, max_drop 0.02: " in failure.message
    assert failure.message.endswith(", bootstrap 10000 resamples, seed 0)")
    # same seed, same verdict and message
    again = check_gates(new, {}, RegressionRule(base, max_drop=0.02, significant_only=True))
    assert again.failures[0].message == failure.message


def test_regression_pairs_by_sample_id_and_selected_metrics() -> None:
    new = make_report({"a": [0.1, 0.2, 0.3], "b": [0.0, 0.0, 0.0]})
    base = make_report({"a": [0.1, 0.2, 0.3], "b": [0.9, 0.9, 0.9], "c": [1.0, 1.0, 1.0]})
    assert [
        f.metric for f in check_gates(new, {}, RegressionRule(base, max_drop=0.0)).failures
    ] == ["b"]
    assert check_gates(new, {}, RegressionRule(base, max_drop=0.0, metrics=["a"])).passed
    (failure,) = check_gates(new, {}, RegressionRule(base, max_drop=0.0, metrics=["c"])).failures
    assert failure.message == "c: not in the report (regression gate)"
    with pytest.raises(ConfigError, match=r"regression gate 'd': no such metric \(the metrics"):
        check_gates(new, {}, RegressionRule(base, max_drop=0.0, metrics=["d"]))
    # a reordered new report pairs the same ids
    shuffled = new.model_copy(update={"samples": new.samples[::-1]})
    result = check_gates(shuffled, {}, RegressionRule(base, max_drop=0.0, significant_only=True))
    assert [f.metric for f in result.failures] == ["b"]


def test_a_significant_rise_of_a_lower_is_better_metric_fails() -> None:
    rng = np.random.default_rng(1)
    up, base = regression_pair(list(0.1 + rng.uniform(-0.01, 0.01, 20)))
    rule = RegressionRule(base, max_drop=0.02, significant_only=True, lower_is_better=["m"])
    (failure,) = check_gates(up, {}, rule).failures
    assert ", significant: paired 95% CI of the change [+0.09" in failure.message
    assert failure.op == "<=" and failure.bound == pytest.approx(0.635 + 0.02)
    noisy, base = regression_pair([1.1, -0.9] * 10)  # a rise of 0.1, but noisy
    assert check_gates(noisy, {}, replace(rule, baseline=base)).passed


def test_regression_compares_means_over_the_paired_samples_only() -> None:
    # The baseline scored two more samples (low ones): its whole-report mean is 0.4, but over
    # the three samples both runs scored it is 0.6, as in the new report: no regression.
    base = make_report({"m": [0.5, 0.6, 0.7, 0.1, 0.1]})
    new = make_report({"m": [0.5, 0.6, 0.7]})
    assert base.summary["m"].mean == pytest.approx(0.4)
    (check,) = check_gates(new, {}, RegressionRule(base)).checked
    assert check.passed and check.value == pytest.approx(0.6)
    assert check.message == (
        "m = 0.6000 (baseline 0.6000, paired n=3 (2 only in baseline), max_drop 0: change 0.0000)"
    )
    # and the other way round: a drop over the shared samples fails, though the whole-report
    # means are equal (0.4 both)
    worse = make_report({"m": [0.4, 0.5, 0.6, 0.0, 0.0, 0.9]})
    assert worse.summary["m"].mean == pytest.approx(0.4)
    (failure,) = check_gates(worse, {}, RegressionRule(base, max_drop=0.05)).failures
    assert failure.bound == pytest.approx(0.4 - 0.05)
    assert failure.message == (
        "m = 0.3000 (baseline 0.4000, paired n=5 (1 only in report), max_drop 0.05: dropped 0.1000)"
    )
    # a sample unscored on one side is left out and counted
    holes = make_report({"m": [0.5, None, 0.7]})
    (check,) = check_gates(holes, {}, RegressionRule(base)).checked
    assert "paired n=2 (2 only in baseline, 1 unscored)" in check.message


def test_regression_without_a_shared_sample_fails_clearly() -> None:
    base = make_report({"m": [0.5, 0.6]})
    other = base.model_copy(
        update={
            "samples": [s.model_copy(update={"id": f"x{i}"}) for i, s in enumerate(base.samples)]
        }
    )
    (failure,) = check_gates(other, {}, RegressionRule(base, max_drop=1.0)).failures
    assert failure.message == (
        "m: no sample scored in both reports (paired n=0 (2 only in baseline, 2 only in report))"
    )


def test_gate_and_compare_share_one_bootstrap() -> None:
    rng = np.random.default_rng(1)
    new, base = regression_pair(list(-0.1 + rng.uniform(-0.05, 0.05, 20)))
    for seed, resamples in ((0, None), (7, 500)):
        kw = {} if resamples is None else {"resamples": resamples}
        rule = RegressionRule(base, max_drop=0.02, significant_only=True, seed=seed, **kw)
        (failure,) = check_gates(new, {}, rule).failures
        options = CompareOptions(seed=seed, **kw)
        mc = compare_reports(base, new, options).metrics["m"]
        assert f"[{mc.ci_low:+.4f}, {mc.ci_high:+.4f}]" in failure.message
        assert f"bootstrap {options.resamples} resamples, seed {seed})" in failure.message
    assert RegressionRule(base).resamples == CompareOptions().resamples
    with pytest.raises(ConfigError, match="resamples must be a positive integer"):
        RegressionRule(base, resamples=0)


def test_max_drop_is_validated() -> None:
    with pytest.raises(ConfigError, match="max_drop must be a finite number >= 0"):
        RegressionRule(REPORT, max_drop=-1)
    with pytest.raises(ConfigError, match="max_drop must be a finite number >= 0"):
        RegressionRule(REPORT, max_drop=float("nan"))


# ---- command line ----------------------------------------------------------------------------


def gate(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rag-judge")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["gate", *argv])
    return int(args.handler(args))


@pytest.fixture
def reports(tmp_path: Path) -> tuple[str, str]:
    new, base = regression_pair([-1.1, 0.9] * 10)
    (tmp_path / "new.json").write_text(new.to_json())
    (tmp_path / "base.json").write_text(base.to_json())
    return str(tmp_path / "new.json"), str(tmp_path / "base.json")


def test_cli_exit_codes_and_output(reports: tuple[str, str], capsys) -> None:
    new, base = reports
    assert gate(new, "--fail-under", "m=0.5") == 0
    assert capsys.readouterr().out == "all 1 gates passed\n"
    assert gate(new, "--fail-under", "m=0.6", "--threshold", "m.ci_high<=2") == 1
    assert capsys.readouterr().out == "FAIL m = 0.5350 (needs >= 0.6)\n1 of 2 gates failed\n"
    assert gate(new, "--baseline", base, "--max-drop", "0.02") == 1
    assert gate(new, "--baseline", base, "--max-drop", "0.02", "--significant-only") == 0
    assert gate(new, "--baseline", base) == 1  # --max-drop defaults to 0 with a baseline
    capsys.readouterr()
    assert gate(new, "--baseline", base, "--max-drop", "0.2", "--significant-only", "-v") == 0
    assert capsys.readouterr().out == (
        "PASS m = 0.5350 (baseline 0.6350, paired n=20, max_drop 0.2: drop 0.1000)\n"
        "all 1 gates passed\n"
    )
    assert gate(new, "--baseline", base, "--significant-only", "--resamples", "300") == 0
    assert "bootstrap 300 resamples, seed 0)" not in capsys.readouterr().out  # passing: quiet
    assert gate(new, "--baseline", base, "--significant-only", "--resamples", "300", "-v") == 0
    assert "not significant: paired 95% CI of the change [" in (out := capsys.readouterr().out)
    assert "bootstrap 300 resamples, seed 0)" in out


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([], "nothing to check"),
        (["--fail-under", "m"], "expected METRIC=VALUE"),
        (["--fail-under", "m=x"], "'x' is not a number"),
        (["--threshold", "m=>0.6"], "expected METRIC OP VALUE"),
        (["--max-drop", "0.1"], "--max-drop needs --baseline"),
    ],
)
def test_cli_usage_errors(reports: tuple[str, str], argv: list[str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        gate(reports[0], *argv)


def test_cli_missing_report(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        gate(str(tmp_path / "nope.json"), "--fail-under", "m=1")
    (tmp_path / "bad.json").write_text(json.dumps({"summary": 3}))
    with pytest.raises(DataError, match=r"not a rag-judge report\.json"):
        gate(str(tmp_path / "bad.json"), "--fail-under", "m=1")


def test_ppi_names_resolve_after_the_report_s_own_metrics() -> None:
    # a metric genuinely called "x_ppi" is its own mean; the PPI gates: tests/analysis/test_ppi.py
    report = summary_report({"x_ppi": {"mean": 0.5, "n": 3}})
    (check,) = check_gates(report, {"x_ppi": ">= 0.5"}).checked
    assert (check.passed, check.value) == (True, 0.5)
    with pytest.raises(ConfigError, match=r"did you mean 'faithfulness_ppi' or "):
        check_gates(REPORT, {"faithfulnes_ppi": ">= 4"})
