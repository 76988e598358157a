"""report.html's chunk grades: people grade each query's top-k chunks 0-3 for the retrieval
metrics computed from judge grades (``relevance_from``), in a seeded random order; the export
is the label file's ``relevance`` key, which ``calibrate`` reads (headless Chromium, set up as
in test_review.py)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from rag_judge import Pipeline, Report
from rag_judge.analysis.relevance_labels import load_relevance
from rag_judge.analysis.retrieval_ppi import chunk_grading, corrected_metrics
from rag_judge.cli import main
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.judge.relevance import relevance_grade
from rag_judge.report.html import render_html, write_html
from rag_judge.report.html._review_chunks import MODE, chunk_json, chunk_review
from rag_judge.report.model import PerContextJudgment
from tests.analysis.test_retrieval_ppi import CONFIG, WORDS
from tests.report.test_review import (
    _downloaded,
    _exported,
    _keys,
    _no_console_errors,
    _open,
    _synthetic,
    _text,
    browser,
    downloads,
    needs_browser,
)

__all__ = ["browser", "downloads"]  # the fixtures, used below

N, SEED = 20, 7  # CONFIG's seed
IDS = [f"q{i:02d}" for i in range(N)]
ORDER = list(IDS)
random.Random(SEED).shuffle(ORDER)  # the queue's documented draw
NO_IDS = ORDER[1]  # its chunks have no id: its grades export as a list by rank
PREFILLED = ORDER[5]  # the run's labels grade its chunks: the page starts from them


def _run(folder: Path, labels: list[dict[str, object]]) -> Report:
    """CONFIG (a stub judge grading context_relevance; ndcg@5, P@5, R@5, MRR from its grades)
    over 20 queries of five chunks, with ``labels``; report.json is written in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(3)
    with (folder / "data.jsonl").open("w") as fh:
        for sid in IDS:
            contexts: list[dict[str, str]] = []
            for r in range(5):
                ctx = {"text": " ".join(rng.sample(WORDS, rng.randint(1, 5)))}
                contexts.append(ctx if sid == NO_IDS else {"id": f"{sid}-c{r}", **ctx})
            question = " ".join(rng.sample(WORDS, 3)) + "?"
            row = {"id": sid, "question": question, "answer": "alpha", "contexts": contexts}
            fh.write(json.dumps(row) + "\n")
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    (folder / "exp.yaml").write_text(CONFIG)
    report = Pipeline.from_yaml(folder / "exp.yaml").run().report
    (folder / "report.json").write_text(report.to_json())
    return report


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The run; its labels: a rubric label of the queue's head, the chunks of PREFILLED."""
    labels: list[dict[str, object]] = [
        {"id": ORDER[0], "context_relevance": 3},
        {"id": PREFILLED, "relevance": [1, 0, 0, 2, 0]},
    ]
    return _run(tmp_path_factory.mktemp("chunks"), labels)


def _judge(report: Report, sid: str) -> list[int]:
    """The judge's 0-3 grade of each of the sample's chunks, by rank."""
    judgment = report.samples[report.ids().index(sid)].judgments["context_relevance"]
    assert isinstance(judgment, PerContextJudgment)
    return [relevance_grade(c.score) for c in judgment.contexts if c.score is not None]


# ---- the page data ------------------------------------------------------------------------------


def test_the_queue_is_the_seeded_shuffle_and_each_card_the_top_k(graded: Report) -> None:
    data = chunk_review(graded, range(N))
    assert data is not None and data["mode"] == MODE and data["k"] == 5 and data["seed"] == SEED
    items: list[dict[str, Any]] = data["items"]  # type: ignore[assignment]
    assert [items[i]["id"] for i in data["queue"]] == ORDER  # type: ignore[attr-defined]
    assert ORDER != IDS and data["total"] == N
    head = items[IDS.index(ORDER[0])]
    assert [c["judge"] for c in head["chunks"]] == _judge(graded, ORDER[0])
    assert [c["id"] for c in head["chunks"]] == [f"{ORDER[0]}-c{r}" for r in range(5)]
    assert head["by_id"] and not items[IDS.index(NO_IDS)]["by_id"]
    # The run's own chunk grades pre-fill the page, by rank.
    assert data["labels"] == {PREFILLED: {"relevance": [1, 0, 0, 2, 0]}}
    page = render_html(graded)
    block = re.search(r"<script type=application/json id=rv-chunks>(.*?)</script>", page, re.S)
    assert block is not None and json.loads(block.group(1)) == data
    assert f"random.Random({SEED}).shuffle of their ids" in page and "function rvChunks" in page


def test_a_page_holding_some_samples_queues_them_in_the_same_order(graded: Report) -> None:
    held = [3, 0, 17, 9]
    data = chunk_review(graded, held)
    assert data is not None and data["total"] == N
    items: list[dict[str, Any]] = data["items"]  # type: ignore[assignment]
    queued = [items[i]["id"] for i in data["queue"]]  # type: ignore[attr-defined]
    assert queued == [sid for sid in ORDER if sid in {IDS[i] for i in held}]


def test_k_is_the_deepest_cut_off_the_corrections_use() -> None:
    for spec in (
        {"metrics": ["ndcg@5", "precision@3", "mrr"]},
        {"metrics": ["ndcg@10", "judged@20", "num_rel_ret", "map"]},
        {"metrics": ["recall@4", "gm_map"], "level": "document"},
        {"metrics": ["hit_rate@7"], "prefix": "x_"},
    ):
        ev = RetrievalEvaluator.model_validate({**spec, "relevance_from": "context_relevance"})
        deepest = max(int(s.k) for s in corrected_metrics(ev).values() if s.k is not None)
        found = chunk_grading([ev], 3, {})
        assert found is not None and found.k == deepest and found.seed == 3
    bare = RetrievalEvaluator.model_validate({"metrics": ["mrr", "map"]})
    assert (
        chunk_grading([bare.model_copy(update={"relevance_from": "context_relevance"})], 0, {})
        is None
    )
    assert (
        chunk_grading([RetrievalEvaluator.model_validate({"metrics": ["ndcg@5"]})], 0, {}) is None
    )


def test_a_report_without_judge_graded_retrieval_has_no_chunk_mode(graded: Report) -> None:
    for report in (_synthetic(), graded.model_copy(update={"chunk_grading": None})):
        page = render_html(report)
        assert "id=review>" in page  # the rubric review is there
        assert chunk_review(report, range(len(report.samples))) is None
        for absent in ("rv-chunks", "function rvChunks", "rv-ccard", "rv-cnote", "#rv-clist"):
            assert absent not in page


def test_the_chunk_data_cannot_close_its_block(graded: Report) -> None:
    data = chunk_review(graded, range(N))
    assert data is not None
    items: list[dict[str, Any]] = data["items"]  # type: ignore[assignment]
    items[0]["chunks"][0]["text"] = "</script><script>alert(1)</script>"
    text = chunk_json(data)
    assert "<" not in text and json.loads(text)["items"][0]["chunks"][0]["text"].startswith("</")


# ---- in a real browser ------------------------------------------------------------------------


@needs_browser
@pytest.mark.slow
def test_grade_two_queries_with_keys_and_calibrate_the_export(
    graded: Report,
    browser: Any,
    tmp_path: Path,
    downloads: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    DOWN, UP, BACKSPACE = Keys.ARROW_DOWN, Keys.ARROW_UP, Keys.BACKSPACE
    page = write_html(graded, tmp_path / "report.html")
    _open(browser, page)
    assert f"random.Random({SEED}).shuffle" in _text(browser, "rv-cnote")
    Select(browser.find_element(By.ID, "rv-rubric")).select_by_value(MODE)
    assert _text(browser, "rv-count") == "2 labelled · 1 of 20 on chunk grades"  # pre-filled
    browser.find_element(By.ID, "rv-start").click()
    assert not browser.find_element(By.ID, "rv-card").is_displayed()
    assert _text(browser, "rv-cpos") == "1 of 20" and _text(browser, "rv-cid") == ORDER[0]
    first = graded.samples[IDS.index(ORDER[0])].sample
    assert first is not None and _text(browser, "rv-cq") == first.question
    chunks = browser.find_elements(By.CSS_SELECTOR, "#rv-clist li")
    assert len(chunks) == 5 and first.contexts[0].text in chunks[0].text
    assert f"judge {_judge(graded, ORDER[0])[0]}" in chunks[0].text
    # 0-3 grade the current chunk and move on; k / ↑ go back; j / ↓ on.
    _keys(browser, "3", "0", "1", "0", "2", "k", "k", "j", "1")
    assert _text(browser, "rv-cdone").startswith("5 of 5 chunks graded")
    current = browser.find_element(By.CSS_SELECTOR, "#rv-clist li.cur")
    assert current.get_attribute("data-c") == "4"
    _keys(browser, "n")
    assert _text(browser, "rv-cid") == NO_IDS
    _keys(browser, "2", DOWN, UP, "0", "0", "9", "1", UP, "2", "3")
    assert _text(browser, "rv-cdone").startswith("5 of 5 chunks graded")
    _keys(browser, "n", "1", BACKSPACE)  # a third query, half graded: not exported
    assert _text(browser, "rv-cdone").startswith("1 of 5 chunks graded")
    assert _text(browser, "rv-count") == "3 labelled · 3 of 20 on chunk grades"
    human = {ORDER[0]: [3, 0, 1, 1, 2], NO_IDS: [2, 0, 0, 2, 3], PREFILLED: [1, 0, 0, 2, 0]}
    exported = _exported(browser)
    rows = {r["id"]: r for r in map(json.loads, exported.splitlines())}
    assert rows == {
        ORDER[0]: {  # on the same line as the sample's rubric label; by context id
            "id": ORDER[0],
            "context_relevance": 3,
            "relevance": {f"{ORDER[0]}-c{r}": g for r, g in enumerate(human[ORDER[0]])},
        },
        NO_IDS: {"id": NO_IDS, "relevance": human[NO_IDS]},  # no ids: by rank
        PREFILLED: {
            "id": PREFILLED,
            "relevance": {f"{PREFILLED}-c{r}": g for r, g in enumerate(human[PREFILLED])},
        },
    }
    path = _downloaded(downloads, "labels.jsonl")
    assert path.read_text(encoding="utf-8") == exported
    found = load_relevance(path)
    assert set(found) == set(human)
    # calibrate reads it: the corrected metrics and the human-vs-judge grade confusion.
    report_json = page.parent / "report.json"
    report_json.write_text(graded.to_json())
    assert main(["calibrate", str(report_json), str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ndcg@5"]["ppi"]["n_labelled"] == 3
    matrix = [[0] * 4 for _ in range(4)]
    for sid, grades in human.items():
        for h, j in zip(grades, _judge(graded, sid), strict=True):
            matrix[h][j] += 1
    assert out["grade_confusion"]["matrix"] == matrix
    assert main(["calibrate", str(report_json), str(path)]) == 0
    text = capsys.readouterr().out
    assert "ndcg@5" in text and "human ↓ judge →" in text
    # Reloaded, local storage keeps the grades.
    browser.refresh()
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-review") == "1"
    )
    Select(browser.find_element(By.ID, "rv-rubric")).select_by_value(MODE)
    assert _text(browser, "rv-count") == "3 labelled · 3 of 20 on chunk grades"
    browser.find_element(By.ID, "rv-start").click()
    assert _text(browser, "rv-cdone").startswith("5 of 5 chunks graded")
    # The rubric mode is still there: its card back, the chunk card hidden.
    Select(browser.find_element(By.ID, "rv-rubric")).select_by_value("context_relevance")
    assert browser.find_element(By.ID, "rv-card").is_displayed()
    assert not browser.find_element(By.ID, "rv-ccard").is_displayed()
    _no_console_errors(browser)


def test_the_card_holds_every_chunk_when_a_metric_reads_the_whole_list(graded: Report) -> None:
    """k = 3 over five retrieved chunks: P@3 alone needs the top 3 graded; with R@3 (whose
    ideal reads the whole list) the card holds all five, and a top-3 grading pre-fills the
    first three."""
    top = RetrievalEvaluator.model_validate(
        {"metrics": ["precision@3"], "relevance_from": "context_relevance"}
    )
    whole = top.model_copy(update={"metrics": ("precision@3", "recall@3")})
    for ev, shown in ((top, 3), (whole, 5)):
        grading = chunk_grading([ev], SEED, {PREFILLED: [1, 0, 2]})
        assert grading is not None and grading.k == 3 and grading.whole is (shown == 5)
        data = chunk_review(graded.model_copy(update={"chunk_grading": grading}), range(N))
        assert data is not None
        items: list[dict[str, Any]] = data["items"]  # type: ignore[assignment]
        assert {len(it["chunks"]) for it in items} == {shown}
        prefill = [1, 0, 2, *[None] * (shown - 3)]
        assert data["labels"] == {PREFILLED: {"relevance": prefill}}
