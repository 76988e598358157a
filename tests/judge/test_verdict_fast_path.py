"""A reply that is one JSON object with a score is read without scanning it: the same verdict
(or unscored reason) as the search over fenced blocks, braces and prose gives."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.judge.verdicts import _searched, parse_verdict

KEYS = st.sampled_from(["score", "Score", " rating ", "reason", "scores", "verdict"])
VALUES = st.one_of(
    st.integers(-2, 8),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["3", "four", "", "4/5", None, True, [3], {"score": 2}]),
    st.text(max_size=10),
)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=4).map(
    lambda obj: json.dumps(obj, indent=None if len(obj) % 2 else 1)
)
AROUND = st.sampled_from(["", " ", "\n", "```json\n", "Here: ", "\x0b", " {", "}"])


@settings(max_examples=400, deadline=None)
@given(AROUND, OBJECTS, AROUND)
def test_a_json_reply_reads_as_the_search_reads_it(before: str, body: str, after: str) -> None:
    text = before + body + after
    if text.strip():
        assert parse_verdict(text) == _searched(text)


def test_the_usual_reply() -> None:
    text = '{"reason": "all claims supported", "score": 5}'
    assert parse_verdict(text) == _searched(text)
    assert parse_verdict(text).score == 5  # type: ignore[union-attr]
    cut = '{"reason": "all claims", "score": 5'
    assert parse_verdict(cut) == _searched(cut)
