"""BLEU statistics for a batch in arrays equal sacrebleu's, segment by segment and row by row:
the 13a tokenizer run once over the joined batch, n-gram counts, the references' maximum, the
clipping and the closest reference length."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.bleu import BLEU

from rag_judge.metrics.sacrebleu.bleu_rows import bleu_rows, tokenize_segments

# What 13a's rules and replacements look at: digits beside . , and -, its escapes and markers,
# line breaks (also "-\n"), ASCII punctuation, non-ASCII, and the batch's own separator "\0".
PIECES = ["a", "Cat", "3", "42", ".", ",", "-", "-\n", "\n", " ", "  ", "\t", "&quot;", "&amp;"]
PIECES += ["&lt;", "&gt;", "&", "<skipped>", "'", '"', "(", ")", "$", "%", "/", ":", "@", "~"]
PIECES += ["`", "^", "_", "{", "É", "ß", "東京", "!", "?", "\0", "3.14", "1,000", "e.g."]


def segments(max_size: int = 20) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(PIECES), max_size=max_size).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(segments(), min_size=1, max_size=8), st.booleans())
def test_13a_over_the_joined_batch_is_sacrebleus(batch: list[str], lowercase: bool) -> None:
    bleu = BLEU(tokenize="13a", lowercase=lowercase)
    want = [bleu._preprocess_segment(s).split() for s in batch]
    assert tokenize_segments(bleu.tokenizer, batch, lowercase) == want


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(segments(30), st.lists(segments(30), min_size=1, max_size=3)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["13a", "none", "char", "intl", "zh"]),
    st.booleans(),
    st.integers(1, 5),
)
def test_rows_equal_sacrebleus_statistics(
    pairs: list[tuple[str, list[str]]], tokenize: str, lowercase: bool, order: int
) -> None:
    hyps = [h for h, _ in pairs]
    refs = [r for _, r in pairs]
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase, max_ngram_order=order)
    width = max(map(len, refs))
    streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
    want = bleu._extract_corpus_statistics(hyps, streams)
    assert bleu_rows(bleu.tokenizer, hyps, refs, lowercase, order).tolist() == want


def test_closest_reference_length_ties_take_the_shorter() -> None:
    bleu = BLEU()
    rows = bleu_rows(
        bleu.tokenizer, ["a b c d"], [["a b", "a b c d e f", "a b c d e f g"]], False, 4
    )
    assert rows[0, :2].tolist() == [4, 2]  # |4 - 2| == |4 - 6|: the shorter, as sacrebleu
    rows = bleu_rows(bleu.tokenizer, ["a b c d", "x"], [["a b c"], ["x y", ""]], False, 2)
    assert rows[:, :2].tolist() == [[4, 3], [1, 0]]  # an empty reference counts, length 0


@pytest.mark.parametrize("tokenize", ["13a", "none"])
def test_no_tokens_anywhere(tokenize: str) -> None:
    bleu = BLEU(tokenize=tokenize)
    assert bleu_rows(bleu.tokenizer, ["", " "], [[""], ["", " "]], False, 4).tolist() == [
        [0, 0] + [0] * 8,
        [0, 0] + [0] * 8,
    ]
