"""Replies real servers send: cut off before the closing brace, bullet lists, replies that
stopped at max_tokens, and whether a reply is what the schema asked for."""

from __future__ import annotations

import pytest

from rag_judge.judge.reply_json import schema_valid
from rag_judge.judge.verdicts import (
    VERDICT_SCHEMA,
    JudgeVerdict,
    Unscored,
    parse_verdict,
    read_completion,
)
from rag_judge.llm.base import Completion

CUT_OFF = [
    ('{"reason": "The answer is grounded in the context", "score": 4', 4,
     "The answer is grounded in the context"),
    ('{"reason": "The answer is grounded in the context", "score": 4,', 4,
     "The answer is grounded in the context"),
    ('{"reason": "ok", "score": 2,\n  ', 2, "ok"),
    ('{"reason": "ok", "score": 5, "notes": "the judge went on and on', 5, "ok"),
    ('{"score": 3, "reason": "cut in the middle of the rea', 3, "cut in the middle of the rea"),
    ('{"score": 3, "reason": "an escape \\', 3, "an escape"),
    ('{"reason": "x", "score": 1, "extra": {"a": 1', 1, "x"),
    ('{"score": 4, "reason": "x", "sco', 4, "x"),
    ('```json\n{"reason": "fenced, never closed", "score": 5', 5, "fenced, never closed"),
    ('Verdict: {"reason": "prose first", "score": 2', 2, "prose first"),
    ("{'reason': 'single quotes', 'score': 4", 4, "single quotes"),
]  # fmt: skip

BULLETS = [
    ("- score: 4", 4, ""),
    ("* Score: 4/5", 4, ""),
    ("\u2022 score 4", 4, ""),
    ("- **Score:** 3", 3, ""),
    ("- reason: grounded in the context\n- score: 4", 4, "grounded in the context"),
    ("* Reasoning: partly supported\n* Score: 3/5", 3, "partly supported"),
    ("1. Reason: fine\n2. Score: 5", 5, "fine"),
    ("- The answer cites the context.\n- Score: 5", 5, "The answer cites the context."),
]

STILL_UNSCORED = [
    ('{"reason": "x", "score":', "cut off before a complete 'score'"),
    ('{"reason": "x", "sco', "cut off before a complete 'score'"),
    ('{"reason": "The answer is grounded in', "cut off before a complete 'score'"),
    # A score in the cut-off reason is not the verdict: the judge may have been weighing it.
    ('{"reason": "A score of 3 would be harsh since', "cut off before a complete 'score'"),
    ('{"reason": "x", "score": 3.', "cut off before a complete 'score'"),
    ('{"reason": "x", "score": 3.5', "score 3.5 is not an integer on the 1-5 scale"),
    ('{"reason": "x", "score": 7', "score 7 is outside the 1-5 scale"),
    ("- score: 4\n- score: 5", "ambiguous: the reply gives several scores (4, 5)"),
    ("* Score: 3.5", "score 3.5 is not an integer"),
    ("\u2022 score 0", "score 0 is outside the 1-5 scale"),
    ("- score: 8/10", "8/10 is not on the 1-5 scale"),
]


@pytest.mark.parametrize(("text", "score", "reason"), CUT_OFF)
def test_a_reply_cut_off_before_its_closing_brace_is_read(
    text: str, score: int, reason: str
) -> None:
    verdict = parse_verdict(text)
    assert isinstance(verdict, JudgeVerdict), verdict
    assert (verdict.score, verdict.reason) == (score, reason)
    assert verdict.span is not None and text[verdict.span[0] : verdict.span[1]] == str(score)


@pytest.mark.parametrize(("text", "score", "reason"), BULLETS)
def test_bullet_lines_are_read_without_their_markers(text: str, score: int, reason: str) -> None:
    verdict = parse_verdict(text)
    assert isinstance(verdict, JudgeVerdict), verdict
    assert (verdict.score, verdict.reason) == (score, reason)


@pytest.mark.parametrize(("text", "why"), STILL_UNSCORED)
def test_cut_off_and_bulleted_replies_keep_the_scale_rule(text: str, why: str) -> None:
    verdict = parse_verdict(text)
    assert isinstance(verdict, Unscored), verdict
    assert why in verdict.reason and verdict.raw == text


def test_a_reply_stopped_at_max_tokens_says_so_and_suggests_raising_it() -> None:
    cut = Completion(['{"reason": "The answer restates the context at length and'])
    cut.finish_reason = "length"
    found = read_completion(cut, "json", max_tokens=512)
    assert isinstance(found, Unscored)
    assert found.reason.startswith(
        "the reply was cut off at max_tokens=512 (finish_reason 'length') before a score could "
        "be read (the reply's JSON object is cut off before a complete 'score'); raise max_tokens"
    )
    assert found.raw == cut.text
    assert "max_tokens (finish_reason" in _reason(read_completion(cut, "json"))
    # Stopped for another reason: the parser's reason alone.
    done = Completion([cut.text], finish_reason="stop")
    assert _reason(read_completion(done, "json")).startswith("the reply's JSON object is cut off")
    # Cut off, but after a complete score: read.
    readable = Completion(['{"reason": "fine", "score": 4'], finish_reason="length")
    reading = read_completion(readable, "json", max_tokens=512)
    assert isinstance(reading, JudgeVerdict) and reading.score == 4


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"reason": "r", "score": 7}\nLet me elaborate on every claim', "score 7 is outside"),
        ('{"reason": "r", "score": 3.5} and then at length', "half points are not used"),
        ('{"reason": "r", "score": "four"} and then at length', "is not a number"),
        ("Score: 4/10. Now, point by point, the answer", "score 4/10 is not on the 1-5 scale"),
    ],
)
def test_a_complete_invalid_verdict_that_rambled_to_max_tokens_is_not_told_to_raise_it(
    text: str, why: str
) -> None:
    # The reply stated its verdict in full and then ran on to the limit: more tokens would not
    # make 7 a score on the 1-5 scale, so the reason is the verdict's problem alone.
    found = read_completion(Completion([text], finish_reason="length"), "json", max_tokens=64)
    reason = _reason(found)
    assert why in reason and "max_tokens" not in reason and "cut off" not in reason
    # A score cut short inside an object left open is still the budget's fault.
    cut = Completion(['{"reason": "r", "score": "'], finish_reason="length")
    assert _reason(read_completion(cut, "json", max_tokens=64)).endswith("raise max_tokens")


def _reason(found: JudgeVerdict | Unscored) -> str:
    assert isinstance(found, Unscored), found
    return found.reason


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ('{"reason": "r", "score": 4}', True),
        ('\n{"score": 1, "reason": ""}\n', True),
        ('{"reason": "r", "score": 4.0}', True),  # JSON Schema: 4.0 is an integer
        ('{"reason": "r", "score": "4"}', False),
        ('{"reason": "r", "score": true}', False),
        ('{"reason": "r", "score": 6}', False),
        ('{"reason": 1, "score": 4}', False),
        ('{"reason": "r"}', False),
        ('{"reason": "r", "score": 4, "confidence": 0.9}', False),
        ('```json\n{"reason": "r", "score": 4}\n```', False),
        ('Verdict: {"reason": "r", "score": 4}', False),
        ('{"reason": "r", "score": 4', False),
        ("Score: 4", False),
        ("[4]", False),
        ("", False),
    ],
)
def test_schema_valid_means_the_whole_reply_is_what_the_schema_asks(text: str, valid: bool) -> None:
    assert schema_valid(text, VERDICT_SCHEMA) is valid
