"""BLEU options, chrF, chrF++ and TER against sacrebleu itself, sentence and corpus level.

Every number here is compared with ``==`` (stronger than the 1e-12 the README promises): BLEU's
statistics are counted a batch at a time and chrF's and TER's by ports of sacrebleu's code
(``chrf_port.py``, ``ter_port.py``; more cases in test_chrf_ter_port.py), and the scores come
from sacrebleu's own functions of them or transcriptions of those.
"""

from __future__ import annotations

import pickle
import random
from functools import partial
from typing import Any

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.metrics.ter import TER

from rag_judge.metrics.sacrebleu import (
    bleu_statistics,
    chrf_statistics,
    corpus_bleu_from_rows,
    corpus_chrf_from_rows,
    corpus_ter_from_rows,
    sentence_bleu_from_rows,
    sentence_chrf_from_rows,
    sentence_ter_from_rows,
    ter_statistics,
)
from tests.metrics.test_lexical import (
    CORPUS,
    WORDS,
    _streams,  # reference streams padded with None
)

V = sacrebleu.__version__


def _short_corpus(n: int, seed: int) -> tuple[list[str], list[list[str]]]:
    """Answers of 0-3 words: a corpus with no 4-gram at all, where effective order decides
    corpus BLEU (without it, an order with no n-gram makes BLEU 0)."""
    rng = random.Random(seed)
    hyps = [" ".join(rng.choices(WORDS[:12], k=rng.randint(0, 3))) for _ in range(n)]
    refs = [
        [" ".join(rng.choices(WORDS[:12], k=rng.randint(0, 4))) for _ in range(rng.randint(1, 3))]
        for _ in range(n)
    ]
    return hyps, refs


SHORT = _short_corpus(12, seed=3)


# ----------------------------------------------------------------------------------- BLEU

BLEU_CASES = [
    # max_ngram_order, smooth_method, smooth_value, effective_order, tokenizer, lowercase
    (2, "exp", None, None, "13a", False),
    (3, "floor", 0.0, None, "13a", True),
    (3, "floor", 0.1, True, "intl", False),
    (5, "add-k", 0.0, None, "13a", False),
    (5, "add-k", 0.1, False, "char", False),
    (4, "floor", 0.0, True, "13a", False),
    (4, "add-k", 0.1, True, "zh", True),
    (4, "none", None, False, "none", False),
    (1, "exp", None, True, "13a", False),
    (4, "floor", None, False, "13a", False),
]


def _sacre_bleu(
    order: int, method: str, value: float | None, eff: bool, tok: str, lc: bool
) -> BLEU:
    return BLEU(
        max_ngram_order=order,
        smooth_method=method,
        smooth_value=value,
        effective_order=eff,
        tokenize=tok,
        lowercase=lc,
    )


@pytest.mark.parametrize("corpus", [CORPUS, SHORT], ids=["words", "short"])
@pytest.mark.parametrize(
    ("order", "method", "value", "eff", "tok", "lc"), BLEU_CASES, ids=[str(c) for c in BLEU_CASES]
)
def test_bleu_options_equal_sacrebleu(
    corpus: tuple[list[str], list[list[str]]],
    order: int,
    method: str,
    value: float | None,
    eff: bool | None,
    tok: str,
    lc: bool,
) -> None:
    hyps, refs = corpus
    stats = bleu_statistics(
        hyps,
        refs,
        tokenizer=tok,
        lowercase=lc,
        smooth_method=method,
        smooth_value=value,
        max_ngram_order=order,
        effective_order=eff,
    )
    assert stats.rows.shape == (len(hyps), 2 + 2 * order)
    sent_eff, corp_eff = eff is not False, bool(eff)  # None: sacrebleu's two defaults
    sentence = _sacre_bleu(order, method, value, sent_eff, tok, lc)
    for i, (hyp, rs) in enumerate(zip(hyps, refs, strict=True)):
        want = sentence.sentence_score(hyp, rs)
        assert stats.sentence[i] == min(want.score / 100, 1.0), (i, hyp, rs)
    np.testing.assert_array_equal(
        sentence_bleu_from_rows(stats.rows, method, value, sent_eff), stats.sentence
    )
    corpus_bleu = _sacre_bleu(order, method, value, corp_eff, tok, lc)
    want_corpus = corpus_bleu.corpus_score(hyps, _streams(refs))
    assert corpus_bleu_from_rows(stats.rows, method, value, corp_eff) == min(
        want_corpus.score / 100, 1.0
    )
    assert stats.corpus_signature == corpus_bleu.get_signature().format()
    sentence.corpus_score(hyps, _streams(refs))  # sets its nrefs as the corpus call does
    assert stats.sentence_signature == sentence.get_signature().format()


def test_bleu_options_change_the_numbers() -> None:
    """The options reach sacrebleu at both levels: each of these pairs differs somewhere."""
    hyps, refs = SHORT
    base = bleu_statistics(hyps, refs)
    floor0 = bleu_statistics(hyps, refs, smooth_method="floor", smooth_value=0.0)
    floor1 = bleu_statistics(hyps, refs, smooth_method="floor", smooth_value=0.1)
    addk0 = bleu_statistics(hyps, refs, smooth_method="add-k", smooth_value=0.0)
    addk1 = bleu_statistics(hyps, refs, smooth_method="add-k")
    assert (floor0.sentence != floor1.sentence).any()
    assert (addk0.sentence != addk1.sentence).any()
    # smooth_value 0 is legal in sacrebleu: floor 0 is no smoothing, add-k 0 adds nothing.
    none = bleu_statistics(hyps, refs, smooth_method="none")
    np.testing.assert_array_equal(floor0.sentence, none.sentence)
    np.testing.assert_array_equal(addk0.sentence, none.sentence)
    # Effective order drops an order with no n-gram at all (not one with no match, as its
    # docstring says): a corpus without any 4-gram scores 0 without it.
    assert base.rows[:, 2 + 4 + 3].sum() == 0
    assert corpus_bleu_from_rows(base.rows) == 0.0
    assert corpus_bleu_from_rows(base.rows, effective_order=True) > 0
    # An order with n-grams but no match: smoothing decides corpus BLEU.
    rows = bleu_statistics(["a b c d", "e f g h"], [["a b c x"], ["e f x h"]]).rows
    assert rows[:, 2 + 3].sum() == 0 < rows[:, 2 + 4 + 3].sum()
    exp, floor = corpus_bleu_from_rows(rows), corpus_bleu_from_rows(rows, "floor", 0.1)
    assert 0 < floor < exp and corpus_bleu_from_rows(rows, "floor", 0.0) == 0.0
    bigram = bleu_statistics(hyps, refs, max_ngram_order=2)
    assert corpus_bleu_from_rows(bigram.rows) > 0
    np.testing.assert_array_equal(bigram.rows[:, :4], base.rows[:, :4])  # lengths, 1-2 matches


@pytest.mark.parametrize(
    ("options", "corpus_part", "sentence_part"),
    [
        ({}, "eff:no|tok:13a|smooth:exp", "eff:yes|tok:13a|smooth:exp"),
        ({"effective_order": True}, "eff:yes|tok:13a|smooth:exp", "eff:yes|tok:13a|smooth:exp"),
        ({"effective_order": False}, "eff:no|tok:13a|smooth:exp", "eff:no|tok:13a|smooth:exp"),
        (
            {"smooth_method": "floor", "smooth_value": 0.0},
            "eff:no|tok:13a|smooth:floor[0.00]",
            "eff:yes|tok:13a|smooth:floor[0.00]",
        ),
        (
            {"smooth_method": "add-k", "lowercase": True},
            "case:lc|eff:no|tok:13a|smooth:add-k[1.00]",
            "case:lc|eff:yes|tok:13a|smooth:add-k[1.00]",
        ),
    ],
)
def test_bleu_signature_strings(
    options: dict[str, object], corpus_part: str, sentence_part: str
) -> None:
    stats = bleu_statistics(["a b c"], [["a b c d", "a b"]], **options)  # type: ignore[arg-type]
    assert stats.corpus_signature.startswith("nrefs:2|")
    assert corpus_part in stats.corpus_signature and sentence_part in stats.sentence_signature
    assert stats.corpus_signature.endswith(f"|version:{V}")


def test_sacrebleu_signature_omits_order_and_rounds_smoothing() -> None:
    """Why our BLEU signature adds max_ngram_order and an unrounded smooth_value."""
    a = bleu_statistics(["a b"], [["a c"]], max_ngram_order=3)
    b = bleu_statistics(["a b"], [["a c"]])
    assert a.corpus_signature == b.corpus_signature
    c = bleu_statistics(["a b"], [["a c"]], smooth_method="floor", smooth_value=0.001)
    d = bleu_statistics(["a b"], [["a c"]], smooth_method="floor", smooth_value=0.0)
    assert c.sentence_signature == d.sentence_signature
    assert c.sentence[0] != d.sentence[0]


# ----------------------------------------------------------------------------------- chrF

CHRF_CASES = [
    # char_order, word_order, beta, lowercase, whitespace, eps_smoothing
    (6, 0, 2, False, False, False),  # chrF
    (6, 2, 2, False, False, False),  # chrF++
    (6, 2, 2, True, False, False),
    (6, 0, 2, True, True, False),
    (6, 2, 2, False, False, True),
    (4, 1, 1, False, True, True),
    (6, 0, 3, False, False, False),
    (0, 2, 2, False, False, False),  # word n-grams only
    (1, 0, 0, False, False, False),  # beta 0: precision
]


@pytest.mark.parametrize("corpus", [CORPUS, SHORT], ids=["words", "short"])
@pytest.mark.parametrize(
    ("nc", "nw", "beta", "lc", "ws", "eps"), CHRF_CASES, ids=[str(c) for c in CHRF_CASES]
)
def test_chrf_equals_sacrebleu(
    corpus: tuple[list[str], list[list[str]]],
    nc: int,
    nw: int,
    beta: int,
    lc: bool,
    ws: bool,
    eps: bool,
) -> None:
    hyps, refs = corpus
    options = {
        "char_order": nc,
        "word_order": nw,
        "beta": beta,
        "lowercase": lc,
        "whitespace": ws,
        "eps_smoothing": eps,
    }
    stats = chrf_statistics(hyps, refs, **options)  # type: ignore[arg-type]
    assert stats.rows.shape == (len(hyps), 3 * (nc + nw))
    chrf = CHRF(**options)  # type: ignore[arg-type]
    for i, (hyp, rs) in enumerate(zip(hyps, refs, strict=True)):
        want = chrf.sentence_score(hyp, rs).score / 100
        assert stats.sentence[i] == pytest.approx(want, abs=1e-12, rel=0)
        assert stats.sentence[i] == min(want, 1.0), (i, hyp, rs)
    np.testing.assert_array_equal(sentence_chrf_from_rows(stats.rows, beta, eps), stats.sentence)
    want_corpus = chrf.corpus_score(hyps, _streams(refs))
    assert corpus_chrf_from_rows(stats.rows, beta, eps) == min(want_corpus.score / 100, 1.0)
    assert stats.signature == chrf.get_signature().format()
    assert ((stats.sentence >= 0) & (stats.sentence <= 1)).all()
    if corpus is CORPUS:
        assert stats.sentence.max() == 1.0 and 0 < corpus_chrf_from_rows(stats.rows, beta, eps) < 1


def test_chrf_signature_strings_and_names() -> None:
    stats = chrf_statistics(["ab cd"], [["ab"]], word_order=2, lowercase=True, beta=3)
    assert stats.signature == f"nrefs:1|case:lc|eff:yes|nc:6|nw:2|space:no|version:{V}"
    # sacrebleu's signature does not say beta, though beta changes the number:
    other = chrf_statistics(["ab cd"], [["ab"]], word_order=2, lowercase=True, beta=1)
    assert other.signature == stats.signature and other.sentence[0] != stats.sentence[0]
    eps = chrf_statistics(["a b", "c"], [["a c", "b"], ["a"]], eps_smoothing=True, whitespace=True)
    assert eps.signature == f"nrefs:var|case:mixed|eff:no|nc:6|nw:0|space:yes|version:{V}"
    assert CHRF(word_order=2).sentence_score("a", ["a"]).name == "chrF2++"


# ------------------------------------------------------------------------------------ TER

TER_CASES = [
    # normalized, no_punct, asian_support, case_sensitive
    (False, False, False, False),
    (True, False, False, False),
    (False, True, False, False),
    (False, False, True, False),
    (False, False, False, True),
    (True, False, True, False),
    (False, True, True, True),
    (True, True, True, True),
]


@pytest.mark.parametrize("corpus", [CORPUS, SHORT], ids=["words", "short"])
@pytest.mark.parametrize(
    ("norm", "punct", "asian", "case"), TER_CASES, ids=[str(c) for c in TER_CASES]
)
def test_ter_equals_sacrebleu(
    corpus: tuple[list[str], list[list[str]]], norm: bool, punct: bool, asian: bool, case: bool
) -> None:
    hyps, refs = corpus
    options: dict[str, Any] = {
        "normalized": norm,
        "no_punct": punct,
        "asian_support": asian,
        "case_sensitive": case,
    }
    stats = ter_statistics(hyps, refs, **options)
    assert stats.rows.shape == (len(hyps), 2)
    ter = TER(**options)
    for i, (hyp, rs) in enumerate(zip(hyps, refs, strict=True)):
        want = ter.sentence_score(hyp, rs).score / 100
        assert stats.sentence[i] == pytest.approx(want, abs=1e-12, rel=0)
        assert stats.sentence[i] == want, (i, hyp, rs)
    np.testing.assert_array_equal(sentence_ter_from_rows(stats.rows), stats.sentence)
    want_corpus = ter.corpus_score(hyps, _streams(refs))
    assert corpus_ter_from_rows(stats.rows) == want_corpus.score / 100
    assert stats.signature == ter.get_signature().format()
    assert (stats.sentence >= 0).all()
    if corpus is CORPUS:
        assert stats.sentence.max() > 1  # an error rate: more edits than reference words


def test_ter_signature_strings_and_quirks() -> None:
    stats = ter_statistics(["A b ."], [["a b", "a b c"]])
    assert stats.signature == (f"nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:{V}")
    # Fewest edits over the references, but their mean length: 1 / 2.5 here.
    assert stats.rows.tolist() == [[1.0, 2.5]]
    assert stats.sentence[0] == 0.4
    # Case is ignored unless case_sensitive.
    assert ter_statistics(["A"], [["a"]]).sentence[0] == 0.0
    assert ter_statistics(["A"], [["a"]], case_sensitive=True).sentence[0] == 1.0
    # An empty reference: any answer is 1.0 (sacrebleu's choice), an empty one 0.0.
    empty = ter_statistics(["one two three", "", ""], [[""], [""], ["a b"]])
    assert empty.sentence.tolist() == [1.0, 0.0, 1.0]
    signed = ter_statistics(["a"], [["a"]], normalized=True, no_punct=True, asian_support=True)
    assert signed.signature == (
        f"nrefs:1|case:lc|tok:tercom|norm:yes|punct:no|asian:yes|version:{V}"
    )


def test_ter_corpus_adds_lengths_in_sacrebleus_order() -> None:
    """Mean reference lengths are fractions; sacrebleu adds them row after row."""
    rng = random.Random(1)
    lengths = [rng.randint(1, 9) / rng.choice([1, 2, 3]) for _ in range(5000)]
    rows = np.array([[rng.randint(0, 9), n] for n in lengths], dtype=np.float64)
    want = TER()._aggregate_and_compute([[int(e), n] for e, n in rows.tolist()]).score / 100
    assert corpus_ter_from_rows(rows) == want


# ------------------------------------------------------------------------ all three families


@pytest.mark.parametrize(
    ("statistics", "nrefs"),
    [
        (partial(chrf_statistics, word_order=2), "nrefs:var|"),
        (partial(bleu_statistics, max_ngram_order=3), "nrefs:var|"),
    ],
)
def test_chunked_calls_equal_one_call(
    monkeypatch: pytest.MonkeyPatch, statistics: partial[object], nrefs: str
) -> None:
    from rag_judge.metrics.sacrebleu import bleu, chrf_port

    hyps, refs = SHORT
    whole = statistics(hyps, refs)
    monkeypatch.setattr(chrf_port, "CHRF_BATCH", 5)  # TER scores a pair at a time: no batches
    monkeypatch.setattr(bleu, "BLEU_BATCH", 5)
    chunked = statistics(hyps, refs)
    np.testing.assert_array_equal(chunked.rows, whole.rows)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(chunked.sentence, whole.sentence)  # type: ignore[attr-defined]
    sig = "signature" if hasattr(whole, "signature") else "corpus_signature"
    assert getattr(chunked, sig) == getattr(whole, sig)
    assert getattr(whole, sig).startswith(nrefs)


def test_no_pairs_and_bad_input() -> None:
    empty_chrf = chrf_statistics([], [], word_order=2)
    assert empty_chrf.rows.shape == (0, 24) and empty_chrf.signature.startswith("nrefs:0|")
    assert np.isnan(corpus_chrf_from_rows(empty_chrf.rows))
    assert np.isnan(corpus_ter_from_rows(ter_statistics([], []).rows))
    with pytest.raises(ValueError, match="at least one reference"):
        ter_statistics(["a"], [[]])
    with pytest.raises(ValueError, match="1 hypotheses but 2 reference lists"):
        chrf_statistics(["a"], [["a"], ["b"]])


def test_corpus_score_functions_pickle() -> None:
    # executor: ray ships CorpusStatistic.score to other processes.
    hyps, refs = SHORT
    rows = chrf_statistics(hyps, refs, beta=1).rows
    score = pickle.loads(pickle.dumps(partial(corpus_chrf_from_rows, beta=1)))
    assert score(rows) == CHRF(beta=1).corpus_score(hyps, _streams(refs)).score / 100
    bleu = pickle.loads(pickle.dumps(partial(corpus_bleu_from_rows, effective_order=True)))
    assert bleu(bleu_statistics(hyps, refs).rows) > 0
