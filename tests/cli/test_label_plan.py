"""``rag-judge label-plan``: the plan file (seeded, the uncertain samples likelier queued), the
estimate from a label file (labels outside the plan not used), the review page, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_judge.analysis.calibration import load_labels
from rag_judge.analysis.label_plan import (
    LabelPlan,
    estimate_plan,
    make_plan,
    verdict_uncertainty,
)
from rag_judge.cli import main
from rag_judge.report.html._review import uncertainty
from rag_judge.report.model import RubricJudgment
from rag_judge.stats.active_ppi import MIN_LABELS, MIX
from tests import REPO
from tests.report.test_review_plan import plan_report, truth


@pytest.fixture
def report_path(tmp_path: Path) -> Path:
    path = tmp_path / "report.json"
    path.write_text(plan_report().to_json(), encoding="utf-8")
    return path


def _labels(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": s, "faithfulness": truth(s)}) + "\n" for s in ids))
    return path


def test_the_plan_is_seeded_and_favours_the_uncertain(report_path: Path) -> None:
    report = plan_report()
    plan = make_plan(report, 0.5, seed=3, rate=0.4)
    assert plan == make_plan(report, 0.5, seed=3, rate=0.4)
    assert plan.queue() != make_plan(report, 0.5, seed=4, rate=0.4).queue()
    assert plan.rule == "uncertainty" and len(plan.stream) == 120
    assert sorted(i.id for i in plan.stream) == [r.id for r in report.samples]
    pi = {i.id: i.pi for i in plan.stream}
    split, sure = pi["q004"], pi["q000"]  # every fifth sample's jury is split
    assert split > sure >= MIX * 0.4 and np.mean(list(pi.values())) == pytest.approx(0.4)
    # the queue: exactly those whose seeded draw fell under their pi, in stream order
    assert plan.queue() == [i.id for i in plan.stream if i.queued]


def test_without_a_signal_the_plan_is_uniform() -> None:
    report = plan_report()
    for r in report.samples:  # one judge, no disagreement recorded
        r.judgments["faithfulness"] = RubricJudgment(score=r.scores["faithfulness"])
    plan = make_plan(report, 0.5, seed=3, rate=0.4)
    assert plan.rule == "uniform" and {i.pi for i in plan.stream} == {0.4}


def test_the_uncertainty_is_the_review_modes() -> None:
    for j in plan_report().samples[:5]:
        assert verdict_uncertainty(j.judgments["faithfulness"]) == uncertainty(
            j.judgments["faithfulness"]
        )
    probs = RubricJudgment(score=4.5, probs={"4": 0.5, "5": 0.5})
    assert verdict_uncertainty(probs) == uncertainty(probs) == pytest.approx(1.0)


def test_the_estimate_stops_at_the_first_unlabelled_queued_sample() -> None:
    plan = make_plan(plan_report(), 0.5, seed=3, rate=0.4)
    queue = plan.queue()
    skipped = {s: {"faithfulness": float(truth(s))} for s in queue[:5] + queue[6:9]}
    outside = next(i.id for i in plan.stream if not i.queued)
    skipped[outside] = {"faithfulness": 1.0}
    result = estimate_plan(plan, skipped)
    assert result.labels == 5 and result.next_id == queue[5] and result.outside == 1
    steps = [i.id for i in plan.stream].index(queue[5])
    assert result.steps == steps and not result.reached
    assert "label " + queue[5] + " next" in result.status(0.5)
    assert estimate_plan(plan, {}).estimate is None


def test_plan_then_estimate_from_the_command_line(
    report_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["label-plan", str(report_path), "--target-halfwidth", "0.5", "--seed", "3"]
    assert main([*args, "--rate", "0.4", "--html"]) == 0
    out = capsys.readouterr().out
    plan = LabelPlan.load(tmp_path / "plan.json")
    assert f"{len(plan.queue())} of 120 samples queued (rate 0.4, pi by uncertainty)" in out
    assert f"label in this order: {', '.join(plan.queue()[:10])}, ..." in out
    assert "id=rv-plan>" in (tmp_path / "review.html").read_text(encoding="utf-8")
    labels = _labels(tmp_path / "labels.jsonl", plan.queue())
    plan_args = ["label-plan", str(report_path), "--plan", str(tmp_path / "plan.json")]
    assert main([*plan_args, "--labels", str(labels)]) == 0
    line = capsys.readouterr().out.strip()
    expected = estimate_plan(plan, {s: {"faithfulness": truth(s)} for s in plan.queue()})
    assert expected.reached and line == expected.status(0.5)
    assert line.endswith("; stop: ±0.5 reached")
    # The planned rate (no --rate): the smallest that reaches ±0.9 h halfway, by its guess.
    assert main([*args, "--out", str(tmp_path / "auto.json")]) == 0
    assert 0 < LabelPlan.load(tmp_path / "auto.json").rate <= 1


def test_bad_input_is_exit_2(
    report_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["label-plan", str(report_path)]) == 2
    assert "needs --target-halfwidth" in capsys.readouterr().err
    bad = ["label-plan", str(report_path), "--target-halfwidth"]
    assert main([*bad, "0.5", "--rubric", "nope"]) == 2
    assert main([*bad, "-1"]) == 2
    other = plan_report().model_copy(update={"created": "2030-01-01T00:00:00+00:00"})
    path = tmp_path / "plan.json"
    path.write_text(make_plan(other, 0.5, rate=0.4).model_dump_json(), encoding="utf-8")
    assert main(["label-plan", str(report_path), "--plan", str(path)]) == 2
    assert "is a plan for report" in capsys.readouterr().err


def test_the_docs_worked_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commands and outputs of docs/judge-estimates.md ("Spending labels where they
    help"), run in a folder of their own."""
    docs = (REPO / "docs" / "judge-estimates.md").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    Path("report.json").write_text(plan_report().to_json(), encoding="utf-8")
    made = "label-plan report.json --target-halfwidth 0.5 --seed 3 --rate 0.4 --html"
    assert main(made.split()) == 0
    outputs = [f"$ rag-judge {made}\n{capsys.readouterr().out}"]
    queue = LabelPlan.load("plan.json").queue()
    for n in (20, 32):
        _labels(Path("labels.jsonl"), queue[:n])
        estimate = "label-plan report.json --plan plan.json --labels labels.jsonl"
        assert main(estimate.split()) == 0
        outputs.append(f"$ rag-judge {estimate}\n{capsys.readouterr().out}")
    assert outputs[0] in docs
    assert "".join(outputs[1:]) in docs


def test_a_run_folder_gets_the_plan_and_the_page(
    report_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = report_path.parent
    args = ["label-plan", str(folder), "--target-halfwidth", "0.5", "--rate", "0.4", "--html"]
    assert main(args) == 0
    assert (folder / "plan.json").is_file() and (folder / "review.html").is_file()
    assert f"plan written to {folder / 'plan.json'}" in capsys.readouterr().out


def test_options_that_make_a_plan_are_refused_with_one(
    report_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    assert main(["label-plan", str(report_path), "--target-halfwidth", "0.5", "--rate", "0.4"]) == 0
    capsys.readouterr()
    assert main(["label-plan", str(report_path), "--plan", str(plan), "--rate", "0.9"]) == 2
    assert "--rate: the plan given by --plan fixes them" in capsys.readouterr().err
    missing = tmp_path / "nowhere" / "plan.json"
    made = ["label-plan", str(report_path), "--target-halfwidth", "0.5", "--out", str(missing)]
    assert main(made) == 2
    assert f"folder {missing.parent} does not exist" in capsys.readouterr().err


def test_the_interval_is_shown_from_the_minimum_labels(tmp_path: Path) -> None:
    plan = make_plan(plan_report(), 0.5, seed=3, rate=0.4)
    queue = plan.queue()
    for n, shown in ((3, False), (MIN_LABELS, True)):
        labels = load_labels(_labels(tmp_path / f"{n}.jsonl", queue[:n]))
        status = estimate_plan(plan, labels).status(0.5)
        assert ("±" in status) is shown, status
        assert (f"shown from {MIN_LABELS}" in status) is not shown
