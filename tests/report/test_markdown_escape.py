"""Markdown from data renders as that data: hostile sample ids, metric names, messages, metadata
and signatures in report.md, ``compare``'s, ``calibrate``'s and ``audit``'s Markdown, parsed
by a CommonMark renderer with GitHub's tables and strikethrough (markdown-it-py), make no
heading, table, link, image, emphasis or raw HTML of their own."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_judge.analysis.audit import audit_report
from rag_judge.analysis.calibration import calibrate
from rag_judge.analysis.compare import compare_all
from rag_judge.cli import audit as audit_cli
from rag_judge.cli.calibrate import render_markdown as calibrate_markdown
from rag_judge.cli.compare import render_markdown as compare_markdown
from rag_judge.data.sample import Sample
from rag_judge.report.format import md_code, md_text
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricKind,
    MetricSummary,
    Report,
    ReportWarning,
    RubricAudit,
    SampleResult,
    Signature,
    WarningKind,
)

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
XSS = "<img src=x onerror=alert(1)>"
HOSTILE = [
    f"a\n\n# injected heading\n\n| t | u |\n|---|---|\n| 1 | 2 |\n\n{XSS}",
    f"x`{XSS}`y",
    XSS,
    "# id",
    "- item",
    "1. one",
    "a|b",
    "*em* _em_ **strong** ~~gone~~ $x$",
    "[link](javascript:alert(1)) ![img](http://x/y.png)",
    "&lt;b&gt; &amp;",
    "```",
    "> quote",
    "    indented",
    "trailing \\",
    "<!-- comment -->",
    "line1\r\nline2\u2028line3",
]
FORBIDDEN = {"html_block", "html_inline", "image", "link_open", "em_open", "s_open"}
# the headings report.md writes itself (the first is the run's name)
REPORT_HEADINGS = ["name", "Warnings", "Errors", "Judge audit", "Signatures"]


def _flat(text: str) -> str:
    return " ".join(text.splitlines()).strip()


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for t in tokens:
        yield t
        yield from _walk(t.children or [])


def _shown(inline: Token) -> str:
    """What an inline token renders as, in plain text."""
    return "".join(t.content for t in inline.children or [] if t.type in ("text", "code_inline"))


def _headings(tokens: list[Token]) -> list[str]:
    return [_shown(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]


def _assert_no_markup_from_data(markdown: str) -> list[Token]:
    tokens = MD.parse(markdown)
    kinds = {t.type for t in _walk(tokens)}
    assert not kinds & FORBIDDEN, kinds & FORBIDDEN
    assert "<img" not in MD.render(markdown)
    # bold is the renderers' own, around a warning's metric: never from data
    strong = [t for t in _walk(tokens) if t.type == "strong_open"]
    assert len(strong) == markdown.count("\n- **"), markdown
    return tokens


def _hostile_report() -> Report:
    metric = "user|metric*<b>"  # a user evaluator's metric name
    samples = [
        SampleResult(
            id=sid,
            scores={"faithfulness": None, metric: 0.5},
            errors={"faithfulness": Failure(kind=FailureKind.ERROR, message=f"boom {sid}")},
            sample=Sample(id=sid, answer="x", metadata={"generator": HOSTILE[0]}),
        )
        for sid in HOSTILE
    ]
    judge = {"kind": MetricKind.JUDGE, "scale": (1, 5)}
    summary = {
        "faithfulness": MetricSummary(mean=None, n=0, errors=len(HOSTILE), **judge),
        metric: MetricSummary(mean=0.5, n=len(HOSTILE), aggregate=HOSTILE[1]),
    }
    return Report(
        summary=summary,
        samples=samples,
        signatures={
            "faithfulness": Signature(name="faithfulness", options={"judge": f"evil/{XSS}|`x`"}),
            metric: Signature(name=metric, options={"note": HOSTILE[0]}),
        },
        config={"name": f"hostile run\n\n# {XSS}"},
        audit={
            "faithfulness": RubricAudit(
                metric="faithfulness", n=0, self_preference_note=HOSTILE[0] + HOSTILE[7]
            )
        },
        warnings=[
            ReportWarning(
                kind=WarningKind.UNJUDGED, metric=HOSTILE[5], value=0, threshold=1, message=XSS
            )
        ],
    )


def test_report_md_renders_hostile_data_as_text() -> None:
    markdown = render_markdown(_hostile_report())
    tokens = _assert_no_markup_from_data(markdown)
    assert _headings(tokens) == [f"hostile run  # {XSS}", *REPORT_HEADINGS[1:]]
    # the summary, the audit and the signatures: three tables, every row its own cells
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    assert len(tables) == 3
    assert sum(t.type == "tr_open" for t in tokens) == 3 + 2 + 3  # summary, audit, signatures
    # each hostile id is one list item of the errors, shown whole in a code span
    codes = [t.content for t in _walk(tokens) if t.type == "code_inline"]
    for sid in HOSTILE:
        assert " ".join(sid.splitlines()) in codes, sid
    items = sum(t.type == "list_item_open" for t in tokens)
    # one warning, one error per sample, and the audit's notes: self-preference, settings
    assert items == 1 + len(HOSTILE) + 2
    text = " ".join(t.content for t in _walk(tokens) if t.type == "text")
    assert XSS in text and _flat(HOSTILE[0]) in text  # the warning, the note: as written


def test_compare_md_renders_hostile_names_and_paths_as_text() -> None:
    metric = "m|x*<i>"
    base = Report(
        summary={metric: MetricSummary(mean=0.5, n=2)},
        samples=[SampleResult(id=s, scores={metric: v}) for s, v in (("a", 0.4), ("b", 0.6))],
        signatures={},
    )
    new = base.model_copy(deep=True)
    result = compare_all(base, [(f"runs/new\n\n# {XSS}", new)], base_label=f"base`{XSS}`")
    tokens = _assert_no_markup_from_data(compare_markdown(result))
    assert _headings(tokens) == [f"Comparison with base`{XSS}`", f"runs/new  # {XSS}"]
    assert sum(t.type == "table_open" for t in tokens) == 1
    assert metric in [_shown(t) for t in tokens if t.type == "inline"]


def test_calibrate_and_audit_md_render_hostile_rubric_names_as_text() -> None:
    rubric = "r|*<img src=x>*"
    judge = {"kind": MetricKind.JUDGE, "scale": (1, 5)}
    report = Report(
        summary={rubric: MetricSummary(mean=3.0, n=3, **judge)},
        samples=[SampleResult(id=str(i), scores={rubric: float(i + 2)}) for i in range(3)],
        signatures={},
    )
    labels = {str(i): {rubric: float(i + 1)} for i in range(3)}
    for markdown in (
        calibrate_markdown(calibrate(report, labels)),
        audit_cli.render_markdown(
            audit_report(report), None, audit_cli.Settings(0.95, 0.8, 100, 0)
        ),
    ):
        tokens = _assert_no_markup_from_data(markdown)
        assert sum(t.type == "table_open" for t in tokens) == 1
        assert rubric in [_shown(t) for t in tokens if t.type == "inline"]


_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), include_characters="\n\r\t"),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(_text)
def test_md_text_is_its_text_at_a_line_start_and_in_a_cell(text: str) -> None:
    flat = _flat(text)
    paragraph = MD.parseInline(md_text(text))[0].children or []
    assert {t.type for t in paragraph} <= {"text"}, (text, paragraph)
    assert "".join(t.content for t in paragraph) == flat
    block = MD.parse(md_text(text) + "\n")
    assert [t.type for t in block if t.type.endswith("_open")] in ([], ["paragraph_open"])
    table = MD.parse(f"| h | i |\n|---|---|\n| {md_text(text)} | x |\n")
    assert sum(t.type == "td_open" for t in table) == 2


@settings(max_examples=300, deadline=None)
@given(_text)
def test_md_code_is_its_text_in_a_list_and_in_a_cell(text: str) -> None:
    flat = _flat(text)
    item = MD.parse(f"- {md_code(text)}\n")
    codes = [t for t in _walk(item) if t.type == "code_inline"]
    if flat.strip():
        assert len(codes) == 1 and codes[0].content.strip() == flat.strip(), (text, item)
    table = MD.parse(f"| h | i |\n|---|---|\n| {md_code(text, in_table=True)} | x |\n")
    assert sum(t.type == "td_open" for t in table) == 2
