"""report.html: escaping, histogram bins, the k chart, counts, and a headless-Chromium load."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge import Pipeline, Report, Sample
from rag_judge.report.html import (
    k_families,
    render_html,
    scale_of,
    svg_histogram,
    write_html,
)
from rag_judge.report.html.charts import RANGE, RUBRIC, UNIT, bin_scores
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricKind,
    MetricSummary,
    PerContextJudgment,
    RubricJudgment,
    SampleResult,
    Signature,
)
from tests import REPO

ROOT = REPO
EVIL = "<script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"
EVIL_ID = 'b"><img src=x onerror=alert(1)>'
JUDGE = MetricKind.JUDGE
RETRIEVAL = MetricKind.RETRIEVAL


def _report() -> Report:
    """Two samples: one clean; one hostile, with an unscored verdict and a failed metric."""
    a = SampleResult(
        id="a",
        scores={"ndcg@3": 1.0, "ndcg@5": 0.5, "ndcg@10": 0.25, "dcg": 3.5},
        judgments={"faithfulness": RubricJudgment(score=5, reason=EVIL, attempts=1, cached=True)},
    )
    a.scores.update({"faithfulness": 5.0, "faithfulness_norm": 1.0, "precision@3": 0.5})
    b = SampleResult(
        id=EVIL_ID,
        scores={"ndcg@3": 0.0, "ndcg@5": 0.25, "ndcg@10": 0.75, "dcg": 0.0, "precision@3": None},
        errors={
            "faithfulness": Failure(kind=FailureKind.UNSCORED, message=EVIL),
            "precision@3": Failure(message="no relevance " + EVIL),
        },
        judgments={"faithfulness": RubricJudgment(score=None, reason="unscored", raw=EVIL)},
    )
    b.scores.update({"faithfulness": None, "faithfulness_norm": None})
    ret = {"kind": RETRIEVAL}
    summary = {
        "ndcg@3": MetricSummary(mean=0.5, ci_low=0.0, ci_high=1.0, n=2, **ret),
        "ndcg@5": MetricSummary(mean=0.375, ci_low=0.25, ci_high=0.5, n=2, **ret),
        "ndcg@10": MetricSummary(mean=0.5, ci_low=0.25, ci_high=0.75, n=2, **ret),
        "precision@3": MetricSummary(mean=0.5, ci_low=0.5, ci_high=0.5, n=1, errors=1, **ret),
        "dcg": MetricSummary(mean=1.75, ci_low=0.0, ci_high=3.5, n=2, scale=(0, None), **ret),
        "faithfulness": MetricSummary(
            mean=5.0, ci_low=5.0, ci_high=5.0, n=1, errors=1, unscored=1, kind=JUDGE, scale=(1, 5)
        ),
        "faithfulness_norm": MetricSummary(
            mean=1.0, ci_low=1.0, ci_high=1.0, n=1, errors=1, kind=JUDGE, normalises="faithfulness"
        ),
    }
    return Report(
        summary=summary,
        samples=[a, b],
        signatures={"ndcg@3": Signature(name="ndcg@3", options={"k": "3", "x": EVIL})},
        config={"name": "<b>exp</b>", "dataset": "missing.jsonl", "note": EVIL},
    )


# --- pure parts -------------------------------------------------------------------------------


def test_unit_bins_are_tenths_with_one_in_the_last() -> None:
    values = [0.0, 0.05, 0.1, 0.25, 0.3, 0.5, 0.7, 0.95, 1.0, 0.1 + 0.2]
    bins = bin_scores(values, UNIT)
    assert bins.counts == [2, 1, 1, 2, 0, 1, 0, 1, 0, 2]
    assert bins.labels[0] == "0–0.1" and bins.labels[9] == "0.9–1"


def test_rubric_bins_round_half_up() -> None:
    bins = bin_scores([1, 2, 2.25, 2.5, 3, 4.49, 5, 5], RUBRIC)
    assert bins.counts == [1, 2, 2, 1, 2]
    assert bins.labels == ["1", "2", "3", "4", "5"]


def test_range_bins_span_min_to_max() -> None:
    bins = bin_scores([0.0, 5.0, 10.0, 9.99], RANGE)
    assert bins.counts == [1, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert bins.labels[5] == "5–6"
    assert bin_scores([2.0, 2.0], RANGE).counts == [2] + [0] * 9  # no zero-width bins


@given(st.floats(min_value=0.0, max_value=1.0))
def test_unit_bins_put_each_value_in_its_tenth(v: float) -> None:
    counts = bin_scores([v], UNIT).counts
    assert sum(counts) == 1
    i = counts.index(1)
    assert i / 10 <= v <= (i + 1) / 10 and (v < (i + 1) / 10 or i == 9)


def test_histogram_svg_heights_follow_counts() -> None:
    svg = svg_histogram(bin_scores([1, 2, 2, 2, 5], RUBRIC))
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', svg)]
    assert heights == pytest.approx([72 / 3, 72.0, 0.0, 0.0, 72 / 3], abs=0.05)  # plot height 72
    assert "<title>2: 3</title>" in svg and "<title>4: 0</title>" in svg


def test_scales_and_k_families() -> None:
    report = _report()
    assert scale_of("faithfulness", report) == RUBRIC  # a judge rubric on 1-5: five bars
    assert scale_of("faithfulness_norm", report) == UNIT  # its twin is continuous
    assert scale_of("ndcg@5", report) == UNIT
    assert scale_of("dcg", report) == RANGE  # unbounded: drawn between min and max
    families = k_families(report.summary)
    assert list(families) == ["ndcg"]  # precision@3 has one cut-off only
    assert [k for k, _ in families["ndcg"]] == [3, 5, 10]


# --- the page ---------------------------------------------------------------------------------


def assert_one_script(page: str) -> None:
    """The page's own script is its only one; the review mode's data block beside it is JSON
    the browser never runs, with every "<" escaped so that no text can close the block."""
    assert page.count("<script>") == 1
    blocks = page.count("<script type=application/json id=rv-data>")
    assert page.count("<script") == 1 + blocks and blocks <= 1
    if blocks:
        data = page.split("<script type=application/json id=rv-data>")[1].split("</script>")[0]
        assert "<" not in data


def test_untrusted_text_is_escaped_everywhere() -> None:
    page = render_html(_report())
    assert_one_script(page)
    assert "<img" not in page and "<b>exp</b>" not in page
    assert "&lt;script&gt;document.title=&#39;PWNED&#39;&lt;/script&gt;" in page
    assert 'id="s-b&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in page


def test_csp_pins_the_script_and_loads_nothing_remote() -> None:
    page = render_html(_report())
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page and "default-src 'none'" in page
    assert not re.search(r"\b(src|href)=\"?(https?:)?//", page)
    assert all(h.startswith("#") for h in re.findall(r'href="?([^"\s>]+)', page))


def test_summary_counts_errors_and_unscored() -> None:
    page = render_html(_report())
    row = re.search(r"<tr><th scope=row>faithfulness</th>(.*?)</tr>", page)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells[:2] == ["5.0000", "[5.0000, 5.0000]"]
    assert cells[2:5] == ["1", "1", "1"]  # n, errors, unscored
    assert "<td class='num bad'>1</td>" in row.group(1)
    assert "2 errors</span>" in page  # the hostile sample's drill-down flags its errors
    assert "<span class=bad>unscored</span>" in page


def test_k_chart_and_distributions() -> None:
    page = render_html(_report())
    assert page.count("class=kchart") == 1 and "<title>@10: 0.5</title>" in page
    assert page.count("class=hist") == 6  # not faithfulness_norm: it repeats faithfulness
    single = _report().model_copy(update={"summary": {"ndcg@3": _report().summary["ndcg@3"]}})
    assert "class=kchart" not in render_html(single)


def test_drill_down_with_and_without_the_evaluated_sample() -> None:
    report = _report()
    bare = render_html(report)
    assert "The dataset (missing.jsonl) is not embedded" in bare
    assert "↳ rank" not in bare
    report.samples[0].judgments["context_relevance"] = PerContextJudgment(
        score=2.5,
        reason="mean of 2",
        contexts=[RubricJudgment(score=3, reason="on topic", rank=1, id="d1")],
    )
    report.samples[0].sample = Sample(
        id="a", question="Why <now>?", answer="Because.", references=("Ref",)
    )
    full = render_html(report)
    assert "Why &lt;now&gt;?" in full and "Because." in full and "not embedded" not in full
    assert "↳ rank 1 · d1</span>" in full and "on topic" in full


def test_twins_are_found_by_normalises_not_by_name() -> None:
    report = _report()
    report.summary["recall_norm"] = MetricSummary(mean=0.5, n=1, kind=RETRIEVAL)  # no twin
    report.samples[0].scores["recall_norm"] = 0.5
    page = render_html(report)
    assert "<b>recall_norm</b>" in page and "<b>faithfulness_norm</b>" not in page
    assert "<th data-t=n>recall_<wbr>norm</th>" in page


def test_the_interval_level_comes_from_the_report() -> None:
    # the level stored in the report, which its config no longer decides
    stored = {"confidence": 0.9, "config": {"bootstrap": {"confidence": 0.8}}}
    report = _report().model_copy(update=stored)
    assert "<th class=num>90% CI</th>" in render_html(report)


def test_a_judgments_scoring_fields_are_shown() -> None:
    report = _report()
    report.samples[0].judgments["faithfulness"] = RubricJudgment(
        score=4.2, reason="weighted", probs={"4": 0.8, "5": 0.2}, verdict=4
    )
    page = render_html(report)
    assert "<pre class=extra>{&#34;probs&#34;: {&#34;4&#34;: 0.8, &#34;5&#34;: 0.2}, " in page
    assert "&#34;verdict&#34;: 4}</pre>" in page


def test_a_target_run_shows_the_targets_answers(tmp_path: Path) -> None:
    """Regression: report.html and report.json show what was scored, the target's answers."""
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"question {i}?",
                        "answer": f"DATASET ANSWER {i}", "references": [f"target answer {i}"]})
            + "\n"
            for i in range(3)
        )
    )  # fmt: skip
    target = tmp_path / "system.py"
    target.write_text(
        "def answer(question):\n"
        "    n = question.split()[1].rstrip('?')\n"
        "    return {'answer': f'TARGET ANSWER {n}', 'contexts': ['ctx ' + n]}\n"
    )
    config = tmp_path / "exp.yaml"
    config.write_text(f"dataset: {data}\ntarget: {target}:answer\nevaluators: [{{type: bleu}}]\n")
    result = Pipeline.from_yaml(config).run()
    paths = result.write(tmp_path / "out")
    page = paths["html"].read_text(encoding="utf-8")
    stored = paths["json"].read_text(encoding="utf-8")
    for text in (page, stored):
        assert "DATASET ANSWER" not in text
        assert all(f"TARGET ANSWER {i}" in text for i in range(3))
    assert Report.load(paths["json"]).samples[1].sample == result.samples[1]


def test_write_html(tmp_path: Path) -> None:
    path = write_html(_report(), tmp_path / "report.html")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


# --- headless Chromium ------------------------------------------------------------------------

CHROMIUM = next(
    (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None
)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH")


def _chromium(page: Path, tmp: Path, *extra: str) -> tuple[str, list[str]]:
    """Load ``page``; return the DOM after scripts ran (or stdout) and the console lines."""
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr",
        "--v=0", *extra, page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


@needs_chromium
def test_console_errors_are_detected(tmp_path: Path) -> None:
    """Control for the checks below: a failing script does show up in the console lines."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFn();</script></body></html>")
    _, console = _chromium(bad, tmp_path, "--dump-dom")
    assert any("Uncaught ReferenceError" in line for line in console)


@needs_chromium
def test_hostile_report_loads_cleanly_in_chromium(tmp_path: Path) -> None:
    page = write_html(_report(), tmp_path / "report.html")
    dom, console = _chromium(page, tmp_path, "--dump-dom")
    assert console == []  # no errors, no CSP refusals
    assert re.search(r'<body[^>]*data-ready="1"', dom)
    assert "<title>&lt;b&gt;exp&lt;/b&gt;</title>" in dom  # not PWNED
    assert "<img" not in dom


@pytest.mark.slow  # a browser test, as the others
@needs_chromium
def test_demo_report_renders_in_chromium(tmp_path: Path) -> None:
    report = Pipeline.from_yaml(ROOT / "configs" / "demo.yaml").run().report
    page = write_html(report, tmp_path / "report.html")
    dom, console = _chromium(page, tmp_path, "--dump-dom")
    assert console == []
    assert re.search(r'<body[^>]*data-ready="1"', dom)
    mean = f"{report.summary['ndcg@5'].mean:.4f}"
    assert re.search(rf"<th scope=\"row\">ndcg@5</th><td class=\"num\">{mean}</td>", dom)
    assert 'class="kchart"' in dom and dom.count("<details") == 34
    # grounding: the stub's three contradicted claims (invented figures) are highlighted
    assert dom.count('<mark class="claim contradicted"') == 3
    shot = tmp_path / "report.png"
    _chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
