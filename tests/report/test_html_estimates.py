"""The judge sections of report.html and report.md, from a Report filled by hand: the
bias-corrected (PPI) estimates, the jury's agreement and the judge audit, each shown only when
the report has it, with every number where it belongs and untrusted names escaped."""

from __future__ import annotations

import html as htmllib
import re
from functools import partial

from rag_judge.report.html import render_html
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import (
    JuryAgreement,
    LengthStratum,
    PPIEstimate,
    Report,
    RoganGladen,
    RubricAudit,
)
from tests.report.test_html import assert_one_script
from tests.report.test_review import _synthetic

HOSTILE_JUDGE = "evil/<img src=x onerror=alert(1)>"


def _filled() -> Report:
    report = _synthetic()
    report.estimates = {
        "faithfulness": PPIEstimate(
            metric="faithfulness", n_labelled=12, n_unlabelled=22, judge_mean=3.2,
            judge_ci=(2.9, 3.5), labelled_mean=4.5, labelled_ci=(3.9, 5.0), estimate=4.25,
            ci=(3.8, 4.7), se=0.2, lam=0.62, ess=30.0, ess_gain=2.5,
            pass_rate=RoganGladen(threshold=4, apparent=0.41, sensitivity=0.8, specificity=0.9,
                                  corrected=0.45, ci=(0.3, 0.6)),
        ),
        "correctness": PPIEstimate(metric="correctness", n_labelled=1, n_unlabelled=6),
    }  # fmt: skip
    report.jury = {
        "faithfulness": JuryAgreement(
            metric="faithfulness", judges=["openai/gpt-4o", HOSTILE_JUDGE], alpha=0.41,
            units=33, mean_spread=0.8, failed={"openai/gpt-4o": 0, HOSTILE_JUDGE: 2},
        )
    }  # fmt: skip
    report.audit = {
        "faithfulness": RubricAudit(
            metric="faithfulness", n=34, length_slope=0.31, length_slope_ci=(0.1, 0.5),
            length_strata=[LengthStratum(low=3, high=20, n=9, mean=3.1),
                           LengthStratum(low=21, high=40, n=8, mean=4.0)],
            modal_score=5, modal_share=0.82, collapsed=True, unscored_rate=0.0294,
            self_preference=True, self_preference_note="judge gpt-4o | generator gpt-4o\nmini",
        ),
        "correctness": RubricAudit(metric="correctness", n=7, modal_score=3, modal_share=1 / 7),
    }  # fmt: skip
    return report


def _html_rows(page: str, anchor: str) -> dict[str, list[str]]:
    """The section's body rows, by their first cell: each cell's text, unescaped."""
    section = re.search(rf"<section id={anchor}>(.*?)</section>", page, re.S)
    assert section is not None, anchor
    body = section.group(1).split("<tbody>")[1]
    rows = [
        re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)
        for r in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]
    return {htmllib.unescape(r[0]): [htmllib.unescape(c) for c in r[1:]] for r in rows}


def _md_rows(md: str, title: str) -> dict[str, list[str]]:
    """The section's body rows, by their first cell: each cell's text, its Markdown backslash
    escapes (of ASCII punctuation, as CommonMark reads them) undone."""
    part = md.split(f"## {title}\n")[1].split("\n## ")[0]
    rows = [line for line in part.splitlines() if line.startswith("| ")][1:]  # past the head
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    unescape = partial(re.sub, r"\\([!-/:-@\[-`{-~])", r"\1")
    return {unescape(c[0]): [unescape(x) for x in c[1:]] for c in cells}


ESTIMATE = [
    "12", "22", "3.200 [2.900, 3.500]", "4.500 [3.900, 5.000]", "4.250 [3.800, 4.700]",
    "0.620", "2.50", "0.410 → 0.450 [0.300, 0.600]",
]  # fmt: skip
UNDEFINED = ["1", "6", "–", "–", "–", "–", "–", "–"]  # one label: nothing is defined


def test_the_estimates_section() -> None:
    report = _filled()
    page, md = render_html(report), render_markdown(report)
    assert _html_rows(page, "estimates") == {"faithfulness": ESTIMATE, "correctness": UNDEFINED}
    assert _md_rows(md, "Bias-corrected judge estimates") == _html_rows(page, "estimates")
    for text in (page, md):  # why the raw mean is not the answer
        assert "a biased judge stays biased" in text and "interval is valid" in text
    assert "<th class=num>PPI mean [95% CI]</th>" in page
    assert "| metric | labelled | unlabelled | judge mean [95% CI] |" in md
    for text in (page, md):  # the pass rate's threshold, in the legend under the table
        assert "pass rate (a score ≥ 4) corrected by Rogan–Gladen" in text


def test_the_jury_section_escapes_the_judges_names() -> None:
    report = _filled()
    page, md = render_html(report), render_markdown(report)
    row = ["openai/gpt-4o, " + HOSTILE_JUDGE, "0.410", "33", "0.800", HOSTILE_JUDGE + ": 2"]
    assert _html_rows(page, "jury") == {"faithfulness": row}
    assert _md_rows(md, "Jury agreement") == {"faithfulness": row}
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert_one_script(page)
    # The judges' names and the failures are words: left-aligned, in both renderers.
    assert "<tr><th scope=row>faithfulness</th><td>openai/gpt-4o, " in page
    assert "|---|---|---:|---:|---:|---|" in md


def test_the_audit_section() -> None:
    report = _filled()
    page, md = render_html(report), render_markdown(report)
    faith = ["34", "+0.310", "[0.100, 0.500]", "3.10 4.00", "5 (82%) COLLAPSED", "2.9%", "yes"]
    correct = ["7", "–", "–", "–", "3 (14%)", "–", "unknown"]
    assert _html_rows(page, "audit") == {"faithfulness": faith, "correctness": correct}
    md_rows = _md_rows(md, "Judge audit")
    assert md_rows == {"faithfulness": faith, "correctness": correct}
    quartiles = "length quartiles (words): faithfulness: 3-20 (n 9), 21-40 (n 8)"
    assert f"<p class=note>{quartiles}</p>" in page and f"- {quartiles}" in md
    # The self-preference note is a line under the table: in Markdown one list item, its pipe
    # escaped and its line break flattened; in the page, escaped as it is.
    note = "self-preference: faithfulness: judge gpt-4o {} generator gpt-4o{}mini"
    assert "\n- " + note.format("\\|", " ") + "\n" in md
    assert "<p class=note>" + note.format("|", "\n") + "</p>" in page
    assert "position consistency" not in page  # not a pairwise run


def test_position_consistency_is_a_column_only_when_measured() -> None:
    report = _filled()
    report.audit["faithfulness"] = report.audit["faithfulness"].model_copy(
        update={"position_consistency": 0.875}
    )
    page, md = render_html(report), render_markdown(report)
    assert "<th class=num>position consistency</th>" in page
    assert _html_rows(page, "audit")["faithfulness"][-1] == "0.875"
    assert _html_rows(page, "audit")["correctness"][-1] == "–"
    assert _md_rows(md, "Judge audit")["faithfulness"][-1] == "0.875"


def test_the_sections_are_linked_and_absent_without_their_data() -> None:
    page = render_html(_filled())
    nav = re.search(r"<nav>(.*?)</nav>", page)
    assert nav is not None
    assert re.findall(r"<a href=#(\w+)>", nav.group(1)) == [
        "summary", "dist", "atk", "estimates", "jury", "audit", "review", "samples", "run",
    ]  # fmt: skip
    bare = _synthetic()
    page, md = render_html(bare), render_markdown(bare)
    for anchor, title in [("estimates", "Bias-corrected"), ("jury", "Jury"), ("audit", "audit")]:
        assert f"id={anchor}>" not in page and f"href=#{anchor}" not in page
        assert f"## {title}" not in md
    only_jury = bare.model_copy(update={"jury": _filled().jury})
    assert "## Jury agreement" in render_markdown(only_jury)
    assert "## Judge audit" not in render_markdown(only_jury)
