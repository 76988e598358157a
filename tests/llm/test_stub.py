"""The stub judge's rule-based heuristic: each rubric shape compares the right sections."""

from __future__ import annotations

import json

import pytest

from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.providers.stub import lexical_support


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
