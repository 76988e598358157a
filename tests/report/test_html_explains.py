"""report.html explains itself (issue #11): scales from the kind, gold grades in the drill-down,
library versions, grouped sample columns, and normalised twins kept out of the summary."""

from __future__ import annotations

import re

import numpy
import pydantic
import pytest

from rag_judge import Report, Sample
from rag_judge.report.html import (
    column_groups,
    context_grades,
    library_versions,
    not_retrieved,
    render_html,
    scale_of,
)
from rag_judge.report.html import page as html_page
from rag_judge.report.html._assets import JS
from rag_judge.report.html.charts import RUBRIC, UNIT, Scale, bin_scores, ci_bar
from rag_judge.report.model import MetricKind, MetricSummary, SampleResult
from tests.report.test_html import EVIL, _report, assert_one_script

# --- 1. the scale comes from the kind -----------------------------------------------------------


def _with_bertscore() -> Report:
    report = _report()
    report.summary["bertscore_f1"] = MetricSummary(
        mean=0.6, ci_low=0.109, ci_high=1.0000000213, n=2, kind=MetricKind.EMBEDDING
    )
    report.samples[0].scores["bertscore_f1"] = 1.0000000213  # float error above 1
    report.samples[1].scores["bertscore_f1"] = 0.109
    return report


def test_a_hair_above_the_scale_keeps_the_declared_scale() -> None:
    report = _with_bertscore()
    assert scale_of("bertscore_f1", report) == UNIT
    bins = bin_scores([1.0000000213, 0.109], UNIT)
    assert bins.labels[0] == "0–0.1" and bins.counts[9] == 1 and bins.counts[1] == 1
    bar = ci_bar(report.summary["bertscore_f1"], UNIT)
    assert bar is not None and bar.ci is not None
    assert bar.ci[0] >= 2 and bar.ci[0] + bar.ci[1] <= 98  # clipped into the strip
    page = render_html(report)
    row = re.search(r"<tr><th scope=row>bertscore_f1</th>(.*?)</tr>", page)
    assert row is not None and "<rect class=ci " in row.group(1)


def test_a_rubric_stays_discrete_and_only_unbounded_uses_the_values() -> None:
    report = _report()
    report.samples[0].scores["faithfulness"] = 5.000000001
    assert scale_of("faithfulness", report) == RUBRIC
    assert scale_of("dcg", report) == Scale(0.0, None)
    report.summary["ndcg@3"] = report.summary["ndcg@3"].model_copy(update={"scale": (0.0, 1.0)})
    report.samples[0].scores["ndcg@3"] = 7.0  # far outside: still drawn on [0, 1], clipped
    assert scale_of("ndcg@3", report) == UNIT


# --- 2. gold grades in the drill-down ------------------------------------------------------------


def _judged() -> Sample:
    return Sample.model_validate(
        {
            "id": "a",
            "question": "q?",
            "contexts": [
                {"id": "d1", "text": "own grade", "relevance": 3},
                {"id": "d2", "text": "graded 0 in the table"},
                {"id": "d3", "text": "nobody judged this"},
                {"text": "no id, no grade"},
            ],
            "relevance": {"d1": 1, "d2": 0, "d7": 2, "d8": 0, "d9": 1, EVIL: 3},
        }
    )


def test_context_grades_and_relevant_documents_not_retrieved() -> None:
    sample = _judged()
    assert [g for _, g in context_grades(sample)] == [3, 0, None, None]  # own grade wins
    assert not_retrieved(sample) == [(EVIL, 3), ("d7", 2), ("d9", 1)]
    assert not_retrieved(Sample(id="x")) == []  # no judgments at all: nothing to list


def test_the_drill_down_shows_why_a_sample_scores_zero() -> None:
    report = _report()
    sample = _judged().model_copy(update={"relevance": {"d2": 0, "d7": 2, "d9": 1}})
    report.samples[0].sample = sample
    page = render_html(report)
    items = re.findall(r"<li><b>([^<]*)</b> (<span[^>]*>[^<]*</span>)", page)
    assert items == [
        ("d1", "<span class=tag>grade 3</span>"),
        ("d2", "<span class=tag>grade 0</span>"),
        ("d3", '<span class="tag unj">unjudged</span>'),
        ("–", '<span class="tag unj">unjudged</span>'),
    ]
    assert "relevant but not retrieved:</b> d7 (grade 2), d9 (grade 1)</p>" in page


def test_unretrieved_ids_are_escaped() -> None:
    report = _report()
    report.samples[0].sample = _judged()
    page = render_html(report)
    assert "&lt;script&gt;document.title=&#39;PWNED&#39;&lt;/script&gt;" in page
    assert_one_script(page)
    assert "<img" not in page


# --- 3. library versions -------------------------------------------------------------------------


def test_the_run_section_lists_library_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [name for name, _ in library_versions(_report())]
    assert names[:4] == ["rag-judge", "python", "numpy", "pydantic"]
    assert {"torch", "transformers", "sacrebleu", "rouge-score", "openai"} <= set(names)
    monkeypatch.setattr(html_page, "_LIBRARIES", (*html_page._LIBRARIES, "no-such-dist-rag-judge"))
    page = render_html(_report())
    assert f"<th scope=row>numpy</th><td>{numpy.__version__}</td>" in page
    assert f"<th scope=row>pydantic</th><td>{pydantic.VERSION}</td>" in page
    assert "<th scope=row>no-such-dist-rag-judge</th><td class=muted>not installed</td>" in page
    assert "<th scope=row>rag-judge</th><td>" in page and "<th scope=row>python</th>" in page


# --- 4. grouped sample columns -------------------------------------------------------------------


def test_sample_columns_are_grouped_by_kind() -> None:
    report = _report()
    report.summary["rouge1_f1"] = MetricSummary(mean=0.5, n=1, kind=MetricKind.LEXICAL)
    report.summary["bertscore_f1"] = MetricSummary(mean=0.5, n=1, kind=MetricKind.EMBEDDING)
    report.summary["latency"] = MetricSummary(
        mean=1.0, n=1, kind=MetricKind.LATENCY, scale=(0, None)
    )
    shown = [m for m in report.summary if m != "faithfulness_norm"]
    groups = column_groups(report, shown)
    assert groups == [
        ("judge", ["faithfulness"]),
        ("generation", ["rouge1_f1", "bertscore_f1"]),
        ("retrieval", ["ndcg@3", "ndcg@5", "ndcg@10", "precision@3", "dcg"]),
        ("other", ["latency"]),
    ]
    page = render_html(report)
    head = re.search(r"<tr class=groups>(.*?)</tr>", page, re.S)
    assert head is not None
    assert re.findall(r"<th colspan=(\d+) scope=colgroup>(\w+)</th>", head.group(1)) == [
        ("1", "judge"),
        ("2", "generation"),
        ("5", "retrieval"),
        ("1", "other"),
    ]
    cols = re.search(r"<tr class=heads>(.*?)</tr>", page, re.S)
    assert cols is not None
    names = re.findall(r"<th data-t=n>(.*?)</th>", cols.group(1))
    assert [n.replace("<wbr>", "") for n in names] == [m for _, ms in groups for m in ms]
    # The sorting script reads the column-header row: one header per cell of each body row.
    row = re.search(r'<tr data-id="a" data-err=0>(.*?)</tr>', page)
    assert row is not None
    assert len(re.findall(r"<t[hd][ >]", row.group(1))) == len(names) + 1
    assert "thead tr.heads th" in JS


# --- 5. normalised twins stay out of the summary -------------------------------------------------


def test_the_summary_shows_the_rubric_not_its_twin() -> None:
    page = render_html(_report())
    summary = page[page.index("<section id=summary>") : page.index("<section id=dist>")]
    assert "<th scope=row>faithfulness</th>" in summary
    assert "<th scope=row>faithfulness_norm</th>" not in summary
    assert "Normalised twins hidden" in summary and "faithfulness_norm</p>" in summary
    result = SampleResult(id="z", scores={"recall": 0.5})
    report = _report().model_copy(
        update={"summary": {"recall": MetricSummary(mean=0.5, n=1)}, "samples": [result]}
    )
    assert "Normalised twins hidden" not in render_html(report)  # nothing hidden, no note
