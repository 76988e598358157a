"""`rag-judge audit`: the judge audit of a report.json as JSON, a table and Markdown, with a
pairwise run's position consistency, and the demo run audited end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge.analysis.audit import audit_report
from rag_judge.cli import main
from rag_judge.report.model import Report
from tests import REPO
from tests.analysis.test_audit import LENGTHS, SCORES, pairwise_result, report_of

DEMO = REPO / "configs" / "demo.yaml"
DEMO_RUBRICS = ["faithfulness", "answer_relevance", "correctness", "context_relevance", "coherence"]


@pytest.fixture
def report_path(tmp_path: Path) -> Path:
    """``faith``: rising with length, a gpt judge of gpt answers; ``flat``: always 5."""
    report = report_of([*SCORES, None], [*LENGTHS, 5], generators=["gpt-4o"] * 9, unscored=1)
    report.summary["flat"] = report.summary["faith"].model_copy(
        update={"n": 9, "errors": 0, "unscored": 0}
    )
    report.signatures["flat"] = report.signatures["faith"]
    for r in report.samples:
        r.scores["flat"] = 5.0
    path = tmp_path / "report.json"
    path.write_text(report.to_json(), encoding="utf-8")
    return path


def test_json_is_the_audit_of_the_report(report_path: Path, capsys) -> None:
    assert main(["audit", str(report_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = audit_report(Report.load(report_path), seed=0)
    assert out["rubrics"] == {m: a.model_dump(mode="json") for m, a in expected.items()}
    assert (out["confidence"], out["collapse_threshold"], out["seed"]) == (0.95, 0.8, 0)
    assert out["pairwise"] is None
    faith, flat = out["rubrics"]["faith"], out["rubrics"]["flat"]
    assert faith["length_slope"] == pytest.approx(100 * 245 / 4200)
    assert faith["unscored_rate"] == pytest.approx(1 / 9)
    assert faith["self_preference"] is True
    assert (flat["modal_score"], flat["modal_share"], flat["collapsed"]) == (5.0, 1.0, True)


def test_the_seed_defaults_to_the_runs(report_path: Path, capsys) -> None:
    report = Report.load(report_path)
    report.config["seed"] = 7
    report_path.write_text(report.to_json(), encoding="utf-8")
    assert main(["audit", str(report_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seed"] == 7
    ci = audit_report(report, seed=7)["faith"].length_slope_ci
    assert tuple(out["rubrics"]["faith"]["length_slope_ci"]) == ci
    assert main(["audit", str(report_path), "--format", "json", "--seed", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 1


def test_the_table(report_path: Path, capsys) -> None:
    assert main(["audit", str(report_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "rubric", "n", "slope", "/100w", "95%", "CI", "means", "by", "length", "quartile",
        "mode", "(share)", "unscored", "self-preference",
    ]  # fmt: skip
    faith = lines[1].split()
    # 8 answers of 10..80 words: quartile means 1.5, 2.5, 3.5, 5; modes 2, 3 and 5 tie at 2/8
    assert faith[:3] == ["faith", "8", "+5.833"]
    assert faith[5:] == ["1.50", "2.50", "3.50", "5.00", "2", "(25%)", "11.1%", "yes"]
    assert lines[2].split() == [
        "flat", "9", "+0.000", "[0.000,", "0.000]", "5.00", "5.00", "5.00", "5.00", "5",
        "(100%)", "COLLAPSED", "0.0%", "yes",
    ]  # fmt: skip
    text = "\n".join(lines)
    assert (
        "length quartiles (words): faith: 10-20 (n 2), 30-40 (n 2), 50-60 (n 2), 70-80 (n 2)"
        in (text)
    )
    assert "self-preference: faith: judge family gpt (openai/gpt-4o-mini) generated 8/8" in text
    assert "self-preference: flat: judge family gpt (openai/gpt-4o-mini) generated 9/9" in text
    assert "COLLAPSED at a share ≥ 0.8" in text


def test_markdown_and_a_pairwise_run(report_path: Path, tmp_path: Path, capsys) -> None:
    pairwise = tmp_path / "pairwise.json"
    pairwise.write_text(json.dumps(pairwise_result().to_dict()))
    args = ["audit", str(report_path), "--format", "md", "--pairwise", str(pairwise)]
    assert main([*args, "--collapse-threshold", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| rubric | n | slope /100w | 95% CI |")
    assert (
        "| flat | 9 | +0.000 | [0.000, 0.000] | 5.00 5.00 5.00 5.00 | 5 (100%) COLLAPSED |" in out
    )
    assert "- pairwise correctness: position consistency 0.6667 over 3 scored pairs" in out
    assert main(["audit", str(report_path), "--format", "json", "--pairwise", str(pairwise)]) == 0
    pair = json.loads(capsys.readouterr().out)["pairwise"]
    assert pair["position_consistency"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--collapse-threshold", "1.2"], "collapse_threshold 1.2 is not a share"),
        (["--pairwise", "nowhere.json"], "nowhere.json: file not found"),
    ],
)
def test_bad_input_exits_2(report_path: Path, capsys, extra: list[str], message: str) -> None:
    assert main(["audit", str(report_path), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_report_without_judge_rubrics(tmp_path: Path, capsys) -> None:
    path = tmp_path / "report.json"
    path.write_text(Report(summary={}, samples=[], signatures={}).to_json())
    assert main(["audit", str(path)]) == 0
    assert "no judge rubric on a 1-5 scale in the report" in capsys.readouterr().out


def test_the_demo_run_audited_end_to_end(tmp_path: Path, capsys) -> None:
    assert main(["run", str(DEMO), "--out", str(tmp_path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["audit", str(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["rubrics"]) == DEMO_RUBRICS  # not the twins, rates or *_answered
    # The quartiles of the 34 answers' lengths, counted here from the dataset.
    rows = [json.loads(line) for line in (DEMO.parent / "data/demo.jsonl").read_text().splitlines()]
    lengths = sorted(len(r["answer"].split()) for r in rows)
    bounds = [(lengths[a], lengths[b - 1]) for a, b in ((0, 9), (9, 18), (18, 26), (26, 34))]
    for audit in out["rubrics"].values():
        assert audit["n"] == 34 and audit["unscored_rate"] == 0.0
        assert [(s["low"], s["high"]) for s in audit["length_strata"]] == bounds
        assert [s["n"] for s in audit["length_strata"]] == [9, 9, 8, 8]
        assert audit["self_preference"] is None  # the demo records no generator
    coherence = out["rubrics"]["coherence"]  # the stub scores coherence 5 throughout
    assert (coherence["modal_score"], coherence["modal_share"], coherence["collapsed"]) == (
        5.0,
        1.0,
        True,
    )
    assert main(["audit", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "coherence" in table and "COLLAPSED" in table


def test_a_run_level_generator_of_the_judges_family(tmp_path: Path, capsys) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"name: self\ndataset: {DEMO.parent / 'data/demo.jsonl'}\ngenerator: stub/stub-echo\n"
        "evaluators:\n  - type: judge\n    rubrics: [correctness]\n    cache: null\n",
        encoding="utf-8",
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["audit", str(tmp_path / "run"), "--format", "json"]) == 0
    audit = json.loads(capsys.readouterr().out)["rubrics"]["correctness"]
    assert audit["self_preference"] is True
    assert audit["self_preference_note"].startswith(
        "judge family stub (stub/stub-lexical-support) generated 34/34 judged answers"
    )
