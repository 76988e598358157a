"""Power before the run (``rag-judge plan``): the closed form on hand numbers, the "cannot
detect" sentence, the drop detectable at the dataset's n, the paired variance of a second
report, the command on real Pipeline runs (docs/power.md's worked example) and its errors."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from rag_judge.analysis.power import (
    PlanOptions,
    detectable_effect,
    plan_reports,
    plan_table,
    required_n,
    sd_of_difference,
)
from rag_judge.cli import main
from rag_judge.errors import ConfigError
from rag_judge.pipeline import summarize
from rag_judge.report.model import Failure, Report, SampleResult, Signature, UnitResult
from tests import REPO

Z_975, Z_95, Z_80 = 1.959963984540054, 1.6448536269514722, 0.8416212335729143


def make_report(scores: Mapping[str, Sequence[float | None]]) -> Report:
    """Samples s0..sN with these per-metric scores (None: failed)."""
    n = len(next(iter(scores.values())))
    samples = [
        SampleResult(
            id=f"s{i}",
            scores={m: v[i] for m, v in scores.items()},
            errors={m: Failure(message="failed") for m, v in scores.items() if v[i] is None},
        )
        for i in range(n)
    ]
    summary = {m: summarize(v, resamples=50, confidence=0.95, seed=0) for m, v in scores.items()}
    return Report(
        summary=summary, samples=samples, signatures={m: Signature(name=m) for m in scores}
    )


# sd 0.1 exactly: deviations -0.1, +0.1, 0 from 0.5, so variance 0.02 / 2 = 0.01.
BASE = make_report({"m": [0.4, 0.6, 0.5]})


# ---- the closed form ------------------------------------------------------------------------


def test_required_n_equals_the_closed_form_on_hand_numbers() -> None:
    plan = plan_reports(BASE, PlanOptions(mde=0.02)).metrics[0]
    assert plan.sd == pytest.approx(0.1) and plan.sd_diff == pytest.approx(0.1)  # rho 0.5
    # (1.959964 + 0.841621) * 0.1 / 0.02 = 14.00792; squared 196.22: 197 samples.
    exact = ((Z_975 + Z_80) * 0.1 / 0.02) ** 2
    assert exact == pytest.approx(196.2219, abs=1e-4)
    assert plan.needed == 197
    # rho 0.8: sd_d^2 = 2 * 0.01 * 0.2 = 0.004, so 196.22 * 0.4 = 78.49: 79.
    assert plan_reports(BASE, PlanOptions(mde=0.02, rho=0.8)).metrics[0].needed == 79
    # one-sided: (1.644854 + 0.841621) * 5 = 12.43238; squared 154.56: 155.
    assert plan_reports(BASE, PlanOptions(mde=0.02, sides="one")).metrics[0].needed == 155
    # power 0.9: z 1.281552; (1.959964 + 1.281552) * 5 = 16.20758; squared 262.69: 263.
    assert plan_reports(BASE, PlanOptions(mde=0.02, power=0.9)).metrics[0].needed == 263


def test_the_variance_of_a_difference_under_rho() -> None:
    assert sd_of_difference(0.1, 0.5) == pytest.approx(0.1)
    assert sd_of_difference(0.1, 0.0) == pytest.approx(0.1 * math.sqrt(2))
    assert sd_of_difference(0.1, -1.0) == pytest.approx(0.2)


def test_a_whole_number_of_samples_is_not_rounded_up_past_itself() -> None:
    # sd_d / mde chosen so that the product squared is 100 up to float error.
    options = PlanOptions(mde=1.0)
    sd_d = 10.0 / options.z_sum()
    assert required_n(sd_d, options) == 100
    assert required_n(sd_d * 1.0001, options) == 101


def test_the_detectable_drop_at_the_dataset_n_reads_the_formula_backwards() -> None:
    plan = plan_reports(BASE, PlanOptions(mde=0.02)).metrics[0]
    # (1.959964 + 0.841621) * 0.1 / sqrt(3) = 0.161750 (0.1617 in the sentence)
    assert plan.detectable == pytest.approx((Z_975 + Z_80) * 0.1 / math.sqrt(3))
    assert plan.detectable == pytest.approx(0.161750, abs=1e-6)
    options = PlanOptions(mde=0.02)
    n = required_n(0.1, options)
    assert detectable_effect(0.1, n, options) <= 0.02 < detectable_effect(0.1, n - 1, options)


def test_the_cannot_detect_sentence() -> None:
    plan = plan_reports(BASE, PlanOptions(mde=0.02)).metrics[0]
    assert (plan.n, plan.enough) == (3, False)
    assert plan.message(PlanOptions(mde=0.02)) == (
        "m: needs 197 samples; the dataset has 3: it cannot detect a 0.02 drop at 80% power; "
        "it can detect 0.1617"
    )


def test_the_can_detect_sentence_and_thousands() -> None:
    values = [0.4, 0.6] * 1000 + [0.5]  # 2,001 samples
    report = make_report({"m": values})
    options = PlanOptions(mde=0.02, power=0.85)
    plan = plan_reports(report, options).metrics[0]
    assert plan.enough is True and plan.n == 2001
    message = plan.message(options)
    assert message.startswith(f"m: needs {plan.needed} samples; the dataset has 2,001: it can ")
    assert message.endswith(f"0.02 drop at 85% power (and {plan.detectable:.4f} with all 2,001)")


def test_failed_values_are_not_counted_and_constant_ones_cannot_be_planned() -> None:
    report = make_report({"m": [0.4, None, 0.6, 0.5], "flat": [1.0] * 4, "one": [None] * 3 + [1]})
    plans = {p.metric: p for p in plan_reports(report, PlanOptions(mde=0.1)).metrics}
    assert plans["m"].n == 3 and plans["m"].sd == pytest.approx(0.1)
    assert (plans["flat"].needed, plans["flat"].reason) == (
        None,
        "the baseline's values are all equal",
    )
    assert plans["one"].reason == "1 scored samples, fewer than 2"
    assert plans["flat"].message(PlanOptions(mde=0.1)) == (
        "flat: cannot plan: the baseline's values are all equal"
    )
    rows = {row[0]: row for row in plan_table(plan_reports(report, PlanOptions(mde=0.1))).rows}
    assert rows["flat"][4:] == ["–", "–", "–"]


# ---- the paired variance of a second report -------------------------------------------------


def test_a_second_report_gives_the_sd_of_the_actual_differences() -> None:
    base = make_report({"m": [1.0] * 5 + [0.0] * 5})
    new = make_report({"m": [0.0] + [1.0] * 4 + [0.0] * 4 + [1.0]})
    result = plan_reports(base, PlanOptions(mde=0.1), new=new, base_label="b", new_label="n")
    plan = result.metrics[0]
    # differences: one -1, one +1, eight 0: variance 2 / 9.
    assert plan.sd_diff == pytest.approx(math.sqrt(2 / 9))
    assert plan.needed == math.ceil((Z_975 + Z_80) ** 2 * (2 / 9) / 0.01) == 175
    assert result.variance == "paired" and result.to_dict()["rho"] is None
    # the baseline alone assumes rho 0.5: variance 10 * 0.25 / 9, so 218.02: 219.
    assert plan_reports(base, PlanOptions(mde=0.1)).metrics[0].needed == 219


def test_turn_metrics_are_listed_not_planned() -> None:
    unit = UnitResult(id="s0#t0", turn=0, scores={"turn.x": 1.0})
    report = make_report({"m": [0.4, 0.6, 0.5]})
    report.samples[0].units.append(unit)
    report.summary["turn.x"] = summarize([1.0], resamples=50, confidence=0.95, seed=0)
    result = plan_reports(report, PlanOptions(mde=0.1))
    assert [p.metric for p in result.metrics] == ["m"] and result.skipped == ["turn.x"]
    assert plan_table(result).notes[-1] == "not planned (scored per turn or step): turn.x"
    with pytest.raises(ConfigError, match="per turn or step"):
        plan_reports(report, PlanOptions(mde=0.1), metrics=["turn.x"])


# ---- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mde": 0.0}, "mde must be a positive number"),
        ({"mde": float("nan")}, "mde must be a positive number"),
        ({"mde": 0.1, "power": 0.4}, r"power must be in \[0.5, 1\)"),
        ({"mde": 0.1, "power": 1.0}, r"power must be in \[0.5, 1\)"),
        ({"mde": 0.1, "alpha": 1.0}, "alpha must be between 0 and 1"),
        ({"mde": 0.1, "rho": 1.0}, r"rho must be in \[-1, 1\)"),
        ({"mde": 0.1, "sides": "both"}, "sides must be 'two' or 'one'"),
    ],
)
def test_wrong_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PlanOptions(**options)  # type: ignore[arg-type]


def test_an_unknown_metric_names_the_ones_there() -> None:
    with pytest.raises(ConfigError, match="metric 'ndcg' is not in the baseline; there: m"):
        plan_reports(BASE, PlanOptions(mde=0.1), metrics=["ndcg"])
    other = make_report({"x": [1.0, 0.0]})
    with pytest.raises(ConfigError, match="metric 'm' is not in both reports; there: -"):
        plan_reports(BASE, PlanOptions(mde=0.1), new=other, metrics=["m"])


# ---- the command: docs/power.md's worked example, run as written ----------------------------

PAGE = (REPO / "docs" / "power.md").read_text(encoding="utf-8")
EXAMPLE = PAGE.split("## A worked example", 1)[1]
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", EXAMPLE, re.S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's Python block, run in a fresh folder: runs/base and runs/new."""
    folder = tmp_path_factory.mktemp("plan")
    code = next(text for lang, text in BLOCKS if lang == "python")
    subprocess.run([sys.executable, "-c", code], cwd=folder, check=True)
    return folder


def _cli(*argv: str) -> int:
    return main(["plan", *argv])


def test_the_worked_example_of_docs_power_prints_what_the_page_says(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(runs)
    commands = [i for i, (lang, _) in enumerate(BLOCKS) if lang == "bash"]
    assert len(commands) == 2
    for i in commands:
        (_, command), (lang, printed) = BLOCKS[i], BLOCKS[i + 1]
        assert lang == "text" and command.startswith("rag-judge plan ")
        assert _cli(*command.split()[2:]) == 0
        assert capsys.readouterr().out == printed


def test_the_command_as_json_and_markdown(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(runs)
    argv = ["--baseline", "runs/base", "--new", "runs/new", "--mde", "0.1", "-m", "hit_rate@1"]
    assert _cli(*argv, "--format", "json", "--sides", "one", "--power", "0.9") == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["variance"], out["sides"], out["power"], out["rho"]) == ("paired", "one", 0.9, None)
    (row,) = out["metrics"]
    assert row["metric"] == "hit_rate@1" and row["n"] == 40
    assert row["sd_diff"] == pytest.approx(math.sqrt(2 / 39))
    # (1.644854 + 1.281552)^2 * (2 / 39) / 0.01 = 43.90: 44.
    assert row["needed"] == 44 and row["enough"] is False
    assert row["message"].startswith("hit_rate@1: needs 44 samples; the dataset has 40: it cannot")
    assert _cli("--baseline", "runs/base", "--mde", "0.1", "--format", "md", "--rho", "0.8") == 0
    md = capsys.readouterr().out
    assert md.startswith("# Plan for `runs/base`\n\n| metric | n | sd | sd diff | needed |")
    # sd diff 0.4961 * sqrt(0.4) = 0.3138; 7.8489 * 0.24615 * 0.4 / 0.01 = 77.3: 78.
    assert "| hit_rate@1 | 40 | 0.4961 | 0.3138 | 78 | no | 0.1390 |" in md
    assert "rho = 0.8 assumed" in md


def test_command_errors_exit_2(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(runs)
    base = ["--baseline", "runs/base"]
    cases = [
        ([*base, "--mde", "0.1", "--new", "runs/new", "--rho", "0.7"], "--rho is assumed for a"),
        ([*base, "--mde", "-0.1"], "mde must be a positive number"),
        ([*base, "--mde", "0.1", "-m", "ndcg@3"], "metric 'ndcg@3' is not in the baseline"),
        (["--baseline", "runs/none", "--mde", "0.1"], "runs/none: file not found"),
    ]
    for argv, message in cases:
        assert _cli(*argv) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: --mde is required
        _cli(*base)
