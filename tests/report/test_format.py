"""One number formatting for every renderer, one table drawn three ways (terminal, Markdown,
HTML), and report.md / the summary table built on them."""

from __future__ import annotations

import html
import math
import re

import pytest
from markdown_it import MarkdownIt

from rag_judge.report.format import (
    MISSING,
    Column,
    Table,
    amount,
    ci_label,
    html_table,
    interval,
    markdown_table,
    num,
    short,
    text_table,
)
from rag_judge.report.markdown import render_markdown, summary_table
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricSummary,
    Report,
    SampleResult,
    Signature,
)


@pytest.mark.parametrize("absent", [None, math.nan, math.inf, -math.inf])
def test_one_glyph_for_every_missing_value(absent: float | None) -> None:
    assert MISSING == "–"
    assert num(absent) == short(absent) == interval(absent, 1.0) == interval(0.0, absent)
    assert num(absent, "+.4f") == amount(absent) == MISSING


def test_number_styles() -> None:
    assert num(0.60214) == "0.6021" and num(0.1, "+.4f") == "+0.1000"
    assert num(0.0019531, ".4g") == "0.001953"
    assert [short(5.0), short(0.25), short(2 / 3), short(1 / 3, 4)] == [
        "5",
        "0.25",
        "0.667",
        "0.3333",
    ]
    assert interval(0.1, 0.25) == "[0.1000, 0.2500]"
    assert interval(-0.1, 0.2, "+.4f") == "[-0.1000, +0.2000]"
    assert [amount(1234567), amount(0.0123456789), amount(1234.5)] == [
        "1,234,567",
        "0.0123457",
        "1,234.5",
    ]
    assert (ci_label(0.95), ci_label(0.9)) == ("95% CI", "90% CI")


def _report() -> Report:
    failed = SampleResult(
        id="b",
        scores={"x": None},
        errors={"x": Failure(kind=FailureKind.UNSCORED, message="no verdict")},
    )
    return Report(
        summary={
            "x": MetricSummary(mean=0.5, ci_low=0.5, ci_high=0.5, n=1, errors=1, unscored=1),
            "y": MetricSummary(mean=None, n=0, errors=2, not_applicable=3),
        },
        samples=[SampleResult(id="a", scores={"x": 0.5}), failed],
        signatures={"x": Signature(name="x", options={"k": "1"}, run={"ci": "b-9@0.9"})},
        config={"name": "demo", "bootstrap": {"confidence": 0.9}},
    )


def test_summary_table_reads_the_level_and_shows_missing_values() -> None:
    lines = summary_table(_report()).splitlines()
    assert lines[0] == "| metric | mean | 90% CI | n | errors | unscored | n/a | aggregate |"
    assert lines[1] == "|---|---:|---:|---:|---:|---:|---:|---|"
    assert lines[2] == "| x | 0.5000 | [0.5000, 0.5000] | 1 | 1 | 1 | 0 | mean |"
    assert lines[3] == "| y | – | – | 0 | 2 | 0 | 3 | mean |"


def test_markdown_lists_failures_and_rendered_signatures() -> None:
    md = render_markdown(_report())
    assert md.startswith("# demo\n")
    assert "- `b` · x: unscored: no verdict" in md
    assert "| x | `x\\|k:1\\|ci:b-9@0.9` |" in md


TABLE = Table(
    "Things",
    [Column("name", "text"), Column("n"), Column("why", "text")],
    [["a|b <i>x</i>", "1", "two\nlines"], ["c", "22", MISSING]],
    ["a note with a | and *stars*"],
)
ROWS = [["a|b <i>x</i>", "1", "two lines"], ["c", "22", MISSING]]  # a cell is one line


def test_one_table_renders_the_same_rows_in_text_markdown_and_html() -> None:
    assert text_table(TABLE).splitlines() == [
        "name           n  why",
        "a|b <i>x</i>   1  two lines",
        "c             22  –",
        "a note with a | and *stars*",
    ]
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown_table(TABLE))
    cells = [t.children[0].content if t.children else "" for t in tokens if t.type == "inline"]
    cells = [re.sub(r"\\(.)", r"\1", c) for c in cells]  # Markdown's escapes undone
    assert cells[:3] == ["name", "n", "why"] and [cells[3:6], cells[6:9]] == ROWS
    assert [t.type for t in tokens].count("bullet_list_open") == 1  # the note, a list item
    assert markdown_table(TABLE).splitlines()[1] == "|---|---:|---|"  # words left, numbers right
    page = html_table(TABLE)
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    found = [[html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r)] for r in rows]
    assert found == ROWS
    assert "<i>" not in page and "<td class=num>22</td>" in page
    assert page.endswith("<p class=note>a note with a | and *stars*</p>")


def test_a_table_of_keys_and_values_has_no_heading_and_a_rule_is_asked_for() -> None:
    pairs = Table("kv", [Column("", "text"), Column("", "text")], [["key", "v"], ["longer", "w"]])
    assert text_table(pairs, rule=True).splitlines() == ["key     v", "longer  w"]
    assert text_table(TABLE, rule=True).splitlines()[1] == "------------  --  ---------"
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        Table("bad", TABLE.columns, [["a", "b"]])
