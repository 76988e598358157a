"""report.html and report.md show grounding: each located claim marked in the answer by its
verdict (with its reason, contexts and citations), the claims that could not be located listed,
an abstention badged, and the samples a metric does not apply to counted apart from failures."""

from __future__ import annotations

import html as htmllib
import re

from rag_judge import Report, Sample
from rag_judge.data.sample import Context
from rag_judge.report.html import render_html
from rag_judge.report.html._sample_view import grounding_view
from rag_judge.report.markdown import render_markdown, summary_table
from rag_judge.report.model import (
    ClaimJudgment,
    Failure,
    FailureKind,
    GroundingJudgment,
    MetricKind,
    MetricSummary,
    SampleResult,
    Signature,
)
from tests.report.test_html import assert_one_script

EVIL_CLAIM = 'It runs on <script>alert("x")</script> Mars.'
ANSWER = f"Plans cost $12 [1]. Storage is unlimited [2]. {EVIL_CLAIM} Ask us."
MARK = re.compile(r'<mark class="claim (\w+)" data-n="(\d+)" title="([^"]*)">(.*?)</mark>')
NA = FailureKind.NOT_APPLICABLE


def _span(text: str) -> tuple[int, int]:
    start = ANSWER.index(text)
    return start, start + len(text)


def _claims() -> list[ClaimJudgment]:
    return [
        ClaimJudgment(text="Plans cost $12 [1].", verdict="supported", support=[1],
                      support_ids=["d1"], cited=[1], reason="context 1 gives the price",
                      span=_span("Plans cost $12 [1].")),
        ClaimJudgment(text="Storage is unlimited [2].", verdict="contradicted", support=[2],
                      support_ids=["d2"], cited=[2], reason='context 2 says "2 TB"',
                      span=_span("Storage is unlimited [2].")),
        ClaimJudgment(text=EVIL_CLAIM, verdict="unsupported", cited=[0],
                      reason="no context mentions Mars", span=_span(EVIL_CLAIM)),
        ClaimJudgment(text="Support is friendly.", verdict="unsupported", cited=[],
                      reason="a paraphrase: not in the answer's words"),
    ]  # fmt: skip


def _report() -> Report:
    """Sample ``a`` answers with four claims; ``b`` abstains (its claim metrics do not apply)."""
    contexts = (Context(text="Team costs $12.", id="d1"), Context(text="2 TB pooled.", id="d2"))
    a = SampleResult(
        id="a",
        scores={"claim_support": 1 / 3, "answer_rate": 1.0},
        judgments={
            "grounding": GroundingJudgment(
                score=1 / 3, reason="4 claims", claims=_claims(), abstained=False, attempts=2
            )
        },
        sample=Sample(id="a", question="What does it cost?", answer=ANSWER, contexts=contexts),
    )
    b = SampleResult(
        id="b",
        scores={"claim_support": None, "answer_rate": 0.0},
        errors={"claim_support": Failure(kind=NA, message="the answer abstains")},
        judgments={
            "grounding": GroundingJudgment(
                score=None, reason="the answer abstains", claims=[], abstained=True
            )
        },
        sample=Sample(id="b", question="Is IPv6 supported?", answer="I don't know."),
    )
    judge = {"kind": MetricKind.JUDGE}
    return Report(
        summary={
            "claim_support": MetricSummary(mean=1 / 3, n=1, not_applicable=1, **judge),
            "answer_rate": MetricSummary(mean=0.5, n=2, **judge),
        },
        samples=[a, b],
        signatures={"claim_support": Signature(name="claim_support")},
        config={"name": "grounding"},
    )


def _details(page: str, sid: str) -> str:
    found = re.search(rf'<details id="s-{sid}".*?</details>', page, re.S)
    assert found is not None
    return found.group(0)


def _answer(details: str) -> str:
    found = re.search(r'<p class="text answer">(.*?)</p>', details, re.S)
    assert found is not None
    return found.group(1)


def test_located_claims_are_marked_by_verdict() -> None:
    answer = _answer(_details(render_html(_report()), "a"))
    marks = [(v, n, htmllib.unescape(t)) for v, n, _, t in MARK.findall(answer)]
    assert marks == [
        ("supported", "1", "Plans cost $12 [1]."),
        ("contradicted", "2", "Storage is unlimited [2]."),
        ("unsupported", "3", EVIL_CLAIM),
    ]
    # the text between the claims stays, unmarked, and the answer reads as it was written
    assert answer.endswith("</mark> Ask us.")
    assert htmllib.unescape(re.sub(r"<[^>]+>", "", answer)) == ANSWER


def test_each_mark_and_list_entry_says_why() -> None:
    details = _details(render_html(_report()), "a")
    titles = {n: htmllib.unescape(t) for _, n, t, _ in MARK.findall(_answer(details))}
    assert titles["1"] == (
        "claim 1: supported · context 1 gives the price · supported by context 1 (d1) · "
        "cites context 1"
    )
    assert titles["2"] == (
        'claim 2: contradicted · context 2 says "2 TB" · contradicted by context 2 (d2) · '
        "cites context 2"
    )
    assert titles["3"] == (
        "claim 3: unsupported · no context mentions Mars · cites a context that was not retrieved"
    )
    items = re.findall(r"<li>(.*?)</li>", details.split("<ol class=claims>")[1].split("</ol>")[0])
    assert len(items) == 4
    assert items[1].startswith('<span class="verdict contradicted">contradicted</span> Storage')


def test_a_claim_that_cannot_be_located_is_listed_with_its_verdict() -> None:
    details = _details(render_html(_report()), "a")
    assert "Support is friendly." not in _answer(details)
    last = details.split("<ol class=claims>")[1].split("</ol>")[0].split("<li>")[-1]
    assert last.startswith(
        '<span class="verdict unsupported">unsupported</span> <span class=unlocated>'
        'Support is friendly.</span> <span class="tag unj">not located in the answer</span>'
    )
    assert "a paraphrase: not in the answer&#39;s words · no citation" in last


def test_claim_text_is_escaped() -> None:
    page = render_html(_report())
    assert_one_script(page)
    escaped = "It runs on &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; Mars."
    assert '<mark class="claim unsupported" data-n="3" title="claim 3: unsupported · ' in page
    assert f"{escaped}</mark>" in page  # inside its mark
    assert f'<span class="verdict unsupported">unsupported</span> {escaped}<br>' in page
    assert 'title="claim 2: contradicted · context 2 says &#34;2 TB&#34;' in page  # attribute


def test_an_abstention_is_badged() -> None:
    page = render_html(_report())
    badge = '<span class="badge abstained">abstained</span>'
    b = _details(page, "b")
    assert re.search(rf"<summary>b {badge} ", b)  # seen with the details closed
    assert f"<h4>answer {badge}</h4>" in b
    assert '<p class="text answer">I don&#39;t know.</p>' in b
    assert "<mark" not in b and "<ol class=claims>" not in b
    assert badge not in _details(page, "a")


def test_not_applicable_is_counted_apart_from_errors() -> None:
    report = _report()
    md = summary_table(report).splitlines()
    assert md[0] == "| metric | mean | 95% CI | n | errors | unscored | n/a | aggregate |"
    assert md[2] == "| claim_support | 0.3333 | – | 1 | 0 | 0 | 1 | mean |"
    assert md[3] == "| answer_rate | 0.5000 | – | 2 | 0 | 0 | 0 | mean |"
    assert "## Errors" not in render_markdown(report)  # n/a is not a failure

    page = render_html(report)
    assert "<th class=num>unscored</th><th class=num title=" in page
    row = re.search(r"<tr><th scope=row>claim_support</th>(.*?)</tr>", page)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells[2:6] == ["1", "0", "0", "1"]  # n, errors, unscored, n/a
    assert "n=1 · 1 n/a</small>" in page
    # the abstention's claim_support cell says n/a, not error, and the sample has no errors
    assert re.search(r'<tr data-id="b" data-err=0>.*?>n/a</td>', page)
    b = _details(page, "b")
    assert 'data-err=0><summary>b <span class="badge' in b and "error" not in b
    assert "<h4>not applicable</h4><ul class=na><li><b>claim_support</b>: the answer " in b


def test_a_real_failure_still_counts() -> None:
    report = _report()
    report.samples[1].scores["answer_rate"] = None
    report.samples[1].errors["answer_rate"] = Failure(message="judge call failed")
    page = render_html(report)
    assert re.search(r'<tr data-id="b" data-err=1>.*?<td class=\'num bad\' data-v=\'\'>error', page)
    b = _details(page, "b")
    assert "<span class=bad>1 error</span>" in b
    assert "<li><b>answer_rate</b>: judge call failed</li>" in b


def test_spans_that_do_not_hold_their_claim_are_not_marked() -> None:
    """A span past the answer shown (cut on a large page), over another text, or overlapping
    an earlier claim's leaves the claim listed, not marked."""
    report = _report()
    r = report.samples[0]
    claims = _claims()
    claims[0] = claims[0].model_copy(update={"span": (0, 10_000)})
    claims[1] = claims[1].model_copy(update={"span": (1, 5)})
    claims[3] = claims[3].model_copy(update={"span": (claims[2].span[0] + 1, 60)})  # type: ignore[index]
    r.judgments["grounding"] = r.judgments["grounding"].model_copy(update={"claims": claims})
    view = grounding_view(r)
    assert view is not None
    assert [c.located for c in view.claims] == [False, False, True, False]
    assert [(p.text, p.claim and p.claim.n) for p in view.pieces] == [
        ("Plans cost $12 [1]. Storage is unlimited [2]. ", None),
        (EVIL_CLAIM, 3),
        (" Ask us.", None),
    ]
    assert len(MARK.findall(render_html(report))) == 1


def test_claims_are_listed_without_the_sample() -> None:
    report = _report()
    for r in report.samples:
        r.sample = None
    page = render_html(report)
    a, b = _details(page, "a"), _details(page, "b")
    assert "<mark" not in a and a.count("not located in the answer") == 4
    assert "<h4>claims</h4>" in a
    assert '<h4>claims <span class="badge abstained">abstained</span></h4>' in b


def _judgment_cell(details: str, rubric: str) -> str:
    found = re.search(
        rf'<tr data-rubric="{rubric}"><td>{rubric}</td><td class=num>(.*?)</td>', details
    )
    assert found is not None
    return found.group(1)


def test_judgments_table_shows_not_applicable_and_missing_input_as_such() -> None:
    """Issue 27, item 9: an abstention's, a claimless answer's and a context-less sample's
    grounding judgment are not the judge's unreadable reply (the orange "unscored")."""
    report = _report()
    b = _details(render_html(report), "b")
    assert _judgment_cell(b, "grounding") == "<span class=na>n/a</span>"
    r = report.samples[1]
    r.judgments["grounding"] = GroundingJudgment(
        score=None, reason="n/a: the answer makes no claim", claims=[], abstained=False
    )
    r.errors["claim_support"] = Failure(kind=NA, message="the answer makes no claim")
    assert _judgment_cell(_details(render_html(report), "b"), "grounding") == (
        "<span class=na>n/a</span>"
    )
    r.errors["claim_support"] = Failure(
        kind=FailureKind.MISSING_INPUT, message="field 'contexts' is missing or empty"
    )
    assert _judgment_cell(_details(render_html(report), "b"), "grounding") == (
        "<span class=bad>missing input</span>"
    )
    r.errors["claim_support"] = Failure(kind=FailureKind.UNSCORED, message="claims: no JSON")
    assert _judgment_cell(_details(render_html(report), "b"), "grounding") == (
        "<span class=bad>unscored</span>"
    )


def test_an_unchecked_claim_is_drawn_neutrally_not_as_a_verdict() -> None:
    """Issue 27, item 8: a claim whose verdict never came is not highlighted as unsupported."""
    report = _report()
    r = report.samples[0]
    why = "unscored: claim verdicts: no JSON object with a 'verdicts' list in the reply"
    claims = [c.model_copy(update={"verdict": "unchecked", "reason": why, "support": [],
                                   "support_ids": None}) for c in _claims()]  # fmt: skip
    r.judgments["grounding"] = r.judgments["grounding"].model_copy(update={"claims": claims})
    details = _details(render_html(report), "a")
    assert {v for v, *_ in MARK.findall(_answer(details))} == {"unchecked"}
    assert '<span class="verdict unsupported">' not in details  # was each claim's verdict
    assert '<span class="verdict unchecked">unchecked</span> Plans cost' in details
    assert f"claim 1: unchecked · {why} · cites context 1" in htmllib.unescape(details)
