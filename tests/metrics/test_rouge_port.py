"""The ROUGE port gives rouge-score's numbers exactly (==) and does not import nltk."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from rag_judge.metrics.rouge import UnicodeTokenizer, rouge_scores
from rag_judge.metrics.rouge import port as rouge

# Type lists that take different paths: all types; rougeLsum alone (rouge-score then skips
# whole-text tokens); rougeLsum before rougeL (no reuse of rougeL's numbers).
TYPE_SETS = [
    ["rouge1", "rouge2", "rouge3", "rougeL", "rougeLsum"],
    ["rougeLsum"],
    ["rougeLsum", "rougeL", "rouge2"],
]
THEIRS = {
    (i, stem): rouge_scorer.RougeScorer(types, use_stemmer=stem)
    for i, types in enumerate(TYPE_SETS)
    for stem in (False, True)
}
OURS = {
    (i, stem): rouge.RougeScorer(types, use_stemmer=stem)
    for i, types in enumerate(TYPE_SETS)
    for stem in (False, True)
}

# Few distinct words, so texts repeat them (LCS ties, clipped n-gram counts); words the stemmer
# changes; case, digits, punctuation, non-ASCII (which the default tokenizer deletes).
VOCAB = [
    *("the", "cat", "sat", "on", "a", "mat", "The", "Cat", "cats", "running", "runs", "ran"),
    *("generously", "relational", "3", "42", "3.14", "don't", "e-mail", "U.S.", "café"),
    *("naïve", "Привет", "мир", "東京", "!", ",", "?"),
]
SEPS = [" ", " ", " ", "", "\n", "\n\n", " \n ", "\t", ", ", "\r\n"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:  # anything at all, now and then
        return draw(st.text(max_size=30))
    words = draw(st.lists(st.sampled_from(VOCAB), max_size=30))
    seps = draw(st.lists(st.sampled_from(SEPS), min_size=len(words), max_size=len(words)))
    return draw(st.sampled_from(["", " ", "\n"])) + "".join(w + s for w, s in zip(words, seps))


def _same(ours: dict[str, rouge.Score], theirs: dict[str, Any]) -> None:
    assert list(ours) == list(theirs)
    for rtype, score in ours.items():
        assert tuple(score) == tuple(theirs[rtype]), rtype


@settings(max_examples=400)
@given(texts(), texts(), st.sampled_from(range(len(TYPE_SETS))), st.booleans())
def test_score_equals_rouge_score(target: str, prediction: str, types: int, stem: bool) -> None:
    _same(
        OURS[types, stem].score(target, prediction),
        THEIRS[types, stem].score(target, prediction),
    )


@settings(max_examples=200)
@given(st.lists(texts(), min_size=1, max_size=4), texts(), st.booleans())
def test_score_multi_equals_rouge_score(targets: list[str], prediction: str, stem: bool) -> None:
    _same(
        OURS[0, stem].score_multi(targets, prediction),
        THEIRS[0, stem].score_multi(targets, prediction),
    )


@settings(max_examples=300)
@given(*[st.lists(st.sampled_from("abcd"), max_size=25)] * 2)
def test_lcs_table_and_backtrack_are_rouge_scores(ref: list[str], can: list[str]) -> None:
    cols = rouge._lcs_columns(ref, can)
    table = [[(cols[j] & ((1 << i) - 1)).bit_count() for j in range(len(can) + 1)]
             for i in range(len(ref) + 1)]  # fmt: skip
    theirs = rouge_scorer._lcs_table(ref, can)
    assert table == theirs
    assert rouge._lcs_indices(ref, can)[::-1] == rouge_scorer._backtrack_norec(theirs, ref, can)


def _corpus(n: int, seed: int) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)

    def text() -> str:
        roll = rng.random()
        if roll < 0.05:
            return rng.choice(["", " ", "\n", " \n\t ", "!?"])
        words = [rng.choice(VOCAB) for _ in range(rng.randint(1, 40))]
        return "".join(w + rng.choice(SEPS) for w in words)

    preds = [text() for _ in range(n)]
    refs = [
        [
            # Half the references share words and order with the prediction.
            " ".join(w for w in p.split(" ") if rng.random() < 0.8) if rng.random() < 0.5
            else text()
            for _ in range(rng.randint(1, 3))
        ]
        for p in preds
    ]  # fmt: skip
    return preds, refs


CORPUS = _corpus(1500, seed=11)


@pytest.mark.slow
@pytest.mark.parametrize("stem", [False, True])
def test_seeded_corpus_equals_rouge_score(stem: bool) -> None:
    preds, refs = CORPUS
    types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    ours = rouge_scores(preds, refs, rouge_types=types, use_stemmer=stem)
    port, theirs = OURS[0, stem], THEIRS[0, stem]
    for i, (pred, rs) in enumerate(zip(preds, refs, strict=True)):
        want = theirs.score_multi(rs, pred)
        _same(port.score_multi(rs, pred), want)
        for rtype in types:
            got = tuple(ours[f"{rtype}_{m}"][i] for m in ("precision", "recall", "f1"))
            assert got == tuple(want[rtype]), (i, rtype, pred, rs)
    assert max(ours["rougeLsum_f1"]) > 0.9 and min(ours["rougeLsum_f1"]) == 0.0


def test_unicode_tokenizer_through_the_port_equals_rouge_score() -> None:
    preds, refs = CORPUS
    ours = rouge_scores(preds[:300], refs[:300], use_stemmer=True, tokenizer="unicode")
    theirs = rouge_scorer.RougeScorer(
        ["rouge1", "rouge2", "rougeL", "rougeLsum"], tokenizer=UnicodeTokenizer(True)
    )
    for i, (pred, rs) in enumerate(zip(preds[:300], refs[:300], strict=True)):
        for rtype, want in theirs.score_multi(rs, pred).items():
            got = tuple(ours[f"{rtype}_{m}"][i] for m in ("precision", "recall", "f1"))
            assert got == tuple(want), (i, rtype)


@pytest.mark.parametrize("rtype", ["rouge0", "rougeX", "rouge10", "rougel"])
def test_invalid_types_raise_rouge_scores_error(rtype: str) -> None:
    with pytest.raises(ValueError) as theirs:
        rouge_scorer.RougeScorer([rtype]).score("a", "a")
    with pytest.raises(ValueError, match="^" + str(theirs.value) + "$"):
        rouge.RougeScorer([rtype])


@pytest.mark.parametrize("stem", [False, True])
def test_nltk_is_imported_only_for_the_stemmer(stem: bool) -> None:
    code = (
        "import sys\n"
        "from rag_judge.metrics.rouge import rouge_scores\n"
        "pred, refs = 'a cat sat\\non a mat', ['the cat sat', 'mats']\n"
        f"s = rouge_scores([pred], [refs], use_stemmer={stem})\n"
        "assert s['rougeLsum_f1'][0] > 0\n"
        "print('nltk' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=120, capture_output=True, text=True
    )
    assert done.stdout.strip() == str(stem)
