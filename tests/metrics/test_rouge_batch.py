"""The batch ROUGE port (n-gram ids in arrays, rapidfuzz LCS, one tokenizer pass over the batch)
gives rouge-score's numbers bit for bit, whichever path a batch takes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from rag_judge.metrics import ngrams
from rag_judge.metrics.rouge import port as rouge
from rag_judge.metrics.rouge import scores
from rag_judge.metrics.rouge.scores import rouge_scores

TYPES = ["rouge1", "rouge2", "rouge3", "rougeL", "rougeLsum"]
THEIRS = {stem: rouge_scorer.RougeScorer(TYPES, use_stemmer=stem) for stem in (False, True)}
# ASCII only, so a batch takes the joined translate-and-split tokenizer; "\x01" is the batch's
# own separator, which a text may contain too. The mixed test adds non-ASCII words, among them
# the Kelvin sign, which lowercases to an ASCII "k", and sigma, which lowercases by context.
ASCII = ["the", "cat", "sat", "on", "a", "mat", "The", "CATS", "running", "runs", "generously"]
ASCII += ["3", "42", "3.14", "don't", "e-mail", "U.S.", "!", ",", "\x01", "a\x01b"]
SEPS = [" ", " ", " ", "", "\n", "\n\n", " \n ", "\t", ", ", "\r\n"]


@st.composite
def texts(draw: st.DrawFn, extra: tuple[str, ...] = ()) -> str:
    words = draw(st.lists(st.sampled_from(ASCII + list(extra)), max_size=25))
    seps = draw(st.lists(st.sampled_from(SEPS), min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps))


def _check(preds: list[str], refs: list[list[str]], stem: bool, tokenizer: str = "default") -> None:
    """The port's batch against rouge-score pair by pair (on ASCII text both tokenizers are
    rouge-score's default)."""
    port = rouge.RougeScorer(TYPES, tokenizer=scores.rouge_tokenizer(tokenizer, stem))
    ours = port.score_batch(preds, refs)
    for i, (pred, targets) in enumerate(zip(preds, refs, strict=True)):
        for rtype, want in THEIRS[stem].score_multi(targets, pred).items():
            assert tuple(float(a[i]) for a in ours[rtype]) == tuple(want), (i, rtype, pred)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(texts(), st.lists(texts(), min_size=1, max_size=3)), min_size=1, max_size=6),
    st.booleans(),
    st.sampled_from(["default", "unicode"]),
)
def test_ascii_batches_equal_rouge_score(
    pairs: list[tuple[str, list[str]]], stem: bool, tokenizer: str
) -> None:
    _check([p for p, _ in pairs], [r for _, r in pairs], stem, tokenizer=tokenizer)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(texts(("café", "\u212a", "Σ")), st.lists(texts(("ΑΣ",)), min_size=1, max_size=2)),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
)
def test_mixed_batches_equal_rouge_score(pairs: list[tuple[str, list[str]]], stem: bool) -> None:
    _check([p for p, _ in pairs], [r for _, r in pairs], stem)


def test_ascii_words_is_the_regex_or_declines() -> None:
    batch = ["A cat, 3.14!", "", "e-mail\nU.S.", "  x  "]
    assert rouge.ascii_words(batch) == [rouge.DefaultTokenizer().tokenize(t) for t in batch]
    assert rouge.ascii_words(["café"]) is None  # not ASCII: the caller tokenizes text by text
    assert rouge.ascii_words(["a\x01b", "c"]) is None  # holds the separator
    assert rouge.ascii_words([]) is None


def test_chunks_and_dense_renumbering_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    words = ASCII[:11]
    preds = [" ".join(rng.choice(words, rng.integers(0, 30))) for _ in range(120)]
    refs = [[" ".join(rng.choice(words, rng.integers(0, 30)))] * rng.integers(1, 3) for _ in preds]
    whole = rouge_scores(preds, refs)
    monkeypatch.setattr(scores, "ROUGE_BATCH", 7)
    monkeypatch.setattr(ngrams, "_DENSE_ABOVE", 0)  # every order renumbered densely
    chunked = rouge_scores(preds, refs)
    assert all(np.array_equal(whole[k], chunked[k]) for k in whole)
    monkeypatch.setattr(ngrams, "_NO_OVERFLOW", 0)  # also renumbered before each product
    guarded = rouge_scores(preds, refs)
    assert all(np.array_equal(whole[k], guarded[k]) for k in whole)
    monkeypatch.setattr(rouge, "_CODE_POINTS", 0)  # LCS over lists of ids, not strings
    as_lists = rouge_scores(preds, refs)
    assert all(np.array_equal(whole[k], as_lists[k]) for k in whole)
    _check(preds, refs, stem=False)


def test_clipped_matches_and_best_of_groups() -> None:
    table = ngrams.encode([["a", "b", "a"], ["a", "a", "c"], []])
    rows, grams = ngrams.ngram_ids(table, 2)[0]
    counts = ngrams.GramCounts.of(rows, grams, 3, table.vocab)
    hits = ngrams.clipped_matches(counts, np.array([0, 1, 2, 0]), counts, np.array([1, 0, 0, 0]))
    assert hits.tolist() == [2, 2, 0, 3]  # min(2, 2) for "a"; an empty row; a row with itself
    bigrams = ngrams.ngram_ids(table, 2)[1]
    assert bigrams[0].tolist() == [0, 0, 1, 1]  # two per 3-token text, none for the empty one
    assert bigrams[1][0] != bigrams[1][2] and len(set(bigrams[1].tolist())) == 4
    best = ngrams.best_of_groups(np.array([0.5, 0.9, 0.9, 0.1, 0.0]), np.array([0, 3, 4]))
    assert best.tolist() == [1, 3, 4]  # the first of equals, as np.argmax
    with pytest.raises(ValueError, match="same n-gram ids"):
        other = ngrams.GramCounts.of(rows, grams, 3, table.vocab + 1)
        ngrams.clipped_matches(counts, np.array([0]), other, np.array([0]))
