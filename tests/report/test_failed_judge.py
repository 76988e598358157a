"""A judge that produced no verdict is said so: a warning (a banner in report.html, a line in
report.md and the log), an audit with no unscored rate (not "0.0%"), and no review of verdicts
that do not exist; a judge that failed on some samples leaves those out of the review."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from markupsafe import escape

from rag_judge import JudgeEvaluator, Pipeline
from rag_judge.analysis.audit import failed_judge_warnings
from rag_judge.llm import ClientConfig
from rag_judge.report.html import render_html
from rag_judge.report.html._review import review_data, review_rubrics
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricKind,
    MetricSummary,
    Report,
    RubricJudgment,
    SampleResult,
    Signature,
    WarningKind,
)
from tests.evaluators import judge_sample

KEY = "sk-test-a-secret-that-must-not-show-0123456789"
RUBRIC = {"kind": MetricKind.JUDGE, "scale": (1.0, 5.0)}


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A base URL on 127.0.0.1 whose port is bound but not listening: every call is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_a_dead_judge_gets_a_banner_no_unscored_rate_and_no_review(
    refused_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = ClientConfig(
        provider="openai", model="gpt-4o-mini", base_url=refused_url, max_attempts=1
    )
    judge = JudgeEvaluator(rubrics=["faithfulness", "correctness"], cache=None, client=client)
    report = Pipeline([judge]).run([judge_sample(i) for i in range(4)]).report
    assert report.summary["faithfulness"].n == 0 and report.summary["faithfulness"].errors == 4

    (warning,) = report.warnings
    assert warning.kind is WarningKind.JUDGE_FAILED
    assert (warning.metric, warning.value, warning.threshold) == ("faithfulness, correctness", 4, 0)
    assert warning.message.startswith(
        "The judge openai/gpt-4o-mini produced no verdict: all 4 samples it was asked about "
        "failed, so faithfulness, correctness have no mean, no audit and nothing to review. "
        "First failure: "
    )
    assert "connection failed" in warning.message
    # the audit has no unscored rate: nothing was scored, so "0.0%" would read as a clean judge
    assert [a.unscored_rate for a in report.audit.values()] == [None, None]

    page, md = render_html(report), render_markdown(report)
    banner = f"<p class=banner><b>faithfulness, correctness.</b> {escape(warning.message)}</p>"
    assert banner in page
    assert f"- **faithfulness, correctness**: {warning.message.split(' (')[0]}" in md
    audit = page.split("<section id=audit>")[1].split("</section>")[0]
    assert "0.0%" not in audit and "0.0%" not in md.split("## Judge audit")[1]
    assert "<section id=review>" not in page and "id=rv-data" not in page
    for text in (page, md, report.to_json()):
        assert KEY not in text


def _partly_failed() -> Report:
    """faithfulness scored on a and c (b failed, d unreadable); correctness scored nowhere."""
    errors = {
        "b": Failure(kind=FailureKind.ERROR, message="timed out"),
        "d": Failure(kind=FailureKind.UNSCORED, message="no verdict in the reply"),
    }
    samples = [
        SampleResult(
            id=sid,
            scores={"faithfulness": None if sid in errors else 4.0, "correctness": None},
            errors={
                **({"faithfulness": errors[sid]} if sid in errors else {}),
                "correctness": Failure(kind=FailureKind.UNSCORED, message="no verdict"),
            },
            judgments={"faithfulness": RubricJudgment(score=None if sid in errors else 4.0)},
        )
        for sid in "abcd"
    ]
    signatures = {
        m: Signature(name=m, options={"judge": "openai/gpt-4o"})
        for m in ("faithfulness", "correctness")
    }
    return Report(
        summary={
            "faithfulness": MetricSummary(mean=4.0, n=2, errors=2, unscored=1, **RUBRIC),
            "correctness": MetricSummary(mean=None, n=0, errors=4, unscored=4, **RUBRIC),
        },
        samples=samples,
        signatures=signatures,
    )


def test_only_verdicts_that_exist_are_offered_for_review() -> None:
    report = _partly_failed()
    assert review_rubrics(report) == ["faithfulness"]  # correctness: no verdict anywhere
    data = review_data(report, range(4))
    assert data["rubrics"] == ["faithfulness"]
    assert data["queues"] == {"faithfulness": [0, 2]}  # a and c: b failed, d had no verdict
    # a page holding only samples with no verdict offers no review at all
    assert review_rubrics(report, [1, 3]) == []
    page = render_html(report)
    assert "<section id=review>" in page and '"queues": {"faithfulness": [0, 2]}' in page


def test_a_judge_whose_replies_could_not_be_read_is_warned_about_too() -> None:
    (warning,) = failed_judge_warnings(_partly_failed())
    assert warning.metric == "correctness" and warning.value == 4
    assert warning.message == (
        "The judge openai/gpt-4o produced no verdict: all 4 samples it was asked about failed, "
        "4 of them replies with no verdict to read, so correctness has no mean, no audit and "
        "nothing to review. First failure: unscored: no verdict"
    )
