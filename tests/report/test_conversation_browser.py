"""The conversation view of report.html in headless Chromium: a run of two conversations
shows each turn, its steps and a tool call, the degraded turn and the step named highlighted,
and hostile text from the data stays text (no element, no script ran)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_judge.report.html import write_html
from tests.report.conversations import C1, C2, HOSTILE_ARG, HOSTILE_ID, HOSTILE_Q, report
from tests.report.test_review import _no_console_errors, browser, downloads, needs_browser

__all__ = ["browser", "downloads"]  # the fixtures, used by name

try:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it; needs_browser skips then
    pass


def _style(driver: Any, element: Any, prop: str) -> str:
    return str(driver.execute_script(f"return getComputedStyle(arguments[0]).{prop};", element))


@needs_browser
@pytest.mark.slow
def test_the_conversation_view_shows_turns_steps_and_where_it_degraded(
    browser: Any, tmp_path: Path
) -> None:
    page = write_html(report([C1, C2]), tmp_path / "report.html")
    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    )
    browser.find_element(By.CSS_SELECTOR, '#matrix a[href="#s-c1"]').click()
    c1 = browser.find_element(By.ID, "s-c1")
    assert c1.get_attribute("open") is not None
    turns = c1.find_elements(By.CSS_SELECTOR, "li.turn")
    assert [t.get_attribute("data-turn") for t in turns] == ["0", "1"]
    assert all(t.is_displayed() for t in turns)
    assert "Q: first question" in turns[0].text and "A: second answer" in turns[1].text
    steps = [s.find_elements(By.CSS_SELECTOR, "li.step") for s in turns]
    assert [len(s) for s in steps] == [2, 2]
    tool = turns[1].find_element(By.CSS_SELECTOR, "li.step.tool")
    assert tool.text.startswith("step 0 tool call calc") and '{"x": 1}' in tool.text
    assert "→ 7" in tool.text
    # the degraded turns and each named step stand out in the page's "bad" colour
    assert all("degraded" in (t.get_attribute("class") or "") for t in turns)
    hops = c1.find_elements(By.CSS_SELECTOR, "li.step.hop")
    assert [h.get_attribute("data-step") for h in hops] == ["0", "0"]
    bad = _style(browser, turns[0], "borderLeftColor")
    assert bad == "rgb(180, 77, 18)"
    assert _style(browser, hops[0], "borderTopColor") == bad
    assert _style(browser, steps[0][1], "borderTopColor") != bad  # the second hop was fine
    assert "step.ndcg@10 0.6309 (>= 0.9)" in hops[0].text
    assert "tool call calc" in hops[1].text and "matched no expected call" in hops[1].text
    # the hostile id, question and argument are text
    browser.find_element(By.ID, "openall").click()
    c2 = browser.find_element(By.CSS_SELECTOR, "#details details:nth-of-type(2)")
    assert c2.get_attribute("data-id") == HOSTILE_ID
    assert c2.find_element(By.CSS_SELECTOR, "p.q").text == f"Q: {HOSTILE_Q}"
    assert HOSTILE_ARG in c2.find_element(By.CSS_SELECTOR, "pre.args").text
    assert browser.find_elements(By.TAG_NAME, "img") == []
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it asks whether an alert is open
    _no_console_errors(browser)
