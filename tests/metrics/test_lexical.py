"""ROUGE and BLEU: golden numbers, agreement with rouge-score and sacrebleu, config errors."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from rouge_score import rouge_scorer, tokenizers

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.rouge import RougeEvaluator
from rag_judge.evaluators.sacrebleu import BLEU_AGGREGATE, BleuEvaluator
from rag_judge.metrics.rouge import ROUGE_TYPES, UnicodeTokenizer, rouge_scores
from rag_judge.metrics.sacrebleu import (
    bleu_statistics,
    bleu_tokenizers,
    corpus_bleu_from_rows,
    sentence_bleu_from_rows,
)
from rag_judge.pipeline import summarize
from rag_judge.report.model import Failure

# ----------------------------------------------------------------------------- golden numbers

HUNGER_PRED = "I really loved reading the Hunger Games"
HUNGER_REF = "I loved reading the Hunger Games"
ELDER_REF = "I am thirty six years old"


@pytest.mark.parametrize("tokenizer", ["default", "unicode"])
def test_rouge_seed_numbers(tokenizer: str) -> None:
    # Both tokenizers lowercase; the counts here do not depend on case.
    s = rouge_scores([HUNGER_PRED], [[HUNGER_REF]], tokenizer=tokenizer)
    assert s["rouge1_precision"][0] == pytest.approx(6 / 7, abs=1e-15)
    assert s["rouge1_recall"][0] == 1.0
    assert s["rouge2_precision"][0] == pytest.approx(4 / 6, abs=1e-15)
    assert s["rouge2_recall"][0] == pytest.approx(4 / 5, abs=1e-15)
    # The LCS is the whole reference: rougeL has rouge1's numbers here.
    assert s["rougeL_precision"][0] == pytest.approx(6 / 7, abs=1e-15)
    assert s["rougeLsum_f1"][0] == s["rougeL_f1"][0]


@pytest.mark.parametrize(
    ("hyp", "correct", "total"),
    [
        ("I have thirty six years", [4, 2, 1, 0], [5, 4, 3, 2]),
        ("six six six six six", [1, 0, 0, 0], [5, 4, 3, 2]),
        ("thirty six years have I", [4, 2, 1, 0], [5, 4, 3, 2]),
    ],
)
def test_bleu_clipped_precisions(hyp: str, correct: list[int], total: list[int]) -> None:
    # Whitespace tokens with case kept: sacrebleu's 'none' tokenizer.
    row = bleu_statistics([hyp], [[ELDER_REF]], tokenizer="none").rows[0]
    assert row[:2].tolist() == [5, 6]
    assert row[2:6].tolist() == correct
    assert row[6:].tolist() == total


def test_bleu_seed_unigram_precisions() -> None:
    rows = bleu_statistics(
        ["I have thirty six years", "six six six six six", "thirty six years have I"],
        [[ELDER_REF]] * 3,
        tokenizer="none",
    ).rows
    assert (rows[:, 2] / rows[:, 6]).tolist() == [4 / 5, 1 / 5, 4 / 5]
    assert rows[2, 5] / rows[2, 9] == 0.0  # "thirty six years have I": no matching 4-gram


# ------------------------------------------------------------------ agreement with the libraries

_WORD_TEXT = (
    "the a cat dog sat on mat The Cat quickly running runs ran of and to in is was "
    "café über naïve Müller résumé Привет мир кошка сидела 東京 我喜欢读书 日本語 "
    "3 42 3.14 1,000 2024 e-mail U.S. don't (see) [1] , . ! ? ; : - — \" ' «quoted»"
)
WORDS = _WORD_TEXT.split()


def _text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.04:
        return ""
    if roll < 0.08:
        return rng.choice([" ", "   ", "\t", "\n", " \n "])
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 18))]
    if rng.random() < 0.2:  # multi-sentence summaries for rougeLsum
        cut = rng.randint(0, len(words))
        words.insert(cut, "\n")
    return " ".join(words) if rng.random() < 0.9 else "".join(words)


def _related(text: str, rng: random.Random) -> str:
    """A reference sharing some words with the answer, so scores are not all zero."""
    words = text.split(" ")
    kept = [w for w in words if rng.random() < 0.7]
    for _ in range(rng.randint(0, 4)):
        kept.insert(rng.randint(0, len(kept)), rng.choice(WORDS))
    return " ".join(kept)


def make_corpus(n: int, seed: int) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    hyps, refs = [], []
    for _ in range(n):
        hyp = _text(rng)
        hyps.append(hyp)
        refs.append(
            [
                _related(hyp, rng) if rng.random() < 0.7 else _text(rng)
                for _ in range(rng.randint(1, 3))
            ]
        )
    return hyps, refs


CORPUS = make_corpus(400, seed=7)


@pytest.mark.parametrize(
    ("tokenizer", "use_stemmer"), [("default", False), ("default", True), ("unicode", True)]
)
def test_rouge_agrees_with_rouge_score(tokenizer: str, use_stemmer: bool) -> None:
    hyps, refs = CORPUS
    ours = rouge_scores(hyps, refs, use_stemmer=use_stemmer, tokenizer=tokenizer)
    tok = UnicodeTokenizer(use_stemmer) if tokenizer == "unicode" else None
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer, tokenizer=tok)
    for i, (hyp, rs) in enumerate(zip(hyps, refs, strict=True)):
        theirs = scorer.score_multi(rs, hyp)
        for t in ROUGE_TYPES:
            got = (ours[f"{t}_precision"][i], ours[f"{t}_recall"][i], ours[f"{t}_f1"][i])
            want = (theirs[t].precision, theirs[t].recall, theirs[t].fmeasure)
            assert got == pytest.approx(want, abs=1e-12, rel=0), (i, t, hyp, rs)
    assert ours["rouge1_f1"].max() > 0.5 and ours["rougeLsum_f1"].min() == 0.0


def test_rouge_subset_of_types_matches_full() -> None:
    hyps, refs = CORPUS
    full = rouge_scores(hyps[:100], refs[:100])
    only = rouge_scores(hyps[:100], refs[:100], rouge_types=("rougeLsum", "rouge2"))
    assert sorted(only) == sorted(k for k in full if k.startswith(("rougeLsum", "rouge2")))
    for key, values in only.items():
        np.testing.assert_array_equal(values, full[key])


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(map(len, refs))
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


@pytest.mark.parametrize(
    ("tokenizer", "lowercase", "smooth_method", "smooth_value"),
    [
        ("13a", False, "exp", None),
        ("13a", True, "floor", None),
        ("intl", False, "add-k", None),
        ("char", False, "floor", 0.5),
        ("zh", True, "none", None),
        ("none", False, "add-k", 2.0),
    ],
)
def test_bleu_agrees_with_sacrebleu(
    tokenizer: str, lowercase: bool, smooth_method: str, smooth_value: float | None
) -> None:
    hyps, refs = CORPUS
    stats = bleu_statistics(
        hyps,
        refs,
        tokenizer=tokenizer,
        lowercase=lowercase,
        smooth_method=smooth_method,
        smooth_value=smooth_value,
    )
    for i, (hyp, rs) in enumerate(zip(hyps, refs, strict=True)):
        want = sacrebleu.sentence_bleu(
            hyp,
            rs,
            smooth_method=smooth_method,
            smooth_value=smooth_value,
            lowercase=lowercase,
            tokenize=tokenizer,
        )
        assert stats.sentence[i] == min(want.score / 100, 1.0), i  # capped: see below
        if smooth_method != "add-k":  # compute_bleu adds k into the counts it reports
            assert stats.rows[i].tolist() == [
                want.sys_len,
                want.ref_len,
                *want.counts,
                *want.totals,
            ], i
    recomputed = sentence_bleu_from_rows(stats.rows, smooth_method, smooth_value)
    np.testing.assert_array_equal(recomputed, stats.sentence)

    corpus = sacrebleu.corpus_bleu(hyps, _streams(refs), lowercase=lowercase, tokenize=tokenizer)
    assert corpus_bleu_from_rows(stats.rows) == corpus.score / 100
    summed = stats.rows.sum(axis=0).tolist()
    assert summed == [corpus.sys_len, corpus.ref_len, *corpus.counts, *corpus.totals]
    assert 0.0 < corpus_bleu_from_rows(stats.rows) < 1.0
    assert ((stats.sentence >= 0) & (stats.sentence <= 1)).all()
    # Varying reference counts show up as sacrebleu's nrefs:var.
    assert stats.corpus_signature.startswith("nrefs:var|")
    assert f"|tok:{tokenizer}|" in stats.corpus_signature


def test_bleu_signatures_are_sacrebleus() -> None:
    stats = bleu_statistics(["a b c"], [["a b c d"]], smooth_method="floor")
    bleu = sacrebleu.BLEU(smooth_method="floor")  # the smoothing applies to corpus BLEU too
    bleu.corpus_score(["a b c"], [["a b c d"]])
    assert stats.corpus_signature == bleu.get_signature().format()
    assert stats.corpus_signature == (
        f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:floor[0.10]|version:{sacrebleu.__version__}"
    )
    assert "eff:yes" in stats.sentence_signature
    assert "smooth:floor[0.10]" in stats.sentence_signature


def test_perfect_match_is_exactly_one() -> None:
    # sacrebleu says 100.00000000000004 here (exp of a mean of logs); the [0, 1] scale caps it.
    assert sacrebleu.sentence_bleu("cat 2024", ["cat 2024"]).score > 100
    stats = bleu_statistics(["cat 2024", "a b c d e"], [["cat 2024"], ["a b c d e"]])
    assert stats.sentence.tolist() == [1.0, 1.0]
    assert corpus_bleu_from_rows(stats.rows) == 1.0


# ------------------------------------------------------------------------- Unicode tokenizer


def _rouge1_f(pred: str, ref: str, tokenizer: str) -> float:
    return float(
        rouge_scores([pred], [[ref]], rouge_types=("rouge1",), tokenizer=tokenizer)["rouge1_f1"][0]
    )


def test_default_tokenizer_trap_and_unicode_fix() -> None:
    # rouge-score's default deletes every character outside a-z0-9 ...
    assert tokenizers.DefaultTokenizer().tokenize("café Привет 東京") == ["caf"]
    assert _rouge1_f("Привет мир", "Привет мир", "default") == 0.0
    assert _rouge1_f("café", "cafè", "default") == 1.0  # both become "caf": a false match
    # ... the unicode tokenizer keeps them.
    assert _rouge1_f("café", "café", "unicode") == 1.0
    assert _rouge1_f("café", "cafè", "unicode") == 0.0
    assert _rouge1_f("Привет, мир!", "привет мир", "unicode") == 1.0
    assert _rouge1_f("Кошка сидела на ковре", "Кошка спала на ковре", "unicode") > 0.7
    # NFC: a decomposed é is the same word as a composed one.
    assert _rouge1_f("cafe\u0301", "caf\u00e9", "unicode") == 1.0


def test_unicode_tokenizer_scripts() -> None:
    tok = UnicodeTokenizer()
    # Devanagari vowel signs are combining marks; they stay inside their word.
    assert tok.tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    # Han and kana carry no spaces between words: one token per character.
    assert tok.tokenize("我喜欢读书。") == ["我", "喜", "欢", "读", "书"]
    assert _rouge1_f("我喜欢读书", "我喜欢看书", "unicode") == pytest.approx(0.8, abs=1e-15)
    assert tok.tokenize("한국어 문장, Ünïcode_ok 3.14") == [
        "한국어",
        "문장",
        "ünïcode",
        "ok",
        "3",
        "14",
    ]
    # Stemming touches only ASCII words longer than 3 characters, as the default does.
    assert UnicodeTokenizer(use_stemmer=True).tokenize("Running cats über cafés") == [
        "run",
        "cat",
        "über",
        "cafés",
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60), st.booleans())
def test_unicode_tokenizer_equals_default_on_ascii(text: str, stem: bool) -> None:
    assert UnicodeTokenizer(stem).tokenize(text) == tokenizers.DefaultTokenizer(stem).tokenize(text)


# ------------------------------------------------------------------------------ evaluators


def _samples() -> list[Sample]:
    return [
        Sample(id="a", answer=HUNGER_PRED, references=[HUNGER_REF, "something else"]),
        Sample(id="b", references=["no answer here"]),
        Sample(id="c", answer="an answer without references"),
        Sample(id="d", answer="", references=["an empty answer"]),
        Sample(id="e", answer="  \n ", references=["a blank answer"]),
        Sample(id="f", answer="I have thirty six years", references=[ELDER_REF]),
    ]


def test_rouge_evaluator_scores_and_per_sample_errors() -> None:
    ev = RougeEvaluator(rouge_types=["rouge1", "rougeLsum"], measures=["f1", "recall"])
    assert ev.metric_names() == ["rouge1_f1", "rouge1_recall", "rougeLsum_f1", "rougeLsum_recall"]
    out = ev.evaluate(_samples())
    assert out.scores["rouge1_recall"][0] == 1.0
    assert out.scores["rouge1_f1"][0] == pytest.approx(2 * (6 / 7) / (6 / 7 + 1), abs=1e-15)
    assert [out.scores["rouge1_f1"][i] for i in (1, 2, 3, 4)] == [None, None, 0.0, 0.0]
    assert _texts(out.errors[1]) == {m: "field 'answer' is missing" for m in ev.metric_names()}
    assert out.errors[2]["rougeLsum_f1"].text() == "field 'references' is missing or empty"
    assert out.errors[0] == out.errors[3] == {}
    assert out.signatures["rougeLsum_f1"].render() == (
        "rougeLsum|tok:default|stem:no|refs:best-f|split:newline|rouge_score:0.1.2"
        f"|version:{__version__}"
    )
    assert (
        "tok:unicode|stem:yes"
        in RougeEvaluator(tokenizer="unicode", use_stemmer=True)
        .evaluate(_samples())
        .signatures["rouge2_precision"]
        .render()
    )


def test_bleu_evaluator_sentence_per_sample_and_corpus_summary() -> None:
    samples = _samples()
    out = BleuEvaluator().evaluate(samples)
    scores = out.scores["bleu"]
    assert scores[1] is None and scores[2] is None
    assert _texts(out.errors[2]) == {"bleu": "field 'references' is missing or empty"}
    assert scores[3] == 0.0 and scores[4] == 0.0
    ok = [0, 3, 4, 5]
    for i in ok:
        want = sacrebleu.sentence_bleu(samples[i].answer, list(samples[i].references))
        assert scores[i] == want.score / 100
    corpus = out.corpus["bleu"]
    assert corpus.description == BLEU_AGGREGATE
    hyps = [samples[i].answer or "" for i in ok]
    refs = _streams([list(samples[i].references) for i in ok])
    want_corpus = sacrebleu.corpus_bleu(hyps, refs).score / 100
    summary = summarize(scores, resamples=300, confidence=0.9, seed=3, corpus=corpus)
    assert summary.mean == want_corpus
    assert summary.mean != pytest.approx(np.mean([scores[i] for i in ok]))  # not the mean
    assert summary.n == 4 and summary.errors == 2 and summary.aggregate == BLEU_AGGREGATE
    sig = out.signatures["bleu"].render()
    assert sig == (
        "bleu|corpus:[nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:"
        f"{sacrebleu.__version__}]|sentence:[nrefs:var|case:mixed|eff:yes|tok:13a|smooth:exp"
        f"|version:{sacrebleu.__version__}]|version:{__version__}"
    )


def test_corpus_bleu_bootstrap_interval() -> None:
    hyps, refs = CORPUS
    samples = [
        Sample(id=str(i), answer=h, references=r)
        for i, (h, r) in enumerate(zip(hyps, refs, strict=True))
    ]
    out = BleuEvaluator(smooth_method="floor", smooth_value=0.2).evaluate(samples)
    summary = summarize(
        out.scores["bleu"], resamples=200, confidence=0.95, seed=0, corpus=out.corpus["bleu"]
    )
    # the smoothing applies to corpus BLEU too (here it changes nothing: every order matches)
    want = sacrebleu.corpus_bleu(hyps, _streams(refs), smooth_method="floor", smooth_value=0.2)
    assert (
        summary.mean == want.score / 100 == sacrebleu.corpus_bleu(hyps, _streams(refs)).score / 100
    )
    assert summary.ci_low is not None and summary.ci_high is not None
    assert summary.ci_low < summary.mean < summary.ci_high
    assert summary.ci_high - summary.ci_low < 0.2
    again = summarize(
        out.scores["bleu"], resamples=200, confidence=0.95, seed=0, corpus=out.corpus["bleu"]
    )
    assert again == summary  # seeded


def test_evaluators_with_no_usable_sample() -> None:
    samples = [Sample(id="x"), Sample(id="y", answer="a")]
    for ev in (RougeEvaluator(), BleuEvaluator()):
        out = ev.evaluate(samples)
        assert all(v is None for col in out.scores.values() for v in col)
        assert "field 'answer' is missing; field 'references' is missing or empty" in (
            _texts(out.errors[0]).values()
        )
        assert (
            summarize(
                out.scores[ev.metric_names()[0]],
                resamples=10,
                confidence=0.9,
                seed=0,
                corpus=out.corpus.get("bleu"),
            ).mean
            is None
        )


# ------------------------------------------------------------------------ config validation


@pytest.mark.parametrize(
    ("cls", "options", "bad", "legal"),
    [
        (BleuEvaluator, {"tokenizer": "moses"}, "'moses'", "none, zh, 13a, intl, char"),
        (BleuEvaluator, {"smooth_method": "laplace"}, "'laplace'", "exp, floor, add-k, none"),
        (
            BleuEvaluator,
            {"smooth_method": "exp", "smooth_value": 0.1},
            "'exp'",
            "'floor' or 'add-k'",
        ),
        (
            RougeEvaluator,
            {"rouge_types": ["rouge1", "rouge3"]},
            "'rouge3'",
            "rouge1, rouge2, rougeL, rougeLsum",
        ),
        (RougeEvaluator, {"measures": ["fmeasure"]}, "'fmeasure'", "precision, recall, f1"),
        (RougeEvaluator, {"tokenizer": "spacy"}, "'spacy'", "default, unicode"),
        (RougeEvaluator, {"rouge_types": ["rouge1", "rouge1"]}, "rouge1", "listed twice"),
    ],
)
def test_config_errors_name_value_and_legal_set(
    cls: type[BleuEvaluator | RougeEvaluator], options: dict[str, object], bad: str, legal: str
) -> None:
    with pytest.raises(ValidationError) as err:
        cls.model_validate({"type": cls.model_fields["type"].default, **options})
    assert bad in str(err.value) and legal in str(err.value)


def test_uninstalled_bleu_tokenizer_is_named() -> None:
    usable, missing = bleu_tokenizers()
    assert {"13a", "intl", "char", "zh", "none"} <= set(usable)
    if "ja-mecab" not in missing:
        pytest.skip("MeCab is installed here")
    with pytest.raises(ValidationError, match=r"'ja-mecab' needs packages .*MeCab"):
        BleuEvaluator(tokenizer="ja-mecab")


def test_pipeline_report_says_which_bleu_is_which() -> None:
    from rag_judge.pipeline import Pipeline
    from rag_judge.report.markdown import render_markdown

    samples = _samples()
    pipe = Pipeline([RougeEvaluator(rouge_types=["rougeL"]), BleuEvaluator()])
    report = pipe.run(samples).report
    bleu = report.summary["bleu"]
    assert bleu.aggregate == BLEU_AGGREGATE and bleu.n == 4 and bleu.errors == 2
    assert report.summary["rougeL_f1"].aggregate == "mean"
    assert report.samples[2].errors["bleu"].text() == "field 'references' is missing or empty"
    assert report.samples[2].errors["bleu"].kind == "missing_input"
    assert report.signatures["bleu"].render().startswith("bleu|corpus:[nrefs:var|")
    assert "corpus BLEU (per-sample: sentence BLEU)" in render_markdown(report)


def _texts(errors: dict[str, Failure]) -> dict[str, str]:
    return {metric: failure.text() for metric, failure in errors.items()}


@pytest.mark.parametrize(
    ("ref_counts", "nrefs"),
    [
        ([1, 1, 1, 1, 1], "nrefs:1|"),
        ([2, 2, 1, 1, 1], "nrefs:var|"),
        ([1, 2, 1, 2, 2], "nrefs:var|"),
    ],
)
def test_bleu_in_chunks_equals_one_call(
    monkeypatch: pytest.MonkeyPatch, ref_counts: list[int], nrefs: str
) -> None:
    """Statistics are computed a batch at a time (their arrays bounded); the rows and the
    nrefs of the signature are those of one call over everything, even when every chunk on
    its own has one reference count (the second case's chunks: [2, 2], [1, 1], [1])."""
    from rag_judge.metrics.sacrebleu import bleu

    rng = random.Random(7)
    words = ["the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "far", "away", "."]
    hyps = [" ".join(rng.choices(words, k=8)) for _ in ref_counts]
    refs = [[" ".join(rng.choices(words, k=9)) for _ in range(k)] for k in ref_counts]
    whole = bleu_statistics(hyps, refs)
    monkeypatch.setattr(bleu, "BLEU_BATCH", 2)
    chunked = bleu_statistics(hyps, refs)
    np.testing.assert_array_equal(chunked.rows, whole.rows)
    np.testing.assert_array_equal(chunked.sentence, whole.sentence)
    assert chunked.corpus_signature == whole.corpus_signature
    assert whole.corpus_signature.startswith(nrefs)
