"""report.html for conversations, without a browser: the summary grouped by level, the
degradation table, and each conversation's turns, steps, tool calls and unit values, with the
failing turn and the named step marked; every string from data escaped."""

from __future__ import annotations

import json
import re

import pytest
from markupsafe import escape

from rag_judge import Pipeline
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.report.html import render_html
from rag_judge.report.html._assets import CONVERSATION_CSS
from rag_judge.report.html._conversation_view import conversation_view
from rag_judge.report.model import Report
from tests.report.conversations import (
    C1,
    HOSTILE_ARG,
    HOSTILE_ID,
    HOSTILE_Q,
    PLAIN,
    report,
)


@pytest.fixture(scope="module")
def run() -> Report:
    return report()


@pytest.fixture(scope="module")
def page(run: Report) -> str:
    return render_html(run)


def _details(page: str, sample_id: str) -> str:
    start = page.index(f'<details id="s-{escape(sample_id)}"')
    return page[start : page.index("</details>", start)]


def test_the_summary_is_grouped_by_level_with_what_n_counts(page: str) -> None:
    summary = page[page.index("<section id=summary>") : page.index("</section>")]
    heads = re.findall(r"<tr class=level><th colspan=9 scope=rowgroup>([^<]+)<", summary)
    assert heads == ["Per conversation ", "Per turn ", "Per step "]
    assert "The 95% CI resamples conversations, not turns" in summary
    # each metric under its level, in summary order
    rows = re.findall(r"<tr class=level>|<th scope=row>([^<]+)</th>", summary)
    assert [r for r in rows if r] == ["tool_recall", "turn.ndcg@10", "turn.mrr", "step.ndcg@10"]


def test_the_sample_table_leaves_unit_metrics_to_the_conversation_view(page: str) -> None:
    heads = re.findall(r"<th data-t=n>(.*?)</th>", page)
    assert heads == ["tool_<wbr>recall"]


def test_the_degradation_table_names_each_failing_turn_and_its_first_step(page: str) -> None:
    section = page[page.index("<section id=degraded>") :]
    section = section[: section.index("</section>")]
    rows = re.findall(r"<tr><th scope=row>(.*?)</th>(.*?)</tr>", section)
    assert [r[0] for r in rows] == ["c1", "c1", escape(HOSTILE_ID)]
    assert "turn.mrr 0.5 (&gt;= 0.75)" in rows[0][1] and "step 0" in rows[0][1]
    assert "step.ndcg@10 0.6309 (&gt;= 0.9)" in rows[0][1]
    assert "tool call calc({&#34;x&#34;:1}) matched no expected call" in rows[1][1]
    assert "<a href=#degraded>Degraded</a>" in page


def test_a_conversation_shows_its_turns_steps_and_tool_calls_in_order(page: str) -> None:
    c1 = _details(page, "c1")
    assert re.findall(r'<li class="turn( degraded)?" data-turn=(\d)>', c1) == [
        (" degraded", "0"),
        (" degraded", "1"),
    ]
    steps = re.findall(r'<li class="step (\w+)( hop)?" data-step=(\d)>', c1)
    assert steps == [
        ("retrieval", " hop", "0"), ("retrieval", "", "1"),  # turn 0: its first hop is named
        ("tool", " hop", "0"), ("retrieval", "", "1"),  # turn 1: the unexpected tool call
    ]  # fmt: skip
    assert "tool call <code class=tool>calc</code>" in c1
    assert "<pre class=args>{&#34;x&#34;: 1}</pre><pre class=result>→ 7</pre>" in c1
    assert "expected tool calls: calc({&#34;x&#34;: 2})" in c1
    assert "<b>Q:</b> first question" in c1 and "<b>A:</b> second answer" in c1
    # the first hop's ranking with the turn's grades, and its value that missed
    assert '<b>d2</b> <span class="tag unj">unjudged</span>' in c1
    assert "<b>d1</b> <span class=tag>grade 1</span>" in c1
    assert (
        'title="below its threshold: step.ndcg@10 0.6309 (&gt;= 0.9)">step.ndcg@10 <b>0.631' in c1
    )
    assert "<b>first step below its threshold:</b> step 0 (tool call)" in c1
    assert "degraded: turn 0, 1</span>" in c1


def test_unit_values_are_the_runs(run: Report) -> None:
    view = conversation_view(run.samples[0])
    assert view is not None and not view.single
    t0 = view.turns[0]
    assert {u.metric: u.value for u in t0.scores} == pytest.approx(
        {"turn.ndcg@10": 1 / 1.5849625007211563, "turn.mrr": 0.5}
    )
    assert [u.miss for u in t0.scores] == ["", "turn.mrr 0.5 (>= 0.75)"]
    assert [(s.index, s.kind, s.hop) for s in view.turns[1].steps] == [
        (0, "tool", True),
        (1, "retrieval", False),
    ]
    assert view.degraded == [0, 1]


def test_hostile_text_in_an_id_a_question_and_a_tool_argument_stays_text(page: str) -> None:
    for text in (HOSTILE_ID, HOSTILE_Q, HOSTILE_ARG):
        assert text not in page
    assert "<img" not in page and "</script><img" not in page
    c2 = _details(page, HOSTILE_ID)
    assert f"<b>Q:</b> {escape(HOSTILE_Q)}" in c2
    assert f"<pre class=args>{escape(json.dumps({'who': HOSTILE_ARG}))}</pre>" in c2
    assert page.count("<script") == 1  # the page's own


def test_a_single_turn_sample_shows_its_units_not_its_texts_twice(page: str, run: Report) -> None:
    p = _details(page, "p")
    assert "<h4>per turn and per step</h4>" in p
    assert p.count("plain question") == 2  # the summary line and the sample's own view
    view = conversation_view(run.samples[2])
    assert view is not None and view.single and view.degraded == []


def test_a_report_without_conversations_carries_no_conversation_markup() -> None:
    plain = Pipeline([RetrievalEvaluator(metrics=["mrr"], judged=False)]).run([PLAIN]).report
    page = render_html(plain)
    assert CONVERSATION_CSS not in page
    assert "class=conv" not in page and "tr class=level" not in page and "id=degraded" not in page
    assert conversation_view(plain.samples[0]) is None


def test_a_conversation_without_unit_metrics_still_shows_its_turns() -> None:
    run = Pipeline([RetrievalEvaluator(metrics=["mrr"], judged=False)]).run([C1]).report
    page = render_html(run)
    assert "tr class=level" not in page and "id=degraded" not in page  # one level, no threshold
    assert page.count('<li class="turn" data-turn=') == 2 and CONVERSATION_CSS in page
