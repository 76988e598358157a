"""BLEU on [0, 1]: sacrebleu's score / 100 bit for bit, except that a score above 100 is 1.0.

sacrebleu writes a perfect score (every n-gram precision 100%, no brevity penalty) as
exp(mean of log 100) = 100.00000000000004 at n-gram orders 1-17 (99.9999999999999x above);
nothing else exceeds 100 once floor smoothing's value is at most 1. The README says so wherever
it claims equality with sacrebleu; the last test holds it to that.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.bleu import BLEU

from rag_judge.errors import ConfigError
from rag_judge.evaluators.sacrebleu import BleuEvaluator
from rag_judge.metrics.sacrebleu import bleu_statistics, corpus_bleu_from_rows

README = Path(__file__).resolve().parents[2] / "README.md"
TOKENS = ["a", "b", "c", "d"]  # a small vocabulary: perfect and near-perfect matches are common


def _perfect(result: sacrebleu.BLEUScore, order: int) -> bool:
    """Every precision sacrebleu used 100% and no brevity penalty."""
    used = [p for p, t in zip(result.precisions, result.totals) if t > 0][:order]
    return bool(used) and all(p == 100.0 for p in used) and result.bp == 1.0


def test_a_perfect_match_is_1_where_sacrebleu_says_more() -> None:
    # one of each kind: a short answer, a long one, and one that is not its reference
    for hyp, refs in [
        ("cat 2024", ["cat 2024"]),  # two words: effective order 2
        ("the cat sat on the mat", ["the cat sat on the mat"]),
        ("a b c d", ["a b c d e f", "a b"]),  # only a reference's n-grams, closest length 2
    ]:
        want = sacrebleu.sentence_bleu(hyp, refs)
        assert want.score == 100.00000000000004 and want.score / 100 > 1.0
        stats = bleu_statistics([hyp], [refs])
        assert stats.sentence.tolist() == [1.0]
    corpus = sacrebleu.corpus_bleu(["a b c d e"], [["a b c d e"]])
    assert corpus.score > 100
    assert corpus_bleu_from_rows(bleu_statistics(["a b c d e"], [["a b c d e"]]).rows) == 1.0


@pytest.mark.parametrize("order", range(1, 21))
def test_the_cap_by_ngram_order(order: int) -> None:
    words = " ".join(TOKENS * 6)  # 24 tokens: every order up to 20 has n-grams
    want = BLEU(max_ngram_order=order, effective_order=True).sentence_score(words, [words])
    got = bleu_statistics([words], [[words]], max_ngram_order=order).sentence[0]
    # exp(mean of k copies of log 100) is 100.00000000000004 or ...13 up to k = 17, then below
    assert want.score == 100 * math.exp(sum([math.log(100.0)] * order) / order) / 100
    assert got == min(want.score / 100, 1.0)
    assert bool(got == 1.0) is (order <= 17)


_pairs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(TOKENS), min_size=0, max_size=6),
        st.lists(st.lists(st.sampled_from(TOKENS), min_size=0, max_size=6), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(
    pairs=_pairs,
    smoothing=st.sampled_from([("exp", None), ("floor", 0.1), ("floor", 1.0), ("add-k", 1.0)]),
    order=st.integers(1, 5),
)
def test_every_other_score_is_sacrebleus_bit_for_bit(
    pairs: list[tuple[list[str], list[list[str]]]],
    smoothing: tuple[str, float | None],
    order: int,
) -> None:
    method, value = smoothing
    hyps = [" ".join(h) for h, _ in pairs]
    refs = [[" ".join(r) for r in rs] for _, rs in pairs]
    stats = bleu_statistics(
        hyps, refs, smooth_method=method, smooth_value=value, max_ngram_order=order
    )
    bleu = BLEU(
        smooth_method=method, smooth_value=value, max_ngram_order=order, effective_order=True
    )
    for i, (hyp, rs) in enumerate(zip(hyps, refs, strict=True)):
        want = bleu.sentence_score(hyp, rs)
        if want.score > 100:  # the one exception: a perfect score, read as exactly 1.0
            assert _perfect(want, order), (hyp, rs, want)
            assert stats.sentence[i] == 1.0
        else:
            assert stats.sentence[i] == want.score / 100, (hyp, rs)


def test_floor_smoothing_above_1_is_refused() -> None:
    # sacrebleu would score this wrong answer 105.7: a floor of 5 matches where there are none
    assert sacrebleu.sentence_bleu("a b c d", ["a b c e"], "floor", 5).score > 100
    with pytest.raises(ConfigError, match=r"'floor' must be between 0 and 1, got 5"):
        bleu_statistics(["a b c d"], [["a b c e"]], smooth_method="floor", smooth_value=5)
    with pytest.raises(ValueError, match=r"'floor' must be between 0 and 1, got 1\.5"):
        BleuEvaluator(smooth_method="floor", smooth_value=1.5)
    BleuEvaluator(smooth_method="floor", smooth_value=1)  # at most 1: no precision above 100%
    BleuEvaluator(smooth_method="add-k", smooth_value=5)  # (c + k) / (t + k) stays below 1


def test_the_readme_states_the_cap_wherever_it_claims_sacrebleus_numbers() -> None:
    # a unit is a table row or a paragraph
    text = README.read_text(encoding="utf-8")
    units = [
        unit
        for block in re.split(r"\n\s*\n", text)
        for unit in (block.splitlines() if block.lstrip().startswith("|") else [block])
    ]
    claims = [
        unit
        for unit in units
        if re.search(r"\bBLEU\b|`bleu`", unit)
        and re.search(r"identical numbers|bit for bit|bit-exact|equal with `==`|row for row", unit)
    ]
    # the generation metrics table and its paragraph, and the performance table
    assert len(claims) >= 3, claims
    for unit in claims:
        assert "100.00000000000004" in unit or "above 100" in unit, unit
