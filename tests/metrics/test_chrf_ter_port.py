"""The chrF and TER ports against sacrebleu itself: every sentence and corpus score ``==``.

Hypothesis draws texts (unicode, punctuation, odd whitespace, empty ones) and every option the
evaluators accept; fixed cases pin the paths a random draw rarely takes (the beam of TER's edit
distance, the renumbering of wide n-gram keys, batches, the cap on shift candidates).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.metrics.lib_ter import translation_edit_rate
from sacrebleu.metrics.ter import TER

from rag_judge.metrics.sacrebleu import (
    chrf_port,
    chrf_statistics,
    corpus_chrf_from_rows,
    corpus_ter_from_rows,
    ter_statistics,
)
from rag_judge.metrics.sacrebleu.ter_port import ter_edits

_WORDS = ["the", "The", "cat", "sat", "on", "mat", ".", ",", "(hi)", "ÉTÉ", "été", "猫", "が",
          "東京", "a-b", "&amp;", "'s", "x", "「", "」", "。", "é", "ß"]  # fmt: skip
_SPACES = [" ", " ", " ", "  ", "\t", "\n", " \n-"]


@st.composite
def _text(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(_WORDS), max_size=14))
    out = ""
    for w in words:
        out += w + draw(st.sampled_from(_SPACES))
    return out if draw(st.booleans()) else out.strip()


_PAIRS = st.lists(
    st.tuples(_text(), st.lists(_text(), min_size=1, max_size=3)), min_size=1, max_size=6
)


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(map(len, refs))
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


@settings(max_examples=150, deadline=None)
@given(
    pairs=_PAIRS,
    char_order=st.integers(0, 7),
    word_order=st.integers(0, 3),
    beta=st.integers(0, 3),
    lowercase=st.booleans(),
    whitespace=st.booleans(),
    eps_smoothing=st.booleans(),
)
def test_chrf_equals_sacrebleu(
    pairs: list[tuple[str, list[str]]], char_order: int, word_order: int, beta: int,
    lowercase: bool, whitespace: bool, eps_smoothing: bool,
) -> None:  # fmt: skip
    if char_order + word_order == 0:
        char_order = 1
    options = {
        "char_order": char_order,
        "word_order": word_order,
        "beta": beta,
        "lowercase": lowercase,
        "whitespace": whitespace,
        "eps_smoothing": eps_smoothing,
    }
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    stats = chrf_statistics(hyps, refs, **options)  # type: ignore[arg-type]
    chrf = CHRF(**options)  # type: ignore[arg-type]
    want_rows = chrf._extract_corpus_statistics(hyps, _streams(refs))
    assert stats.rows.tolist() == want_rows
    for i, (hyp, rs) in enumerate(pairs):
        assert stats.sentence[i] == min(chrf.sentence_score(hyp, rs).score / 100, 1.0)
    corpus = chrf.corpus_score(hyps, _streams(refs)).score / 100
    assert corpus_chrf_from_rows(stats.rows, beta, eps_smoothing) == min(corpus, 1.0)
    assert stats.signature == chrf.get_signature().format()


@settings(max_examples=150, deadline=None)
@given(
    pairs=_PAIRS,
    normalized=st.booleans(),
    no_punct=st.booleans(),
    asian_support=st.booleans(),
    case_sensitive=st.booleans(),
)
def test_ter_equals_sacrebleu(
    pairs: list[tuple[str, list[str]]], normalized: bool, no_punct: bool, asian_support: bool,
    case_sensitive: bool,
) -> None:  # fmt: skip
    options = {
        "normalized": normalized,
        "no_punct": no_punct,
        "asian_support": asian_support,
        "case_sensitive": case_sensitive,
    }
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    stats = ter_statistics(hyps, refs, **options)
    ter = TER(**options)
    assert stats.rows.tolist() == ter._extract_corpus_statistics(hyps, _streams(refs))
    for i, (hyp, rs) in enumerate(pairs):
        assert stats.sentence[i] == ter.sentence_score(hyp, rs).score / 100
    assert corpus_ter_from_rows(stats.rows) == ter.corpus_score(hyps, _streams(refs)).score / 100
    assert stats.signature == ter.get_signature().format()


@settings(max_examples=200, deadline=None)
@given(
    hyp=st.lists(st.integers(0, 6), max_size=70),
    ref=st.lists(st.integers(0, 6), max_size=70),
)
def test_ter_edits_equal_sacrebleus_on_long_token_lists(hyp: list[int], ref: list[int]) -> None:
    """Few distinct words and up to 70 of them: many shifts, and distances past the beam."""
    h, r = [str(x) for x in hyp], [str(x) for x in ref]
    assert ter_edits(h, r) == translation_edit_rate(h, r)[0]


def test_ter_edits_where_the_beam_and_the_candidate_cap_decide() -> None:
    rng = random.Random(7)
    vocab = [f"w{k}" for k in range(12)]
    cases = []
    for k in range(8):
        ref = rng.choices(vocab, k=rng.randint(30, 60))
        hyp = list(ref)
        rng.shuffle(hyp)
        cases.append((hyp[: rng.randint(1, len(hyp))], ref))  # long, far apart: beam differs
        cases.append((ref[: 5 + k][::-1], ref * 2))  # length ratio beyond the beam's width
    cases.append((["a"] * 40, ["a"] * 3 + ["b"] * 40))
    cases.append(([], ["a", "b"]))
    cases.append((["a", "b"], []))
    want = [translation_edit_rate(h, r)[0] for h, r in cases]
    assert [ter_edits(h, r) for h, r in cases] == want
    assert any(w > 50 for w in want)  # distances well past the rapidfuzz shortcut


def test_chrf_batches_and_wide_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several batches, and n-gram keys too wide for 62 bits (renumbered between orders)."""
    rng = random.Random(3)
    alphabet = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)] + list("abc .,")
    hyps = ["".join(rng.choices(alphabet, k=rng.randint(0, 60))) for _ in range(30)]
    refs = [
        ["".join(rng.choices(alphabet[:50] + list(h), k=rng.randint(0, 60))) for _ in range(2)]
        for h in hyps
    ]
    monkeypatch.setattr(chrf_port, "CHRF_BATCH", 7)
    for options in ({"char_order": 9, "word_order": 3}, {"char_order": 2, "word_order": 6}):
        stats = chrf_statistics(hyps, refs, **options)
        chrf = CHRF(**options)
        assert stats.rows.tolist() == chrf._extract_corpus_statistics(hyps, _streams(refs))
        want = [min(chrf.sentence_score(h, r).score / 100, 1.0) for h, r in zip(hyps, refs)]
        np.testing.assert_array_equal(stats.sentence, want)


def test_chrf_f_scores_equal_the_scalar_transcription() -> None:
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 6, size=(400, 3 * 8))
    for beta, eps in ((0, False), (2, False), (3, True)):
        scalar = [chrf_port.f_score(row.tolist(), 8, beta, eps) for row in counts]
        assert chrf_port.f_scores(counts, 8, beta, eps).tolist() == scalar
        sacre = CHRF(char_order=8, word_order=0, beta=beta, eps_smoothing=eps)
        assert scalar == [sacre._compute_f_score(row.tolist()) for row in counts]


def test_a_lone_surrogate_is_a_character_as_in_sacrebleu() -> None:
    """JSON can carry "\\ud800", which json.loads keeps: sacrebleu scores it, so must the port
    (it used to raise UnicodeEncodeError)."""
    hyp, ref = "a \ud800 b", "a \ud800 c"
    stats = chrf_statistics([hyp], [[ref]])
    assert float(stats.sentence[0]) * 100 == CHRF().sentence_score(hyp, [ref]).score
