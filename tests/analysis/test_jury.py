"""The jury's agreement (``jury_agreement``) on a small report built here, against Krippendorff's
α (interval) computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag_judge.analysis.jury import jury_agreement
from rag_judge.report.model import JuryJudgment, Report, RubricJudgment, SampleResult
from rag_judge.report.samples import SampleFile

A, B, C = "openai/gpt-4o", "local/smollm2", "stub/stub-lexical-support"


def _jury(*scores: float | None, names: tuple[str | None, ...] = (A, B, C)) -> JuryJudgment:
    verdicts = [
        RubricJudgment(score=s, reason="ok" if s is not None else "judge call failed", judge=n)
        for n, s in zip(names, scores)
    ]
    scored = [s for s in scores if s is not None]
    return JuryJudgment(score=sum(scored) / len(scored), scores=scored, jury=verdicts)


def _report() -> Report:
    samples = [
        # faithfulness: the matrix [[1, 2, nan], [3, 3, 4], [5, nan, nan]]; sample 4 has no
        # verdict (a missing input), and answer_relevance was judged by one judge only
        SampleResult(id="s1", judgments={"faithfulness": _jury(1, 2, None)}),
        SampleResult(id="s2", judgments={"faithfulness": _jury(3, 3, 4)}),
        SampleResult(
            id="s3",
            judgments={
                "faithfulness": _jury(5, None, None),
                "answer_relevance": RubricJudgment(score=4, judge=A),
            },
        ),
        SampleResult(id="s4"),
    ]
    return Report(summary={}, samples=samples, signatures={})


def test_alpha_spread_units_and_failures_by_hand() -> None:
    (only,) = jury_agreement(_report()).values()
    assert only.metric == "faithfulness" and only.judges == [A, B, C]
    # Pairable units: s1 [1, 2] and s2 [3, 3, 4] (s3 has one value), n = 5 values.
    # D_o = (1/n) sum_u 2 m_u S_u / (m_u - 1) = (2*2*0.5/1 + 2*3*(2/3)/2) / 5 = 4/5
    # D_e = 2 S / (n - 1) with S = sum (v - 2.6)^2 over 1, 2, 3, 3, 4 = 5.2: 2.6
    assert only.alpha == pytest.approx(1 - (4 / 5) / 2.6)  # = 9/13
    assert only.alpha == pytest.approx(9 / 13)
    assert only.units == 2
    # population standard deviations of [1, 2] and [3, 3, 4]: 0.5 and sqrt(2)/3
    assert only.mean_spread == pytest.approx((0.5 + math.sqrt(2) / 3) / 2)
    assert only.failed == {A: 0, B: 1, C: 2}


def test_no_jury_no_agreement() -> None:
    single = SampleResult(id="s1", judgments={"faithfulness": RubricJudgment(score=3)})
    assert jury_agreement(Report(summary={}, samples=[single], signatures={})) == {}
    assert jury_agreement(Report(summary={}, samples=[], signatures={})) == {}


def test_unanimous_judges_have_no_alpha_and_no_spread() -> None:
    samples = [
        SampleResult(id="s1", judgments={"x": _jury(4, 4, 4)}),
        SampleResult(id="s2", judgments={"x": _jury(4, 4, None)}),
    ]
    agreement = jury_agreement(Report(summary={}, samples=samples, signatures={}))["x"]
    # every pairable value is the same: α is undefined (0/0), the spread is 0
    assert agreement.alpha is None and agreement.units == 2 and agreement.mean_spread == 0


def test_a_judge_seen_late_and_an_unnamed_one_get_their_own_columns() -> None:
    samples = [
        SampleResult(id="s1", judgments={"x": _jury(1, 3, names=(A, None))}),
        SampleResult(id="s2", judgments={"x": _jury(2, 4, 5, names=(A, None, C))}),
    ]
    agreement = jury_agreement(Report(summary={}, samples=samples, signatures={}))["x"]
    assert agreement.judges == [A, "judge 2", C]
    # matrix [[1, 3, nan], [2, 4, 5]]: D_o = (2*2*2/1 + 2*3*(14/3)/2) / 5 = 22/5,
    # D_e = 2 * 10 / 4 = 5 (values 1, 3, 2, 4, 5: mean 3, S = 4+0+1+1+4 = 10)
    assert agreement.alpha == pytest.approx(1 - (22 / 5) / 5)
    assert agreement.failed == {A: 0, "judge 2": 0, C: 0}


def test_a_report_whose_samples_are_in_a_file(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(
        "".join(r.model_dump_json() + "\n" for r in _report().samples), encoding="utf-8"
    )
    report = Report(summary={}, samples=SampleFile(path), signatures={})
    assert jury_agreement(report) == jury_agreement(_report())


def test_two_verdicts_under_one_name_keep_two_columns() -> None:
    samples = [SampleResult(id="s1", judgments={"x": _jury(1, 3, names=(A, A))})]
    agreement = jury_agreement(Report(summary={}, samples=samples, signatures={}))["x"]
    assert agreement.judges == [A, f"{A}#2"] and agreement.units == 1
    assert agreement.mean_spread == pytest.approx(1.0)
