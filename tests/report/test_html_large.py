"""report.html stays small whatever the number of samples (issue 12 item 2): every sample while
they fit in the page's budget; past it, the samples that tell most (failed, lowest, most
uncertain) and a seeded random draw, texts cut, with the counts stated; charts over all."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge import Report, Sample
from rag_judge.report.html import (
    INLINE_ROWS,
    SAMPLE_BUDGET,
    _inline,
    _picks,
    render_html,
    write_html,
)
from rag_judge.report.html.charts import RANGE, RUBRIC, UNIT, Scale, bin_blocks, bin_scores
from rag_judge.report.model import (
    MetricKind,
    MetricSummary,
    PerContextJudgment,
    RubricJudgment,
    SampleResult,
)
from rag_judge.stats import pages
from tests.report.synthetic import big_report
from tests.report.test_html import _chromium, _report, assert_one_script, needs_chromium

BIG = 100_000
MB5 = 5_000_000


@pytest.fixture(scope="module")
def big() -> Report:
    return big_report(BIG)


@pytest.fixture(scope="module")
def big_page(big: Report) -> str:
    return render_html(big)


@pytest.fixture(scope="module")
def mid() -> Report:
    """2,000 samples of ten 400-1,200 character contexts: past the budget, quick to render."""
    return big_report(2_000, seed=1)


@pytest.fixture(scope="module")
def mid_page(mid: Report) -> str:
    return render_html(mid)


def _shown(page: str) -> int:
    found = re.search(r"Showing ([\d,]+) of ([\d,]+) samples", page)
    assert found is not None
    return int(found.group(1).replace(",", ""))


def _tags(page: str) -> dict[str, str]:
    """Sample id -> the tag that says why the sample is on the page."""
    details = r'<details id="s-[^"]*" data-id="([^"]*)"[^>]*><summary>[^<]*'
    tag = r"(?:<span class=bad>[^<]*</span>)? <span class=tag>([^<]*)</span>"
    return dict(re.findall(details + tag, page))


def _histogram(page: str, metric: str) -> list[int]:
    card = re.search(rf"<figcaption><b>{re.escape(metric)}</b>.*?</svg>", page, re.S)
    assert card is not None
    return [int(c) for c in re.findall(r"<title>[^<]*: (\d+)</title>", card.group(0))]


# --- 100,000 samples ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_page_of_100000_samples_stays_under_5_mb_and_states_its_counts(
    big: Report, big_page: str
) -> None:
    assert len(big_page.encode("utf-8")) < MB5
    shown = _shown(big_page)
    assert 500 <= shown <= INLINE_ROWS
    assert big_page.count("<details ") == shown
    assert len(re.findall(r"<tr data-id=", big_page)) == shown
    assert f"<p class=meta>{BIG} samples ({shown:,} in the sample table) · " in big_page
    counts = re.search(
        r"picked: ([\d,]+) where a metric failed \(of ([\d,]+) such samples\); ([\d,]+) more "
        r"among the (\d+) lowest of each metric .*?; ([\d,]+) more among the (\d+) most "
        r"uncertain verdicts of each judge rubric .*?; and ([\d,]+) drawn at random \(seed 0\) "
        r"from the other ([\d,]+)\.",
        big_page,
    )
    assert counts is not None
    failed, failing, lowest, _, uncertain, _, drawn, rest = (
        int(g.replace(",", "")) for g in counts.groups()
    )
    assert failed + lowest + uncertain + drawn == shown
    assert failing == sum(1 for r in big.samples if r.errors)
    assert rest == BIG - failed - lowest - uncertain
    tags = list(_tags(big_page).values())
    assert sum(t == "random" for t in tags) == drawn
    assert sum(t.startswith("uncertain ") for t in tags) == uncertain
    assert "report.json holds every sample in full" in big_page
    assert "… (truncated, " in big_page  # the contexts of 400-1,200 characters are cut


@pytest.mark.slow  # builds and renders the 100,000-sample report, as its neighbours do
def test_the_charts_and_the_summary_count_every_sample(big: Report, big_page: str) -> None:
    """The histograms are binned over all 100,000 values, not over the rows on the page."""
    shown_ids = set(_tags(big_page))
    for metric, width in (("ndcg@5", 0.1), ("rougeL_f1", 0.1), ("faithfulness", None)):
        values = [v for r in big.samples if (v := r.scores[metric]) is not None]
        if width is None:  # a 1-5 rubric: one bar per verdict
            expected = [sum(v == k for v in values) for k in (1, 2, 3, 4, 5)]
        else:
            expected = [0] * 10
            for v in values:
                expected[min(int(v * 10), 9)] += 1
        assert _histogram(big_page, metric) == expected
        assert sum(expected) == big.summary[metric].n == len(values) > BIG * 0.98
        on_page = [r.scores[metric] for r in big.samples if r.id in shown_ids]
        assert sum(expected) > 100 * len(on_page)
    row = re.search(r"<tr><th scope=row>faithfulness</th>(.*?)</tr>", big_page)
    assert row is not None
    s = big.summary["faithfulness"]
    assert f"<td class=num>{s.mean:.4f}</td>" in row.group(1)
    assert f"<td class=num>{s.n}</td>" in row.group(1) and s.n < BIG and s.unscored > 0


@pytest.mark.slow
@needs_chromium
def test_chromium_opens_the_page_of_100000_samples(big_page: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(big_page, encoding="utf-8")
    dom, console = _chromium(page, tmp_path, "--dump-dom")
    assert console == []  # no errors, no CSP refusals
    assert re.search(r'<body[^>]*data-ready="1"', dom)
    assert dom.count("<details") == _shown(big_page)
    assert 'id="inline"' in dom and "of 100,000 samples" in dom


# --- which samples a page past its budget holds -----------------------------------------------


def test_the_page_holds_each_metrics_lowest_and_the_failed_samples(
    mid: Report, mid_page: str
) -> None:
    assert len(mid_page.encode("utf-8")) < SAMPLE_BUDGET + 200_000
    tags = _tags(mid_page)
    shown = _shown(mid_page)
    assert len(tags) == shown < len(mid.samples)
    failing = [r.id for r in mid.samples if r.errors]
    assert 0 < len(failing) <= 100 and all(i in tags for i in failing)
    assert any(t == "faithfulness unscored" for t in tags.values())
    assert any(t == "bertscore_f1 failed" for t in tags.values())
    for metric, s in mid.summary.items():
        if s.normalises is not None:
            continue
        values = {r.id: v for r in mid.samples if (v := r.scores[metric]) is not None}
        pick = max if s.kind is MetricKind.LATENCY else min
        extreme = pick(values.values())
        first = next(i for i, v in values.items() if v == extreme)  # the earliest among ties
        assert first in tags, metric
    widest = max(
        (j.spread or 0, r.id) for r in mid.samples if (j := r.judgments["correctness"]).score
    )
    assert widest[1] in tags and "spread" in mid_page
    assert [i for i in tags if tags[i] == "random"]  # the rest of the page: a seeded draw
    assert list(tags) == sorted(tags)  # shown in the report's order


def test_the_selection_is_the_same_on_every_render(mid: Report, mid_page: str) -> None:
    assert render_html(mid) == mid_page


def test_uncertain_verdicts_by_probability_where_none_was_sampled() -> None:
    report = _many(120, per=50_000)  # the lowest recall: s119, s118, ...
    for i, r in enumerate(report.samples):
        top = 0.5 if i == 37 else 0.9 if i % 2 else 1.0
        r.judgments["faithfulness"] = RubricJudgment(score=4.0, probs={"4": top, "5": 1 - top})
        r.scores["faithfulness"] = 5.0 if i == 37 else 4.0  # not among the lowest
    report.summary["faithfulness"] = MetricSummary(
        mean=4.0, n=120, kind=MetricKind.JUDGE, scale=(1, 5)
    )
    tags = _tags(render_html(report))
    assert tags["s037"] == "uncertain faithfulness (top verdict p=0.5)"
    assert tags["s119"] == "lowest recall"


def _many(n: int, per: int) -> Report:
    """``n`` samples with an answer of ``per`` characters each, one metric."""
    samples = [
        SampleResult(
            id=f"s{i:03d}",
            scores={"recall": 1 - i / n},
            sample=Sample(id=f"s{i:03d}", question="q?", answer="x" * per),
        )
        for i in range(n)
    ]
    summary = {"recall": MetricSummary(mean=0.5, n=n, kind=MetricKind.RETRIEVAL)}
    return Report(summary=summary, samples=samples, signatures={})


def test_a_page_of_all_samples_with_texts_cut_says_so() -> None:
    report = _many(300, per=20_000)  # 6 MB in full; 300 answers of 1,500 characters fit
    page = render_html(report)
    assert page.count("<details ") == 300
    assert "Showing all 300 samples, but not in full: that would make this page too large." in page
    assert "x" * 1_500 + "… (truncated, 20,000 characters)</p>" in page
    assert "x" * 1_501 not in page


def test_a_cut_sample_keeps_its_grades_and_says_what_it_leaves_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    contexts = [{"id": f"d{k}", "text": f"text {k} " + "y" * 2_000} for k in range(30)]
    sample = Sample.model_validate(
        {
            "id": "big",
            "question": "q?",
            "answer": "a",
            "contexts": contexts,
            # d25 is retrieved (rank 26, beyond those listed): it is not "not retrieved"
            "relevance": {"d25": 3, "d3": 1, **{f"m{k}": 1 for k in range(25)}},
        }
    )
    verdicts = [
        RubricJudgment(score=1, reason="r" * 900, rank=k + 1, id=f"d{k}") for k in range(30)
    ]
    result = SampleResult(
        id="big",
        scores={"recall": 0.5},
        judgments={
            "context_relevance": PerContextJudgment(score=1, reason="mean", contexts=verdicts)
        },
        sample=sample,
    )
    summary = {"recall": MetricSummary(mean=0.5, n=1, kind=MetricKind.RETRIEVAL)}
    report = Report(summary=summary, samples=[result], signatures={})
    monkeypatch.setattr(_inline, "SAMPLE_BUDGET", 40_000)  # the sample whole is ~90 KB
    page = render_html(report)
    assert "Showing all 1 samples, but not in full" in page
    assert page.count("<li><b>d") == 20 and "<li><b>d19</b>" in page
    assert "… and 10 more contexts (in report.json)</p>" in page
    assert "<span class=tag>grade 1</span> text 3 " + "y" * 293 + "… (truncated, 2,007" in page
    assert "relevant but not retrieved:</b> m0 (grade 1), m1 (grade 1)" in page
    assert "m19 (grade 1) and 5 more</p>" in page and "d25 (grade" not in page
    assert page.count("↳ rank") == 20 and "r" * 500 + "… (truncated, 900 characters)" in page


def test_untrusted_text_is_escaped_on_a_page_past_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_inline, "SAMPLE_BUDGET", 2_000)  # 2.3 KB whole; one sample fits
    page = render_html(_report())
    assert _shown(page) == 1
    assert_one_script(page)
    assert "<img" not in page
    assert 'id="s-b&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in page  # failed: it is first
    assert "<span class=tag>faithfulness unscored</span>" in page


def test_a_page_within_its_budget_holds_every_sample_whole() -> None:
    report = big_report(300)  # 3.4 MB: under the budget
    page = render_html(report)
    assert page.count("<details ") == 300 and "truncated" not in page
    assert "Showing" not in page and "<span class=tag>lowest" not in page
    assert "<p class=meta>300 samples · " in page
    assert "id=inline" not in render_html(_report())


def test_write_html_of_a_large_report(tmp_path: Path) -> None:
    path = write_html(big_report(3_000), tmp_path / "report.html")
    assert path.stat().st_size < MB5


# --- the bins, vectorised -----------------------------------------------------------------------


def _bins_one_by_one(values: list[float], scale: Scale) -> list[int]:
    """The histogram as it was counted before numpy, value by value."""
    if scale.discrete and scale.hi is not None:
        first, last = int(scale.lo), int(scale.hi)
        counts = [0] * (last - first + 1)
        for v in values:
            counts[min(max(math.floor(v + 0.5), first), last) - first] += 1
        return counts
    lo, hi = (scale.lo, scale.hi) if scale.hi is not None else (min(values), max(values))
    span = hi - lo or 1.0
    counts = [0] * 10
    for v in values:
        counts[min(max(math.floor((v - lo) * 10 / span), 0), 9)] += 1
    return counts


@given(st.lists(st.floats(min_value=-1, max_value=7, allow_nan=False), min_size=1))
def test_the_bins_are_those_counted_one_by_one(values: list[float]) -> None:
    for scale in (UNIT, RUBRIC, RANGE, Scale(0.0, 2.5)):
        assert bin_scores(values, scale).counts == _bins_one_by_one(values, scale)
    unread = [*values, math.nan, math.inf, -math.inf]  # not counted
    assert bin_scores(unread, RANGE).counts == _bins_one_by_one(values, RANGE)


@given(
    st.lists(st.floats(min_value=-1, max_value=7, allow_nan=False), min_size=1),
    st.integers(1, 5),
)
def test_bins_read_a_block_at_a_time_are_those_of_every_value(
    values: list[float], size: int
) -> None:
    parts = [values[i : i + size] for i in range(0, len(values), size)]
    for scale in (UNIT, RUBRIC, RANGE, Scale(0.0, 2.5)):
        whole = bin_scores(values, scale)
        assert bin_blocks(lambda: parts, scale) == whole
    assert bin_blocks(lambda: [[math.nan], []], RANGE) == bin_scores([], RANGE)


# --- the lowest and the most uncertain, a block at a time ---------------------------------------


def _first_k_whole(keys: np.ndarray, k: int) -> list[int]:
    """The way before blocks: the whole column's k smallest, the earliest first among ties."""
    valid = np.flatnonzero(~np.isnan(keys))
    if valid.size > k:
        kth = np.partition(keys[valid], k - 1)[k - 1]
        valid = valid[keys[valid] <= kth]
    return [int(i) for i in valid[np.argsort(keys[valid], kind="stable")][:k]]


@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0, math.nan]), max_size=60),
    st.integers(1, 8),
    st.integers(1, 7),
)
def test_first_k_by_blocks_is_the_whole_columns(values: list[float], k: int, size: int) -> None:
    keys = np.array(values, dtype=np.float64)
    parts = ((s, keys[s : s + size]) for s in range(0, len(keys), size))
    assert _picks.first_k(parts, k).tolist() == _first_k_whole(keys, k)


def test_first_k_reads_a_mapped_column_a_block_at_a_time() -> None:
    rng = np.random.default_rng(3)
    keys = np.round(rng.random(600_000) * 50) / 50  # many ties
    keys[rng.integers(0, len(keys), 1000)] = np.nan
    column = pages.spilled(keys)
    assert pages.mapped(column)
    got = _picks.first_k(pages.blocks(column), 30)
    assert got.tolist() == _first_k_whole(keys, 30)


@given(st.integers(0, 40), st.sets(st.integers(0, 39)))
def test_the_random_draw_samples_the_positions_not_taken(n: int, taken: set[int]) -> None:
    taken = {t for t in taken if t < n}
    others = _picks.Others(n, taken)
    expected = [i for i in range(n) if i not in taken]
    assert len(others) == len(expected) and list(others) == expected
    assert [others[-j] for j in range(1, len(expected) + 1)] == expected[::-1]
    for k in range(len(expected) + 1):  # the same draw as from the list
        assert random.Random(0).sample(others, k) == random.Random(0).sample(expected, k)
    with pytest.raises(IndexError):
        others[len(expected)]
