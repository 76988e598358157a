"""Judge replies → verdicts: the tolerant parser, the 1-5 scale rule, G-Eval weighting."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.judge.asking import reask_message
from rag_judge.judge.preference import PAIRWISE_SHAPE
from rag_judge.judge.verdicts import (
    VERDICT_SCHEMA,
    VERDICT_SHAPE,
    JudgeVerdict,
    Unscored,
    normalise_probs,
    parse_verdict,
    read_completion,
    score_probs_from_logprobs,
    weighted_score,
)
from rag_judge.llm.base import Completion

SCORED = [
    ('{"reason": "all claims supported", "score": 4}', 4, "all claims supported"),
    ('{"score": 2, "reason": "wrong number"}', 2, "wrong number"),
    ('```json\n{"reason": "fine", "score": 3}\n```', 3, "fine"),
    ('```\n{"reason": "fine", "score": 5}\n```', 5, "fine"),
    ('Here is my verdict:\n{"reason": "ok", "score": 5}\nHope this helps!', 5, "ok"),
    ("{'reason': 'single quotes', 'score': 2,}", 2, "single quotes"),
    ('{"reason": "trailing comma", "score": 1,}', 1, "trailing comma"),
    ('{"reason": "string score", "score": "4"}', 4, "string score"),
    ('{"reason": "of five", "score": "4/5"}', 4, "of five"),
    ('{"reason": "integral float", "score": 4.0}', 4, "integral float"),
    ('{"Reasoning": "capitalised keys", "Score": 3}', 3, "capitalised keys"),
    ('{"reason": "braces {inside} the string", "score": 2}', 2, "braces {inside} the string"),
    ("Score: 4", 4, ""),
    ("score = 4/5", 4, ""),
    ("The answer is well supported.\n\n**Score:** 5", 5, "The answer is well supported."),
    ("Score: 2. The answer invents a price.", 2, "The answer invents a price."),
    ("I rate it 3 out of 5... Final score: 3", 3, "I rate it 3 out of 5..."),
    ("A first score 2 seemed right, but final score: 4", 4, "A first score 2 seemed right, but"),
    ("Rating: 1", 1, ""),
    ("4", 4, ""),
    (" 5 \n", 5, ""),
]

UNSCORED = [
    ("", "empty reply"),
    ("   ", "empty reply"),
    ("I cannot judge this.", "no JSON object with a 'score'"),
    ('{"reason": "no score key"}', "no JSON object with a 'score'"),
    ('{"reason": "too high", "score": 7}', "score 7 is outside the 1-5 scale"),
    ('{"reason": "too low", "score": 0}', "score 0 is outside the 1-5 scale"),
    ('{"reason": "negative", "score": -1}', "score -1 is outside the 1-5 scale"),
    ('{"reason": "half", "score": 3.5}', "score 3.5 is not an integer on the 1-5 scale"),
    ('{"reason": "bool", "score": true}', "is not a number"),
    ('{"reason": "null", "score": null}', "is not a number"),
    ('{"reason": "words", "score": "good"}', "is not a number"),
    ('{"reason": "ten-point", "score": "8/10"}', "8/10 is not on the 1-5 scale"),
    ("Score: 9/10", "9/10 is not on the 1-5 scale"),
    ("Score: 7", "score 7 is outside the 1-5 scale"),
    ("Score: 3.5", "score 3.5 is not an integer"),
    ("score 3 here and score 4 there", "ambiguous: the reply gives several scores (3, 4)"),
    ('{"reason": "nan", "score": NaN}', "is not a number"),
]


@pytest.mark.parametrize(("text", "score", "reason"), SCORED)
def test_scored_replies(text: str, score: int, reason: str) -> None:
    verdict = parse_verdict(text)
    assert isinstance(verdict, JudgeVerdict), verdict
    assert (verdict.score, verdict.reason) == (score, reason)


@pytest.mark.parametrize(("text", "why"), UNSCORED)
def test_unscored_replies_say_why_and_keep_the_raw_text(text: str, why: str) -> None:
    verdict = parse_verdict(text)
    assert isinstance(verdict, Unscored), verdict
    assert why in verdict.reason
    assert verdict.raw == text


def test_score_span_points_at_the_score_digit() -> None:
    text = '{"reason": "score: 3 would be harsh", "score": 4}'
    verdict = parse_verdict(text)
    assert isinstance(verdict, JudgeVerdict) and verdict.span is not None
    assert text[verdict.span[0] : verdict.span[1]] == "4"
    assert verdict.span[0] == text.rindex("4")


def test_schema_and_reask_message() -> None:
    assert VERDICT_SCHEMA["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert VERDICT_SCHEMA["required"] == ["reason", "score"]
    msg = reask_message("score 7 is outside the 1-5 scale", VERDICT_SHAPE)
    assert "score 7 is outside the 1-5 scale" in msg and '"score": <integer 1-5>' in msg
    assert msg == (
        "Your previous reply could not be used: score 7 is outside the 1-5 scale. Reply again "
        'with only a JSON object of the form {"reason": "<one or two sentences>", "score": '
        "<integer 1-5>} and nothing else."
    )
    # One message, parameterised by the JSON shape: the pairwise re-ask asks for a winner.
    pairwise = reask_message("empty reply", PAIRWISE_SHAPE)
    assert pairwise.endswith('"winner": "1" | "2" | "tie"} and nothing else.')


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises(text: str) -> None:
    verdict = parse_verdict(text)
    if isinstance(verdict, JudgeVerdict):
        assert 1 <= verdict.score <= 5
    else:
        assert verdict.reason and verdict.raw == text


@settings(max_examples=200, deadline=None)
@given(st.integers(-50, 50), st.text(max_size=40), st.booleans())
def test_json_verdicts_round_trip(score: int, reason: str, fenced: bool) -> None:
    text = json.dumps({"reason": reason, "score": score})
    if fenced:
        text = f"Verdict below.\n```json\n{text}\n```\n"
    verdict = parse_verdict(text)
    if 1 <= score <= 5:
        assert isinstance(verdict, JudgeVerdict)
        assert (verdict.score, verdict.reason) == (score, reason.strip())
    else:
        assert isinstance(verdict, Unscored) and "outside the 1-5 scale" in verdict.reason


# ---- G-Eval weighting -----------------------------------------------------------------------


def test_weighted_score_golden_values() -> None:
    assert weighted_score({4: 0.6, 5: 0.4}) == pytest.approx(4.4)
    assert weighted_score({"1": 0.25, "2": 0.25, "3": 0.25, "4": 0.25}) == pytest.approx(2.5)
    # Renormalised over the five labels; other tokens and variants with spaces are handled.
    assert weighted_score({"4": 0.3, " 5": 0.2, "the": 0.5}) == pytest.approx(4.4)
    assert weighted_score({"4": 0.3, " 4": 0.3, "5": 0.4}) == pytest.approx(4.4)
    assert weighted_score({"x": 1.0}) is None
    assert weighted_score({}) is None
    assert normalise_probs({"5": 0.1, "3": 0.3}) == pytest.approx({3: 0.75, 5: 0.25})


def _tokens(pieces: list[str], at: dict[int, dict[str, float]]) -> list[dict[str, float]]:
    """Top-logprob dicts: the piece itself as the most likely token, or a given distribution."""
    return [
        {k: math.log(p) for k, p in at[i].items()} if i in at else {piece: -0.01}
        for i, piece in enumerate(pieces)
    ]


def test_logprobs_of_the_score_token_not_of_a_digit_in_the_reason() -> None:
    pieces = ['{"', "reason", '":', ' "', "4", " of", " 5", " claims", '",', ' "', "score"]
    pieces += ['":', " ", "4", "}"]
    text = "".join(pieces)
    logprobs = _tokens(pieces, {4: {"4": 0.9, "3": 0.1}, 13: {"4": 0.6, "5": 0.4}})
    verdict = parse_verdict(text)
    assert isinstance(verdict, JudgeVerdict) and verdict.score == 4
    dist = score_probs_from_logprobs(logprobs, text, verdict)
    assert dist == pytest.approx({4: 0.6, 5: 0.4})
    reading = read_completion(Completion([text], token_logprobs=logprobs), "logprobs")
    assert isinstance(reading, JudgeVerdict)
    assert reading.score == pytest.approx(4.4)
    assert reading.verdict == 4


def test_logprobs_fall_back_to_the_last_matching_digit_when_tokens_do_not_rebuild_the_text() -> (
    None
):
    text = "Score: 4"
    logprobs = [*_tokens(["Sc", "ore", ":", " "], {}), {"4": math.log(0.5), "3": math.log(0.5)}]
    logprobs[0] = {"Different": -0.1}  # the argmax tokens no longer spell the reply
    verdict = parse_verdict(text)
    assert isinstance(verdict, JudgeVerdict)
    assert score_probs_from_logprobs(logprobs, text, verdict) == pytest.approx({3: 0.5, 4: 0.5})


def test_without_logprobs_the_stated_score_is_kept_and_marked() -> None:
    reading = read_completion(Completion(['{"reason": "r", "score": 3}']), "logprobs")
    assert isinstance(reading, JudgeVerdict)
    assert reading.score == 3 and reading.details() == {"logprobs_missing": True}
    # Logprobs that do not cover the score token are no better than none.
    other = Completion(['{"reason": "r", "score": 3}'], token_logprobs=[{"x": -0.1}])
    reading = read_completion(other, "logprobs")
    assert isinstance(reading, JudgeVerdict) and reading.details() == {"logprobs_missing": True}
    # Asked for json scoring, nothing is missing.
    plain = read_completion(Completion(['{"reason": "r", "score": 3}']), "json")
    assert isinstance(plain, JudgeVerdict) and plain.details() == {}


def test_distribution_from_a_scoring_client() -> None:
    done = Completion(["4"], score_probs={"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.6, "5": 0.4})
    reading = read_completion(done, "distribution")
    assert isinstance(reading, JudgeVerdict)
    assert reading.score == pytest.approx(4.4)
    assert reading.probs == pytest.approx({"4": 0.6, "5": 0.4})


def test_n_samples_give_mean_and_spread() -> None:
    replies = [json.dumps({"reason": f"r{s}", "score": s}) for s in (3, 4, 5)] + ["garbage"]
    reading = read_completion(Completion(replies), "json")
    assert isinstance(reading, JudgeVerdict)
    assert reading.score == pytest.approx(4.0)
    assert reading.scores == [3, 4, 5]
    assert reading.spread == pytest.approx(math.sqrt(2 / 3))
    assert reading.unscored_choices == 1
    assert isinstance(read_completion(Completion(["no", "nope"]), "json"), Unscored)
