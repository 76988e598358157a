"""The stub judges: the rule-based heuristic for each rubric shape, pairwise verdicts, and the one
prompt-section grammar they read."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest
from rag_judge.llm.providers.stub import (
    always_tie,
    fixed,
    is_pairwise,
    lexical_support,
    pairwise_lexical,
)
from rag_judge.llm.sections import neutralise, parse_sections, section


def verdict(**sections: str) -> dict:
    body = "\n".join(f"<<<BEGIN {k.replace('_', ' ')}>>>\n{v}\n<<<END {k.replace('_', ' ')}>>>"
                     for k, v in sections.items())  # fmt: skip
    reply = lexical_support()(CompletionRequest(messages=(ChatMessage("user", body),)))
    assert isinstance(reply, str)
    return json.loads(reply)


@pytest.mark.parametrize(
    ("sections", "score"),
    [
        # answer vs evidence: 2 of 4 content words supported -> 1 + round(4 * 0.5) = 3
        ({"ANSWER": "pacific ocean largest sahara", "CONTEXT_1": "the pacific ocean"}, 3),
        ({"ANSWER": "pacific ocean", "REFERENCE_1": "Pacific Ocean!"}, 5),
        # answer relevance: question words used by the answer (1 of 2)
        ({"QUESTION": "largest ocean?", "ANSWER": "the ocean"}, 3),
        # context relevance: question words found in one context (0 of 2)
        ({"QUESTION": "largest ocean?", "CONTEXT_1": "deserts are dry"}, 1),
        # answer alone: distinct share of content words (2 of 4)
        ({"ANSWER": "six six six seven"}, 3),
        ({"ANSWER": ""}, 1),
        ({}, 1),
    ],
)
def test_each_rubric_shape(sections: dict[str, str], score: int) -> None:
    assert verdict(**sections)["score"] == score


def test_same_input_same_verdict() -> None:
    a = verdict(QUESTION="Which ocean?", ANSWER="The Pacific", CONTEXT_1="The Pacific Ocean")
    b = verdict(QUESTION="Which ocean?", ANSWER="The Pacific", CONTEXT_1="The Pacific Ocean")
    assert a == b


# ---- one section grammar, one stub for rubric and pairwise requests -----------------------------


def test_sections_are_written_and_read_by_one_module() -> None:
    from rag_judge.judge.prompts import section as template_section

    text = section("ANSWER 1 CONTEXT 2", "x <<<END ANSWER 1 CONTEXT 2>>> y")
    assert template_section("ANSWER 1 CONTEXT 2", "x <<<END ANSWER 1 CONTEXT 2>>> y") == text
    assert parse_sections(text) == {
        "ANSWER 1 CONTEXT 2": neutralise("x <<<END ANSWER 1 CONTEXT 2>>> y")
    }
    assert parse_sections(section("EXAMPLE 1 ANSWER", "") + "\n" + section("ANSWER", "a")) == {
        "EXAMPLE 1 ANSWER": "",
        "ANSWER": "a",
    }
    with pytest.raises(ValueError, match="upper-case letters"):
        section("answer", "x")


WINNER_SCHEMA = {"type": "object", "properties": {"reason": {}, "winner": {}}}


def _pairwise(a1: str, a2: str, *, schema: bool = True, **more: str) -> CompletionRequest:
    parts = [section(k.replace("_", " "), v) for k, v in more.items()]
    parts += [section("ANSWER 1", a1), section("ANSWER 2", a2)]
    return CompletionRequest(
        messages=(ChatMessage("user", "\n".join(parts)),),
        json_schema=WINNER_SCHEMA if schema else None,
    )


def test_the_stub_judges_answer_a_pairwise_request_with_a_winner() -> None:
    request = _pairwise("the atlantic", "the pacific ocean", REFERENCE_1="Pacific Ocean")
    assert is_pairwise(request) and is_pairwise(_pairwise("a", "b", schema=False))
    assert not is_pairwise(CompletionRequest(messages=(ChatMessage("user", "x"),)))
    expected = {"reason": "word overlap 0% (answer 1) vs 100% (answer 2)", "winner": "2"}
    assert json.loads(str(lexical_support()(request))) == expected
    assert json.loads(str(pairwise_lexical()(request))) == expected
    tie = {"reason": "fixed stub verdict", "winner": "tie"}
    assert json.loads(str(fixed(4)(request))) == tie == json.loads(str(always_tie(request)))
    # Without references, each answer's share of the question's words; equal shares tie.
    same = _pairwise("ocean", "the ocean", QUESTION="largest ocean?")
    assert json.loads(str(lexical_support()(same)))["winner"] == "tie"


def test_a_scoring_request_gets_the_label_and_a_one_hot_distribution() -> None:
    request = replace(_pairwise("x", "x y"), score_labels=("1", "2", "tie"))
    reply = lexical_support()(request)
    assert isinstance(reply, Completion) and reply.text == "tie"
    assert reply.score_probs == {"1": 0.0, "2": 0.0, "tie": 1.0}
    rubric = CompletionRequest(
        messages=(ChatMessage("user", "<<<BEGIN ANSWER>>>\nsix six\n<<<END ANSWER>>>"),),
        score_labels=("1", "2", "3", "4", "5"),
    )
    scored = lexical_support()(rubric)
    assert isinstance(scored, Completion) and scored.text == "3"
