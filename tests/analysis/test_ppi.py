"""Bias-corrected judge numbers of a report: ``ppi_estimates``, ``calibrate``'s PPI table,
``compare``'s PPI difference and the ``<metric>_ppi`` gates, on a small report built here."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction as F
from pathlib import Path

import pytest

from rag_judge.analysis.compare import CompareOptions, compare_all, compare_reports
from rag_judge.analysis.gates import check_gates
from rag_judge.analysis.ppi import (
    MIN_OFF_MODE,
    few_labels_warnings,
    metric_kind,
    ppi_difference,
    ppi_estimates,
)
from rag_judge.cli import calibrate as calibrate_cli
from rag_judge.cli import gate as gate_cli
from rag_judge.cli.compare import render_markdown, render_table
from rag_judge.config import load_config
from rag_judge.errors import ConfigError, DataError
from rag_judge.report.markdown import render_markdown as render_report_md
from rag_judge.report.model import (
    MetricKind,
    MetricSummary,
    PPIEstimate,
    Report,
    SampleResult,
    WarningKind,
)
from rag_judge.resources import resource_dir
from rag_judge.stats import ppi_mean

FAITH = [5, 4, 5, 3, 4, 5, 4, 2, 5, 4]  # the judge's 1-5 scores of q0..q9
ANSWERED = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]  # answer_rate, a 0/1 grounding rate
LABELS: dict[str, dict[str, float]] = {
    "q0": {"faithfulness": 4, "answer_rate": 1},
    "q1": {"faithfulness": 3, "answer_rate": 0},
    "q2": {"faithfulness": 5, "answer_rate": 1},
    "q3": {"faithfulness": 2, "answer_rate": 0},
    "q4": {"faithfulness": 3, "answer_rate": 1},
    "q5": {"answer_rate": 1},
    "elsewhere": {"faithfulness": 1},  # not a sample of the report: unused
}


def make_report(
    scores: dict[str, list[float | None]],
    labels: dict[str, dict[str, float]] | None = None,
    ids: list[str] | None = None,
) -> Report:
    n = len(next(iter(scores.values())))
    ids = ids or [f"q{i}" for i in range(n)]
    samples = [
        SampleResult(id=ids[i], scores={m: v[i] for m, v in scores.items()}) for i in range(n)
    ]
    summary = {}
    for m, values in scores.items():
        scale = (0.0, 1.0) if m == "answer_rate" else (1.0, 5.0)
        present = [v for v in values if v is not None]
        summary[m] = MetricSummary(
            mean=sum(present) / len(present), n=len(present), kind=MetricKind.JUDGE, scale=scale
        )
    return Report(summary=summary, samples=samples, signatures={}, labels=labels or {})


REPORT = make_report({"faithfulness": FAITH, "answer_rate": ANSWERED}, LABELS)

# Faithfulness by hand. Labelled q0..q4: y = 4 3 5 2 3 (mean 17/5), f = 5 4 5 3 4 (mean 21/5);
# unlabelled q5..q9: f = 5 4 2 5 4 (mean 4). Cov(y, f) (ddof 0) = 3.6 / 5 = 18/25; every f:
# sum 41, squares 177, Var (ddof 1) = (177 − 41²/10) / 9 = 89/90; 1 + n/N = 2:
LAM = F(18, 25) / (2 * F(89, 90))  # = 162/445
THETA = LAM * 4 + F(17, 5) - LAM * F(21, 5)  # = 7403/2225 ≈ 3.3272


def test_estimates_of_a_rubric_and_a_rate() -> None:
    assert (F(162, 445), F(7403, 2225)) == (LAM, THETA)
    estimates = ppi_estimates(REPORT, confidence=0.9, seed=0)
    assert list(estimates) == ["faithfulness", "answer_rate"]
    faith = estimates["faithfulness"]
    assert (faith.metric, faith.confidence, faith.n_labelled, faith.n_unlabelled) == (
        "faithfulness", 0.9, 5, 5,
    )  # fmt: skip
    assert faith.judge_mean == pytest.approx(4.1) and faith.labelled_mean == pytest.approx(3.4)
    assert faith.lam == pytest.approx(float(LAM), abs=1e-15)
    assert faith.estimate == pytest.approx(float(THETA), abs=1e-14)
    same = ppi_mean([4, 3, 5, 2, 3], [5, 4, 5, 3, 4], [5, 4, 2, 5, 4], confidence=0.9)
    assert faith.ci == (same.ci_low, same.ci_high) and faith.se == same.se
    assert faith.ess_gain == same.ess_gain
    # pass at ≥ 4: the judge passes 8 of 10 (apparent 0.8); of the labelled, a person passed
    # q0, q2 (the judge too: sens 1) and failed q1, q3, q4 (the judge failed q3 only: spec 1/3);
    # (0.8 + 1/3 − 1) / (1 + 1/3 − 1) = 0.4
    rate = faith.pass_rate
    assert rate is not None and rate.threshold == 4.0
    assert (rate.apparent, rate.sensitivity) == (0.8, 1.0)
    assert rate.specificity == pytest.approx(1 / 3)
    assert rate.corrected == pytest.approx(0.4, abs=1e-15)
    assert rate.ci is not None and rate.ci[0] <= 0.4 <= rate.ci[1]
    # answer_rate: labelled q0..q5 y = 1 0 1 0 1 1, judge 1 1 1 0 1 1: sens 1, spec 1/2;
    # apparent 0.8: (0.8 + 0.5 − 1) / 0.5 = 0.6; the mean of the labels 2/3
    answered = estimates["answer_rate"]
    assert (answered.n_labelled, answered.n_unlabelled) == (6, 4)
    assert answered.labelled_mean == pytest.approx(2 / 3)
    assert answered.pass_rate is not None and answered.pass_rate.threshold is None
    assert answered.pass_rate.corrected == pytest.approx(0.6, abs=1e-15)
    assert metric_kind(REPORT, "answer_rate") == "binary"
    # the run stores what this computes, and it reads back from report.json
    again = Report.model_validate_json(REPORT.model_copy(update={"estimates": estimates}).to_json())
    assert again.estimates == estimates


def test_pass_score_and_seed() -> None:
    at_five = ppi_estimates(REPORT, pass_score=5.0)["faithfulness"].pass_rate
    assert at_five is not None and at_five.threshold == 5.0
    assert at_five.apparent == 0.4  # 5s: q0, q2, q5, q8
    seeded = [ppi_estimates(REPORT, seed=0)["faithfulness"].pass_rate for _ in range(2)]
    assert seeded[0] == seeded[1]
    assert seeded[0] is not None and seeded[0].ci == (0.0, 1.0)  # five labels say little
    with pytest.raises(ConfigError, match=r"pass_score must be a number in \[1, 5\], got 6"):
        ppi_estimates(REPORT, pass_score=6)


def test_unscored_and_unlabelled_samples() -> None:
    labels = {"q0": {"faithfulness": 5.0}, "q1": {"faithfulness": 2.0}}
    report = make_report({"faithfulness": [4, None, 3, 5]}, labels)
    (only,) = ppi_estimates(report).values()
    assert (only.n_labelled, only.n_unlabelled) == (1, 2)  # q1's label has no judge score
    assert (only.estimate, only.ci, only.lam, only.labelled_mean) == (None, None, None, 5.0)
    assert only.judge_mean == 4.0
    assert ppi_estimates(report, {"q0": {"other": 3}}) == {}  # no label of a judge metric


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"q1": {"faithfulness": 0}},
         "sample 'q1': faithfulness label 0 is not 1-5 (a 1-5 rubric)"),
        ({"q2": {"answer_rate": 3}},
         "sample 'q2': answer_rate label 3 is not 0 or 1 (a pass/fail metric)"),
    ],
)  # fmt: skip
def test_labels_outside_what_a_metric_takes(
    labels: dict[str, dict[str, float]], message: str
) -> None:
    with pytest.raises(DataError) as info:
        ppi_estimates(REPORT, labels)
    assert str(info.value) == message


# ---- calibrate ---------------------------------------------------------------------------------


def run_cli(module: object, command: str, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rag-judge")
    module.add_parser(parser.add_subparsers(dest="command", required=True))  # type: ignore[attr-defined]
    args = parser.parse_args([command, *argv])
    return int(args.handler(args))


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    report = tmp_path / "report.json"
    report.write_text(make_report({"faithfulness": FAITH, "answer_rate": ANSWERED}).to_json())
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": k, **v}) + "\n" for k, v in LABELS.items()))
    return str(report), str(labels)


def test_calibrate_json_keeps_its_shape_and_adds_ppi(files: tuple[str, str], capsys) -> None:
    assert run_cli(calibrate_cli, "calibrate", *files, "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["faithfulness", "answer_rate"]
    faith = out["faithfulness"]
    assert faith["rubric"] == "faithfulness" and faith["n"] == 5  # the agreement, as before
    assert faith["ppi"]["estimate"] == pytest.approx(float(THETA))
    assert faith["ppi"]["confidence"] == 0.95  # the report's
    assert faith["ppi"]["pass_rate"]["corrected"] == pytest.approx(0.4)
    assert list(out["answer_rate"]) == ["ppi"]  # a 0/1 rate: no agreement statistics
    assert out["answer_rate"]["ppi"]["pass_rate"]["corrected"] == pytest.approx(0.6)


def test_calibrate_table_and_markdown(files: tuple[str, str], capsys) -> None:
    assert run_cli(calibrate_cli, "calibrate", *files, "--confidence", "0.9") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["faithfulness", "5"] and lines[2] == ""
    assert lines[3].split() == [
        "metric", "labelled", "unlabelled", "judge", "mean", "[90%", "CI]", "labels", "mean",
        "[90%", "CI]", "PPI", "mean", "[90%", "CI]", "λ", "ESS", "gain", "pass", "rate:", "judge",
        "→", "RG", "[90%", "CI]",
    ]  # fmt: skip
    row = lines[5].split()
    assert row[:4] == ["faithfulness", "5", "5", "4.100"]
    assert row[6:8] == ["3.400", "[2.313,"]  # 3.4 − t(4 df, 90%) 2.1318·√(1.3/5), method t
    assert row[9] == f"{float(THETA):.3f}" == "3.327" and row[12] == f"{float(LAM):.3f}" == "0.364"
    assert row[14:17] == ["0.800", "→", "0.400"]  # the judge's 8 of 10 at ≥ 4, then RG's
    assert lines[4].split()[:3] == ["answer_rate", "6", "4"]
    assert (
        lines[6].startswith("PPI: the PPI++ mean") and "a score ≥ 4, a 0/1 metric's 1" in lines[6]
    )
    assert run_cli(calibrate_cli, "calibrate", *files, "--format", "md", "--pass-score", "5") == 0
    md = capsys.readouterr().out.split("\n\n")
    assert md[0].startswith("| rubric | n | Spearman ρ |")
    head, rule, *rows = md[1].splitlines()
    assert head.startswith("| metric | labelled | unlabelled | judge mean [95% CI] |")
    assert rule == "|---|" + "---:|" * 8
    assert rows[1].startswith("| faithfulness | 5 | 5 | 4.100 [")
    assert "a score ≥ 5" in md[2]


def _ppi_block(markdown: str) -> tuple[list[str], set[str], list[str]]:
    """The PPI table of some Markdown: its heading and rule, its rows, its notes."""
    lines = markdown[markdown.index("| metric | labelled |") :].split("\n\n## ")[0].splitlines()
    table = [line for line in lines if line.startswith("|")]
    return table[:2], set(table[2:]), [line for line in lines if line.startswith("- ")]


def test_calibrate_prints_report_md_s_own_ppi_table(tmp_path: Path, capsys) -> None:
    # The run's estimates, at the level stored in the report: not its config's any more.
    report = make_report({"faithfulness": FAITH, "answer_rate": ANSWERED}, LABELS)
    report.confidence = 0.9
    report.config["bootstrap"] = {"confidence": 0.8}
    report.estimates = ppi_estimates(report)
    path, labels = tmp_path / "report.json", tmp_path / "labels.jsonl"
    path.write_text(report.to_json())
    labels.write_text("".join(json.dumps({"id": k, **v}) + "\n" for k, v in LABELS.items()))
    assert run_cli(calibrate_cli, "calibrate", str(path), str(labels), "--format", "md") == 0
    printed = _ppi_block(capsys.readouterr().out)
    assert printed == _ppi_block(render_report_md(Report.load(path)))
    head, rows, notes = printed
    assert head[0].startswith("| metric | labelled | unlabelled | judge mean [90% CI] |")
    assert len(rows) == 2 and len(notes) == 2


def test_calibrate_refuses_a_zero_on_a_rubric(files: tuple[str, str]) -> None:
    report, labels = files
    Path(labels).write_text('{"id": "q0", "faithfulness": 0}\n')
    with pytest.raises(DataError, match=r"sample 'q0': faithfulness label 0 is outside 1-5"):
        run_cli(calibrate_cli, "calibrate", report, labels)


# ---- compare -----------------------------------------------------------------------------------


def test_compare_adds_the_ppi_difference() -> None:
    new_faith = [5, 5, 5, 4, 4, 5, 5, 3, 5, 4, 1]  # q0..q9 and an id only in new
    new_labels = {"q0": {"faithfulness": 4}, "q1": {"faithfulness": 4}, "q2": {"faithfulness": 5},
                  "q3": {"faithfulness": 4}, "q6": {"faithfulness": 5}}  # fmt: skip
    new = make_report({"faithfulness": new_faith}, new_labels, [f"q{i}" for i in range(11)])
    base = make_report({"faithfulness": FAITH}, LABELS)
    # Labelled in both: q0..q3, d_y = 0 1 0 2 (mean 3/4); the judge's d_f there 0 1 0 1 (mean
    # 1/2), on q4..q9 0 0 1 1 0 0 (mean 1/3). Cov(d_y, d_f) = 1.5 / 4 = 3/8; every d_f (q0..q9):
    # Var (ddof 1) = (4 − 10·0.4²) / 9 = 4/15; λ = (3/8) / ((1 + 4/6)·4/15) = 27/32;
    # θ = λ/3 + 3/4 − λ/2 = 39/64, between the judge's 0.4 and the labels' 0.75.
    expected = ppi_mean([0, 1, 0, 2], [0, 1, 0, 1], [0, 0, 1, 1, 0, 0])
    assert ppi_difference(base, new, "faithfulness") == expected
    assert expected.lam == pytest.approx(27 / 32, abs=1e-15)
    assert expected.estimate == pytest.approx(39 / 64, abs=1e-15)
    mc = compare_reports(base, new, CompareOptions(resamples=200)).metrics["faithfulness"]
    assert (mc.ppi_diff, mc.ppi_ci_low, mc.ppi_ci_high, mc.ppi_n_labelled) == (
        expected.estimate, expected.ci_low, expected.ci_high, 4,
    )  # fmt: skip
    assert mc.diff == pytest.approx(0.4)  # the judge's own paired difference over q0..q9
    result = compare_all(base, [("NEW", new)], CompareOptions(resamples=200, permutations=200))
    table = render_table(result).splitlines()
    assert table[1].split()[-7:] == ["missing", "PPI", "diff", "PPI", "95%", "CI", "labelled"]
    assert table[2].split()[-4:] == ["+0.6094", f"[{expected.ci_low:+.4f},",
                                     f"{expected.ci_high:+.4f}]", "4"]  # fmt: skip
    assert any(line.startswith("PPI diff: the prediction-powered") for line in table)
    assert "| PPI diff | PPI 95% CI | labelled |" in render_markdown(result)
    # without labels on both sides: no PPI, and no column
    plain = compare_all(base, [("NEW", make_report({"faithfulness": new_faith[:10]}))])
    assert plain.comparisons[0].metrics["faithfulness"].ppi_n_labelled is None
    assert "PPI" not in render_table(plain)


# ---- gates -------------------------------------------------------------------------------------


def test_ppi_gates_computed_from_labels_or_read_from_estimates() -> None:
    result = check_gates(REPORT, {"faithfulness_ppi": ">= 4.0", "answer_rate_ppi": ">= 0.5"})
    failed, passed = result.checked
    assert not failed.passed and failed.value == pytest.approx(float(THETA))
    assert failed.message == "faithfulness_ppi = 3.3272 (needs >= 4)"
    assert passed.passed
    stored = PPIEstimate(metric="faithfulness", n_labelled=5, n_unlabelled=5, estimate=4.2,
                         ci=(3.9, 4.5))  # fmt: skip
    report = REPORT.model_copy(update={"estimates": {"faithfulness": stored}})
    gates = {"faithfulness_ppi": ">= 4.0", "faithfulness_ppi.ci_low": ">= 4.0",
             "faithfulness_ppi.ci_high": "<= 4.5"}  # fmt: skip
    ok, low, high = check_gates(report, gates).checked
    assert (ok.passed, ok.value) == (True, 4.2)
    assert (low.passed, low.message) == (False, "faithfulness_ppi.ci_low = 3.9000 (needs >= 4)")
    assert (high.passed, high.value) == (True, 4.5)


def test_ppi_gates_without_labels_or_a_judge_metric() -> None:
    bare = make_report({"faithfulness": FAITH})
    (no_labels,) = check_gates(bare, {"faithfulness_ppi": ">= 4"}).checked
    assert no_labels.message == (
        "faithfulness_ppi: the report has no human labels of faithfulness, so no PPI estimate "
        "(give the run labels: in its config) (needs >= 4)"
    )
    # a PPI form of no judge metric is a misspelled gate: bad input, with the closest names
    with pytest.raises(ConfigError) as unknown:
        check_gates(REPORT, {"faithfulnes_ppi.ci_low": ">= 4"})
    assert str(unknown.value).startswith(
        "gate 'faithfulnes_ppi.ci_low': no such metric; did you mean 'faithfulness_ppi.ci_low'"
    )
    few = make_report({"faithfulness": FAITH}, {"q0": {"faithfulness": 4}})
    (one,) = check_gates(few, {"faithfulness_ppi": ">= 4"}).checked
    assert "no PPI estimate (1 labelled samples with a judge score; it needs 2 or more)" in (
        one.message
    )


def test_gate_command_and_config_gates(files: tuple[str, str], tmp_path: Path, capsys) -> None:
    report = tmp_path / "labelled.json"
    report.write_text(REPORT.to_json())
    assert run_cli(gate_cli, "gate", str(report), "--threshold", "faithfulness_ppi.ci_high>=3") == 0
    assert run_cli(gate_cli, "gate", str(report), "--threshold", "faithfulness_ppi >= 4") == 1
    assert "FAIL faithfulness_ppi = 3.3272 (needs >= 4)" in capsys.readouterr().out
    config = tmp_path / "exp.yaml"
    demo = resource_dir("configs") / "data" / "demo.jsonl"
    config.write_text(
        f"dataset: {demo}\nevaluators: [{{type: judge, rubrics: [faithfulness]}}]\n"
        "gates:\n  faithfulness_ppi: '>= 4.0'\n  faithfulness_ppi.ci_low: '>= 3.5'\n"
    )
    assert load_config(config).gates == {"faithfulness_ppi": ">= 4.0",
                                         "faithfulness_ppi.ci_low": ">= 3.5"}  # fmt: skip


# ---- too few labels for any interval -----------------------------------------------------------


def test_few_labels_are_warned_about(files: tuple[str, str], capsys) -> None:
    assert run_cli(calibrate_cli, "calibrate", *files) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "rag-judge calibrate: warning: the bias-corrected estimate of answer_rate rests on only "
        "6 labelled samples (fewer than 15): no interval method keeps its stated coverage on so "
        "small a slice, so read its interval as a rough range, and label more samples (a random "
        "slice) before trusting it.",
        "rag-judge calibrate: warning: the bias-corrected estimate of faithfulness rests on only "
        "5 labelled samples (fewer than 15): no interval method keeps its stated coverage on so "
        "small a slice, so read its interval as a rough range, and label more samples (a random "
        "slice) before trusting it.",
    ]


def test_a_slice_of_nearly_one_label_is_warned_about() -> None:
    scores = [5, 4, 5, 3, 4, 5, 4, 2, 5, 4] * 3
    skewed = {f"q{i}": {"faithfulness": 5.0 if i >= 4 else 3.0} for i in range(20)}  # 4 off
    report = make_report({"faithfulness": scores}, skewed)
    (warning,) = few_labels_warnings(report, ppi_estimates(report))
    assert (warning.kind, warning.metric, warning.value, warning.threshold) == (
        WarningKind.FEW_LABELS_OFF_MODE, "faithfulness", 4, MIN_OFF_MODE,
    )  # fmt: skip
    assert warning.message.startswith(
        "the bias-corrected estimate of faithfulness rests on 20 labels of which only 4 differ "
        "from the most common one (fewer than 5): no interval method"
    )
    varied = {f"q{i}": {"faithfulness": float(1 + i % 5)} for i in range(15)}
    report = make_report({"faithfulness": scores}, varied)
    assert few_labels_warnings(report, ppi_estimates(report)) == []
    (fourteen,) = few_labels_warnings(
        report, ppi_estimates(report, {k: v for k, v in varied.items() if k != "q0"})
    )
    assert (fourteen.kind, fourteen.value, fourteen.threshold) == (WarningKind.FEW_LABELS, 14, 15)


def test_the_interval_method_is_chosen_and_recorded() -> None:
    t, normal = (ppi_estimates(REPORT, method=m)["faithfulness"] for m in ("t", "ppi_py"))
    assert (t.method, normal.method) == ("t", "ppi_py")
    assert (t.estimate, t.lam) == (normal.estimate, normal.lam)  # the interval alone differs
    same = ppi_mean([4, 3, 5, 2, 3], [5, 4, 5, 3, 4], [5, 4, 2, 5, 4], method="ppi_py")
    assert normal.ci == (same.ci_low, same.ci_high)
    assert t.ci is not None and normal.ci is not None and t.ci[0] < normal.ci[0]
    with pytest.raises(ConfigError, match=r"method must be one of t, ppi_py, got 'normal'"):
        ppi_estimates(REPORT, method="normal")
