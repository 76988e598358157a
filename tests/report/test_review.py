"""report.html's review mode: the queue by uncertainty (jury and sampled spreads, the entropy of
a score distribution), the page data, and a person labelling samples with keystrokes in headless
Chromium (Selenium driving Debian's chromium and chromedriver): labels kept across a reload,
kept in memory where local storage throws, and exported as JSON Lines that ``calibrate`` reads."""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_judge import Pipeline, Sample, load_config
from rag_judge.analysis.calibration import calibrate, load_labels
from rag_judge.report.html import _inline, render_html, write_html
from rag_judge.report.html._review import review_data, review_json, uncertainty
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import (
    JuryJudgment,
    MetricKind,
    MetricSummary,
    Report,
    RubricJudgment,
    SampleResult,
)
from rag_judge.resources import resource_dir
from tests.report.test_html import EVIL, EVIL_ID

CONFIGS = resource_dir("configs")
JURY = """\
name: review
dataset: {data}
labels: {labels}
evaluators:
  - type: judge
    rubrics: [faithfulness, correctness]
    cache: null
    judges:
      - {{provider: stub}}
      - {{provider: stub, stub: fixed, stub_score: 4}}
      - {{provider: stub, stub: fixed, stub_score: 2}}
"""
RUBRIC = {"kind": MetricKind.JUDGE, "scale": (1, 5)}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The demo's 34 questions judged by a jury of three stubs, with the demo's 12 labels."""
    folder = tmp_path_factory.mktemp("review")
    config = folder / "review.yaml"
    data, labels = CONFIGS / "data" / "demo.jsonl", CONFIGS / "data" / "demo_labels.jsonl"
    config.write_text(JURY.format(data=data, labels=labels), encoding="utf-8")
    return Pipeline(load_config(config)).run().report


def _jury(*scores: float) -> JuryJudgment:
    jurors = [
        RubricJudgment(score=s, reason=f"juror {k}", judge=f"p/m{k}") for k, s in enumerate(scores)
    ]
    mean = sum(scores) / len(scores)
    spread = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    return JuryJudgment(score=mean, reason="jury mean", jury=jurors, spread=spread)


def _synthetic(labels: dict[str, dict[str, float]] | None = None) -> Report:
    """Seven samples, one uncertainty signal each on faithfulness (correctness: none)."""
    faith = {
        "plain": RubricJudgment(score=4, reason="no signal"),
        "jury": _jury(1, 5, 3),  # spread 1.633
        "sampled": RubricJudgment(score=3, scores=[2.5, 3.5], spread=0.5),
        "coin": RubricJudgment(score=4.5, probs={"4": 0.5, "5": 0.5}),  # entropy 1 bit
        "agreed": RubricJudgment(score=4, scores=[4, 4, 4], spread=0.0),
        "unscored": RubricJudgment(score=None, reason="no verdict", spread=2.0),
        "wide": RubricJudgment(score=4, probs={"3": 0.25, "4": 0.5, "5": 0.25}),  # 1.5 bits
    }
    samples = [
        SampleResult(
            id=sid,
            scores={"faithfulness": j.score, "correctness": 3.0},
            judgments={"faithfulness": j, "correctness": RubricJudgment(score=3)},
            sample=Sample(id=sid, question=f"question {sid}?", answer=f"answer {sid}"),
        )
        for sid, j in faith.items()
    ]
    summary = {
        "faithfulness": MetricSummary(mean=3.9, n=6, errors=1, **RUBRIC),
        "faithfulness_norm": MetricSummary(
            mean=0.7, n=6, kind=MetricKind.JUDGE, normalises="faithfulness"
        ),
        "correctness": MetricSummary(mean=3.0, n=7, **RUBRIC),
        "claim_support": MetricSummary(mean=0.5, n=7, kind=MetricKind.JUDGE),  # a share: not 1-5
    }
    return Report(
        summary=summary,
        samples=samples,
        signatures={},
        labels=labels or {},
        config={"name": "synthetic"},
        created="2025-01-02T03:04:05+00:00",
    )


# ---- the page data ------------------------------------------------------------------------------


def test_uncertainty_is_the_spread_else_the_entropy() -> None:
    assert uncertainty(RubricJudgment(score=3.0, spread=0.5)) == 0.5
    assert uncertainty(RubricJudgment(score=3.0, spread=0.0)) is None  # everyone agreed
    half = RubricJudgment(score=4.5, probs={"4": 0.5, "5": 0.5})
    assert uncertainty(half) == pytest.approx(1.0)  # one bit
    assert uncertainty(RubricJudgment(score=4.0, probs={"4": 2.0, "5": 2.0})) == pytest.approx(1.0)
    assert uncertainty(RubricJudgment(score=5.0, probs={"5": 1.0})) is None
    assert uncertainty(RubricJudgment(score=None, spread=1.0)) is None  # no verdict
    assert uncertainty(RubricJudgment(score=4.0)) is None
    assert uncertainty(None) is None


def test_the_queue_is_most_uncertain_first_then_report_order() -> None:
    report = _synthetic()
    data = review_data(report, range(len(report.samples)))
    assert data["rubrics"] == ["faithfulness", "correctness"]  # 1-5 only: no twin, no share
    ids = [item["id"] for item in data["items"]]  # type: ignore[attr-defined]
    queue = [ids[i] for i in data["queues"]["faithfulness"]]  # type: ignore[index]
    # "unscored" has no verdict to review: not in the queue (its item stays, for its details)
    assert queue == ["jury", "wide", "coin", "sampled", "plain", "agreed"]
    keys = dict(zip(ids, data["uncertainty"]["faithfulness"]))  # type: ignore[index]
    assert keys["jury"] == pytest.approx(math.sqrt(8 / 3)) and keys["wide"] == pytest.approx(1.5)
    assert keys["plain"] is keys["agreed"] is keys["unscored"] is None
    # No signal on correctness: the report's order.
    assert data["queues"]["correctness"] == list(range(7))  # type: ignore[index]
    assert data["items"][5] == {  # type: ignore[index]
        "id": "unscored",
        "scores": {"faithfulness": None, "correctness": 3.0},
    }
    assert data["key"] == "rag-judge-review:synthetic:2025-01-02T03:04:05+00:00"
    assert data["total"] == 7


def test_the_reports_own_labels_prefill_only_whole_1_to_5_labels_of_the_rubrics() -> None:
    labels = {
        "jury": {"faithfulness": 4.0, "answer_rate": 0.0},
        "coin": {"faithfulness": 3.5},  # not a label a person gives
        "elsewhere": {"correctness": 2.0},  # a sample the page may not hold: kept
    }
    data = review_data(_synthetic(labels), range(7))
    assert data["labels"] == {"jury": {"faithfulness": 4}, "elsewhere": {"correctness": 2}}


def test_the_data_block_cannot_be_closed_by_a_sample() -> None:
    report = _synthetic()
    report.samples[0].id = "</script><script>alert(1)</script>"
    text = review_json(report, range(7))
    assert "<" not in text and json.loads(text)["items"][0]["id"] == report.samples[0].id
    page = render_html(report)
    block = re.search(r"<script type=application/json id=rv-data>(.*?)</script>", page, re.S)
    assert block is not None and json.loads(block.group(1))["items"][0]["id"].startswith("</")


def test_a_large_page_reviews_only_the_samples_it_holds(
    report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_inline, "SAMPLE_BUDGET", 40_000)  # too small for the 34 samples
    page = render_html(report)
    held = page.count("<details ")
    assert 0 < held < len(report.samples)
    block = re.search(r"id=rv-data>(.*?)</script>", page, re.S)
    assert block is not None
    data = json.loads(block.group(1))
    assert [item["id"] for item in data["items"]] == re.findall(r'<details id="s-([^"]+)"', page)
    assert data["total"] == len(report.samples)
    assert f"Only the {held} samples this page holds can be reviewed here (the report has 34;" in (
        page
    )


def test_no_review_without_a_1_to_5_rubric_or_a_sample() -> None:
    report = _synthetic()
    assert "id=review>" in render_html(report) and "<a href=#review>" in render_html(report)
    shares = {m: s for m, s in report.summary.items() if m == "claim_support"}
    for bare in (
        report.model_copy(update={"summary": shares}),
        report.model_copy(update={"samples": []}),
    ):
        page = render_html(bare)
        assert "id=rv-data" not in page and "href=#review" not in page


def test_each_jurors_verdict_is_in_the_details(report: Report) -> None:
    page = render_html(report)
    assert page.count("↳ judge stub/stub-fixed-4</span>") == 2 * len(report.samples)
    assert page.count('<tr data-rubric="faithfulness">') == 4 * len(report.samples)
    assert "Jury agreement" in page and "Jury agreement" in render_markdown(report)


# ---- in a real browser ------------------------------------------------------------------------

CHROMIUM = next(
    (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None
)
DRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it
    webdriver = None  # type: ignore[assignment]

needs_browser = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None or webdriver is None,
    reason="needs chromium, chromedriver (apt: chromium-driver) and selenium",
)
# Where local storage throws (a browser that refuses it to file:// pages), set before the page.
NO_STORAGE = """Object.defineProperty(window, "localStorage", {get: function () {
  throw new DOMException("refused", "SecurityError"); }});"""


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    folder = tmp_path / "downloads"
    folder.mkdir()
    return folder


@pytest.fixture
def browser(downloads: Path) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    # The driver is named: Selenium Manager never looks for (or downloads) one.
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: webdriver.Chrome, page: Path) -> None:
    driver.get(page.as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-review") == "1"
    )


def _keys(driver: webdriver.Chrome, *keys: str) -> None:
    for key in keys:
        ActionChains(driver).send_keys(key).perform()


def _text(driver: webdriver.Chrome, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def _exported(driver: webdriver.Chrome) -> str:
    driver.find_element(By.ID, "rv-export").click()
    return driver.find_element(By.ID, "rv-out").get_attribute("value") or ""


def _no_console_errors(driver: webdriver.Chrome) -> None:
    logs = driver.get_log("browser")  # type: ignore[no-untyped-call]
    severe = [e for e in logs if e["level"] == "SEVERE"]
    assert not severe, severe  # a CSP refusal would be one


def _downloaded(folder: Path, name: str) -> Path:
    path = folder / name
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), list(folder.iterdir())
    return path


@needs_browser
@pytest.mark.slow
def test_label_three_samples_with_keys_and_calibrate_the_export(
    report: Report, browser: webdriver.Chrome, tmp_path: Path, downloads: Path
) -> None:
    # The run's own labels would pre-fill the page; start from none, as a new reviewer.
    fresh = report.model_copy(update={"labels": {}})
    page = write_html(fresh, tmp_path / "report.html")
    _open(browser, page)
    browser.find_element(By.ID, "rv-start").click()
    queue = review_data(fresh, range(len(fresh.samples)))["queues"]["faithfulness"]  # type: ignore[index]
    first = [fresh.samples[i].id for i in queue[:3]]
    assert _text(browser, "rv-id") == first[0]
    # The card shows the sample's own details (its question), this rubric's verdict on top
    # with each juror's score and reason.
    shown = fresh.samples[queue[0]].sample
    assert shown is not None and shown.question is not None
    assert shown.question in _text(browser, "rv-body")
    score = fresh.samples[queue[0]].scores["faithfulness"]
    assert score is not None
    assert _text(browser, "rv-judge").startswith(f"faithfulness {round(score, 3):g} · uncertainty ")
    verdict = browser.find_elements(By.CSS_SELECTOR, "#rv-verdict tr")
    assert len(verdict) == 4 and verdict[0].text.startswith("faithfulness ")
    assert [v.text.split()[2] for v in verdict[1:]][1:] == [
        "stub/stub-fixed-4",
        "stub/stub-fixed-2",
    ]
    assert "Labels are saved in this browser" in _text(browser, "rv-store")
    _keys(browser, "4", "n", "2", "n", "5")
    assert _text(browser, "rv-id") == first[2] and _text(browser, "rv-pos") == "3 of 34"
    _keys(browser, "b")
    assert _text(browser, "rv-id") == first[1]
    assert _text(browser, "rv-label") == "2"
    assert _text(browser, "rv-count") == "3 labelled · 3 of 34 on faithfulness"
    exported = _exported(browser)
    rows = [json.loads(line) for line in exported.splitlines()]
    assert {r["id"]: r["faithfulness"] for r in rows} == dict(zip(first, [4, 2, 5]))
    # The download is the same file; it round-trips through calibrate.
    path = _downloaded(downloads, "labels.jsonl")
    assert path.read_text(encoding="utf-8") == exported
    labels = load_labels(path)
    assert labels == {sid: {"faithfulness": v} for sid, v in zip(first, [4, 2, 5])}
    result = calibrate(fresh, labels)["faithfulness"]
    assert result.n == 3 and result.unpaired == 0
    # Reloaded, the page still has them (local storage), and nothing broke the CSP.
    browser.refresh()
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-review") == "1"
    )
    assert _text(browser, "rv-count") == "3 labelled · 3 of 34 on faithfulness"
    browser.find_element(By.ID, "rv-start").click()
    assert _text(browser, "rv-label") == "4"
    _no_console_errors(browser)


@needs_browser
@pytest.mark.slow
def test_where_storage_throws_labels_stay_in_memory_over_the_reports_own(
    report: Report, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": NO_STORAGE})
    page = write_html(report, tmp_path / "report.html")
    _open(browser, page)
    assert "kept in memory only" in _text(browser, "rv-store")
    assert _text(browser, "rv-count") == "12 labelled · 12 of 34 on faithfulness"
    browser.find_element(By.ID, "rv-start").click()
    data = review_data(report, range(len(report.samples)))
    ids = [report.samples[i].id for i in data["queues"]["faithfulness"]]  # type: ignore[index]
    head, target = ids[0], next(sid for sid in ids if sid in report.labels)
    assert head not in report.labels and _text(browser, "rv-label") == "–"
    _keys(browser, "1", *["n"] * ids.index(target))  # label the head; on to a labelled one
    assert _text(browser, "rv-id") == target
    assert _text(browser, "rv-label") == f"{report.labels[target]['faithfulness']:g}"
    _keys(browser, "0")  # clear the report's label
    assert _text(browser, "rv-label") == "–"
    assert _text(browser, "rv-count") == "13 labelled · 12 of 34 on faithfulness"
    exported = [json.loads(line) for line in _exported(browser).splitlines()]
    expected = {sid: {"id": sid, **{m: int(v) for m, v in row.items()}} for sid, row in
                report.labels.items()}  # fmt: skip
    expected[head] = {"id": head, "faithfulness": 1}
    del expected[target]["faithfulness"]
    assert {r["id"]: r for r in exported} == expected
    order = [r.id for r in report.samples]
    assert [r["id"] for r in exported] == sorted(expected, key=order.index)  # the page's order
    _no_console_errors(browser)


@needs_browser
@pytest.mark.slow
def test_hostile_and_prototype_ids_are_labelled_as_plain_text(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    report = _synthetic()
    for r, sid in zip(report.samples, ("__proto__", EVIL_ID, "constructor")):
        r.id = sid
        r.judgments["faithfulness"] = r.judgments["faithfulness"].model_copy(
            update={"reason": EVIL}
        )
    page = write_html(report, tmp_path / "report.html")
    _open(browser, page)
    Select(browser.find_element(By.ID, "rv-rubric")).select_by_value("correctness")
    browser.find_element(By.ID, "rv-start").click()
    assert _text(browser, "rv-id") == "__proto__"
    _keys(browser, "3", "n", "4", "n", "5")
    assert _text(browser, "rv-id") == "constructor"
    assert browser.title == "synthetic"  # no injected script ran
    assert EVIL.split(">")[0] in _text(browser, "rv-body")  # shown as text
    exported = [json.loads(line) for line in _exported(browser).splitlines()]
    assert exported == [
        {"id": "__proto__", "correctness": 3},
        {"id": EVIL_ID, "correctness": 4},
        {"id": "constructor", "correctness": 5},
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in exported), encoding="utf-8")
    assert load_labels(path)["__proto__"] == {"correctness": 3}
    # Nothing leaked into every object: another sample has no label.
    _keys(browser, "n")
    assert _text(browser, "rv-id") == "coin" and _text(browser, "rv-label") == "–"
    _no_console_errors(browser)
