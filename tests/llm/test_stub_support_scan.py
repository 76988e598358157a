"""The stub judge's word-overlap share scans all the evidence at once; it is the share that
scanning each text apart gives, whatever the texts hold (citation markers, Unicode that
case-folds into several letters, words cut at a text's edge)."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from rag_judge.llm.providers.stub import _content_words, support

PIECES = st.sampled_from(
    ["the", "Cat", "cat", "STRASSE", "straße", "[1]", "[a,", "b]", "[d3; d4]", " ", "\n", ",",
     "ﬁsh", "fish", "İ", "i̇", "42", "_", "-", "é", "e\u0301"]
)  # fmt: skip
TEXTS = st.lists(PIECES, max_size=12).map("".join) | st.text(max_size=40)
# All-ASCII evidence takes a path of its own (bytes searched for " word "): its own cases.
ASCII_PIECES = st.sampled_from(
    ["the", "Cat", "cat", "CAT", "[1]", "[a,", "b]", "[d3; d4]", " ", "\n", "\0", ",", "42", "_",
     "-", "x_1", "don't", "a.b", "\t", "~", "\x7f"]
)  # fmt: skip
ASCII_TEXTS = st.lists(ASCII_PIECES, max_size=12).map("".join) | st.text(
    string.printable, max_size=40
)


def support_apart(answer: str, evidence: list[str]) -> float:
    """The share as it was computed before: each text scanned on its own."""
    words = _content_words(answer)
    if not words:
        return 0.0
    found: set[str] = set()
    for text in evidence:
        found.update(_content_words(text))
    return sum(w in found for w in words) / len(words)


@given(TEXTS, st.lists(TEXTS, max_size=5))
def test_one_scan_of_the_evidence_gives_the_share_of_scanning_each_text(
    answer: str, evidence: list[str]
) -> None:
    assert support(answer, evidence) == support_apart(answer, evidence)


@given(TEXTS | ASCII_TEXTS, st.lists(ASCII_TEXTS, max_size=5))
def test_ascii_evidence_gives_the_same_share(answer: str, evidence: list[str]) -> None:
    assert support(answer, evidence) == support_apart(answer, evidence)


def test_ascii_words_match_whole_words_only() -> None:
    assert support("cat dog", ["concatenate the dogs"]) == 0.0
    assert support("cat dog", ["CAT, dog!"]) == 1.0
    assert support("x_1 42", ["(x_1) 420"]) == 0.5


def test_a_marker_cut_across_two_texts_is_not_one_marker() -> None:
    # joined by a newline, "[p,\nq]" would be one marker and hide both words
    assert support("p q", ["x [p,", "q] y"]) == support_apart("p q", ["x [p,", "q] y"]) == 1.0
    assert support("p q", ["x [p,\nq] y"]) == 0.0
