"""report.html's review mode and the judge sections: the queue by uncertainty, the sections in
Markdown and HTML, and a person labelling three samples with keystrokes in headless Chromium
(Selenium driving Debian's chromium and chromedriver), exported as JSON Lines that
``calibrate`` reads."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_judge import Pipeline, load_config
from rag_judge.analysis.calibration import calibrate, load_labels
from rag_judge.report._review import review_data, uncertainty
from rag_judge.report.html import render_html, write_html
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import Judgment, Report
from rag_judge.resources import resource_dir

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


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    folder = tmp_path_factory.mktemp("review")
    config = folder / "review.yaml"
    data, labels = CONFIGS / "data" / "demo.jsonl", CONFIGS / "data" / "demo_labels.jsonl"
    config.write_text(JURY.format(data=data, labels=labels), encoding="utf-8")
    return Pipeline(load_config(config)).run().report


def test_uncertainty_is_the_spread_else_the_entropy() -> None:
    assert uncertainty(Judgment(score=3.0, spread=0.5)) == 0.5
    assert uncertainty(Judgment(score=3.0, spread=0.0)) is None  # everyone agreed
    half = Judgment(score=4.5, probs={"4": 0.5, "5": 0.5})
    assert uncertainty(half) == pytest.approx(1.0)  # one bit
    assert uncertainty(Judgment(score=5.0, probs={"5": 1.0})) is None
    assert uncertainty(Judgment(score=None, spread=1.0)) is None  # no verdict
    assert uncertainty(Judgment(score=4.0)) is None


def test_the_queue_puts_the_widest_jury_spread_first(report: Report) -> None:
    data = review_data(report, range(len(report.samples)))
    assert data["rubrics"] == ["faithfulness", "correctness"]
    spreads = data["uncertainty"]["faithfulness"]  # type: ignore[index]
    queue = data["queues"]["faithfulness"]  # type: ignore[index]
    expected = [r.judgments["faithfulness"].spread for r in report.samples]
    assert spreads == [s if s else None for s in expected]
    ordered = [spreads[i] for i in queue]
    known = [s for s in ordered if s is not None]
    assert known == sorted(known, reverse=True) and known[0] == max(known)
    unknown = [i for i in queue if spreads[i] is None]
    assert unknown == sorted(unknown)  # then report order
    assert ordered[: len(known)] == known  # every measured one before the rest
    assert data["labels"] == report.labels and len(report.labels) == 12


def test_the_sections_in_markdown_and_html(report: Report) -> None:
    md = render_markdown(report)
    page = render_html(report)
    faith = report.estimates["faithfulness"]
    jury = report.jury["faithfulness"]
    for text in (md, page):
        assert "Bias-corrected judge estimates" in text and "Jury agreement" in text
        assert "Judge audit" in text
        assert f"{faith.estimate:.3f}" in text and f"{faith.judge_mean:.3f}" in text
        assert jury.alpha is not None and f"{jury.alpha:.3f}" in text
    assert "stub/stub-lexical-support, stub/stub-fixed-4, stub/stub-fixed-2" in md
    assert "<a href=#estimates>" in page and "<a href=#review>" in page
    # A sample's details list each judge's verdict under the jury's.
    assert page.count("↳ judge stub/stub-fixed-4</span>") == 2 * len(report.samples)
    # A report without labels, jury or audit has none of the sections.
    bare = report.model_copy(update={"estimates": {}, "jury": {}, "audit": {}})
    assert "Bias-corrected" not in render_markdown(bare) and "Jury agreement" not in render_html(
        bare
    )


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
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it
    webdriver = None  # type: ignore[assignment]

needs_browser = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None or webdriver is None,
    reason="needs chromium, chromedriver (apt: chromium-driver) and selenium",
)


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is named: Selenium Manager never looks for (or downloads) one.
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def _keys(driver: webdriver.Chrome, *keys: str) -> None:
    for key in keys:
        ActionChains(driver).send_keys(key).perform()


@needs_browser
@pytest.mark.slow
def test_label_three_samples_with_keys_and_calibrate_the_export(
    report: Report, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    # The run's own labels would pre-fill the page; start from none, as a new reviewer.
    fresh = report.model_copy(update={"labels": {}})
    page = write_html(fresh, tmp_path / "report.html")
    browser.get(page.as_uri())
    wait = WebDriverWait(browser, 20)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-review") == "1")
    browser.find_element(By.ID, "rv-start").click()
    queue = review_data(fresh, range(len(fresh.samples)))["queues"]["faithfulness"]  # type: ignore[index]
    first = [fresh.samples[i].id for i in queue[:3]]
    assert browser.find_element(By.ID, "rv-id").text == first[0]
    # The card shows the sample's own details: its question.
    question = fresh.samples[queue[0]].sample.question  # type: ignore[union-attr]
    assert question in browser.find_element(By.ID, "rv-body").text
    _keys(browser, "4", "n", "2", "n", "5")
    assert browser.find_element(By.ID, "rv-id").text == first[2]
    _keys(browser, "b")
    assert browser.find_element(By.ID, "rv-id").text == first[1]
    assert browser.find_element(By.ID, "rv-label").text == "2"
    assert browser.find_element(By.ID, "rv-count").text == "3 labelled"
    browser.find_element(By.ID, "rv-export").click()
    exported = browser.find_element(By.ID, "rv-out").get_attribute("value") or ""
    rows = [json.loads(line) for line in exported.splitlines()]
    assert {r["id"]: r["faithfulness"] for r in rows} == dict(zip(first, [4, 2, 5]))
    # The file round-trips through calibrate (and so through the PPI estimate's label reader).
    path = tmp_path / "labels.jsonl"
    path.write_text(exported, encoding="utf-8")
    labels = load_labels(path)
    assert labels == {sid: {"faithfulness": v} for sid, v in zip(first, [4, 2, 5])}
    result = calibrate(fresh, labels)["faithfulness"]
    assert result.n == 3 and result.unpaired == 0
    # Reloaded, the page still has them (local storage), and nothing broke the CSP.
    browser.refresh()
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-review") == "1")
    assert browser.find_element(By.ID, "rv-count").text == "3 labelled"
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
