"""report.html's review mode following a label plan (``rag-judge label-plan --html``): the queue
is the plan's, in its order; the page's estimate after each label is the Python function's, to
1e-9; the "stop: ±h reached" banner shows exactly when ``estimate_plan`` says so (headless
Chromium, set up as in test_review.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rag_judge.analysis.label_plan import LabelPlan, estimate_plan, make_plan, page_plan
from rag_judge.data.sample import Sample
from rag_judge.report.html import render_html, write_html
from rag_judge.report.model import (
    JuryJudgment,
    MetricKind,
    MetricSummary,
    Report,
    RubricJudgment,
    SampleResult,
)
from tests.report.test_review import (
    _keys,
    _no_console_errors,
    _open,
    _text,
    browser,
    downloads,
    needs_browser,
)

__all__ = ["browser", "downloads", "plan_report", "truth"]  # the fixtures, used below

SIZE, H = 120, 0.5


def truth(sid: str) -> int:
    """The label a person gives sample ``sid``: 1..5 by its number."""
    return 1 + int(sid[1:]) % 5


def plan_report(size: int = SIZE) -> Report:
    """``size`` samples judged by a jury of three on faithfulness: sure and right on four in
    five (no spread), split on every fifth (1, 5, 3: spread 1.63)."""
    samples = []
    for i in range(size):
        sid, y = f"q{i:03d}", truth(f"q{i:03d}")
        scores = [1.0, 5.0, 3.0] if i % 5 == 4 else [float(y)] * 3
        mean = sum(scores) / 3
        spread = (sum((s - mean) ** 2 for s in scores) / 3) ** 0.5
        jurors = [
            RubricJudgment(score=s, reason="r", judge=f"p/m{k}") for k, s in enumerate(scores)
        ]
        jury = JuryJudgment(score=mean, reason="jury mean", jury=jurors, spread=spread)
        samples.append(
            SampleResult(
                id=sid,
                scores={"faithfulness": mean},
                judgments={"faithfulness": jury},
                sample=Sample(id=sid, question=f"question {i}?", answer=f"answer {i}"),
            )
        )
    summary = {"faithfulness": MetricSummary(mean=3.0, n=size, kind=MetricKind.JUDGE, scale=(1, 5))}
    return Report(
        summary=summary,
        samples=samples,
        signatures={},
        labels={},
        config={"name": "planned"},
        created="2025-01-02T03:04:05+00:00",
    )


@pytest.fixture(scope="module")
def planned() -> tuple[Report, LabelPlan]:
    report = plan_report()
    return report, make_plan(report, H, seed=3, rate=0.4)


def test_the_page_holds_the_plan_and_a_page_without_one_is_unchanged(
    planned: tuple[Report, LabelPlan],
) -> None:
    report, plan = planned
    page = render_html(report, page_plan(plan))
    block = re.search(r"<script type=application/json id=rv-plan>(.*?)</script>", page, re.S)
    assert block is not None and json.loads(block.group(1)) == page_plan(plan)
    assert "function rvPlan(D)" in page and "id=rv-stop hidden" in page
    plain = render_html(report)
    assert "rv-plan" not in plain and "function rvPlan" not in plain and "rv-stop" not in plain


@needs_browser
@pytest.mark.slow
def test_the_review_follows_the_plan_and_says_stop_once_h_is_reached(
    planned: tuple[Report, LabelPlan], browser: Any, tmp_path: Path
) -> None:
    report, plan = planned
    page = write_html(report, tmp_path / "review.html", page_plan(plan))
    _open(browser, page)
    browser.find_element("id", "rv-start").click()
    queue = plan.queue()
    assert _text(browser, "rv-pos") == f"1 of {len(queue)}"
    labels: dict[str, dict[str, float]] = {}
    stopped_at = None
    for k, sid in enumerate(queue):
        assert _text(browser, "rv-id") == sid
        _keys(browser, str(truth(sid)), "n")
        labels[sid] = {"faithfulness": truth(sid)}
        expected = estimate_plan(plan, labels)
        status = browser.find_element("id", "rv-plan-status")
        assert expected.estimate is not None and expected.low is not None
        assert float(status.get_attribute("data-mean")) == pytest.approx(
            expected.estimate, abs=1e-9
        )
        assert float(status.get_attribute("data-low")) == pytest.approx(expected.low, abs=1e-9)
        assert int(status.get_attribute("data-labels")) == expected.labels == k + 1
        banner = browser.find_element("id", "rv-stop")
        assert banner.is_displayed() is expected.reached, k
        if expected.reached:
            stopped_at = k + 1
            assert banner.text == f"stop: ±{H:g} reached"
            break
    assert stopped_at is not None and stopped_at >= plan.min_labels  # it did stop, not too soon
    _no_console_errors(browser)
