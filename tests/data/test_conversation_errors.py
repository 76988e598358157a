"""Errors in conversations name file:line, the turn, the step and the field, in the words of the
row's layout (rag-judge, ragas' MultiTurnSample, DeepEval's ConversationalTestCase)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_judge.data.readers import load_dataset
from rag_judge.errors import DataError
from tests import assert_plain
from tests.data.test_conversation import write_lines

BAD = [
    (
        {"id": "a", "turns": [{"question": "q"}, {"steps": [{"contexts": [{"score": "high"}]}]}]},
        "field 'turns[1].steps[0].contexts[0].score': expected a number (the retrieval score), "
        "got the string 'high'",
    ),
    (
        {"id": "a", "turns": [{"steps": [{"tool": "calc", "arguments": ["x"]}]}]},
        "field 'turns[0].steps[0].arguments': expected an object of argument name to value, got "
        "a list",
    ),
    (
        {"id": "a", "turns": [{"steps": [{"tool": ""}, {"type": "tool", "contexts": []}]}]},
        "field 'turns[0].steps[0].tool': must not be empty; field 'turns[0].steps[1].tool': "
        "required but missing (expected a string); field 'turns[0].steps[1]': unknown key "
        "'contexts'; legal keys: type, tool, arguments, result",
    ),
    (
        {"id": "a", "turns": [{"steps": ["text", {"kind": "x"}]}]},
        "field 'turns[0].steps[0]': expected a retrieval step (an object with keys query, "
        "contexts) or a tool call (an object with keys tool, arguments, result); a key 'type' of "
        "'retrieval' or 'tool' may say which; field 'turns[0].steps[1]': expected a retrieval",
    ),
    (
        {"id": "a", "turns": [{"steps": [{"contexts": [{"id": "d1"}, {"id": "d1"}]}]}]},
        "field 'turns[0].steps[0]': doc id 'd1' appears twice in the ranking of this step",
    ),
    (
        {"id": "a", "turns": [{"relevance": {"d1": "2"}, "qrels": [{"doc_id": "d"}]}]},
        "field 'turns[0].relevance.d1': expected a number (the doc's relevance grade), got the "
        "string '2'; field 'turns[0].qrels[0].relevance': required but missing",
    ),
    ({"id": "a", "turns": []}, "field 'turns': needs at least 1 item, got 0"),
    (
        {"id": "a", "question": "q", "answer": "x", "turns": [{"question": "q"}]},
        "'question', 'answer' beside 'turns': a conversation keeps each turn's question, "
        "contexts, answer, references, relevance, qrels in that turn",
    ),
    (
        {"id": "a", "turns": [{}, {}], "expected_tools": [{"turn": 2, "calls": ["search"]}]},
        "expected_tools[0] is for turn 2, past the last turn, turn 1 (turns count from 0)",
    ),
    (
        {"id": "a", "expected_tools": [{"calls": ["search"]}, {"turn": 0, "calls": []}]},
        "expected_tools[1]: turn 0 already has its expected tools",
    ),
    (
        {"id": "a", "expected_tools": [{"calls": ["search", 3], "order": "in-order"}]},
        "field 'expected_tools[0].calls[1]': expected a tool name or an object with keys tool, "
        "arguments, got the number 3; field 'expected_tools[0].order': 'in-order' is not a "
        "legal value (did you mean 'in_order'?); legal values: strict, in_order, unordered, "
        "subset, superset",
    ),
    (
        {"id": "a", "turns": [{"question": "q"}], "gaol": "x"},
        "unknown key 'gaol' (did you mean 'goal'?); legal keys: id, question",
    ),
]


@pytest.mark.parametrize(("row", "message"), BAD)
def test_errors_name_the_line_turn_step_and_field(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    path = write_lines(tmp_path / "d.jsonl", {"id": "ok"}, row)
    with pytest.raises(DataError) as err:
        load_dataset(path)
    assert str(err.value).startswith(f"{path}:2: {message}")
    assert_plain(str(err.value), "Sample", "Turn", "RetrievalStep", "ToolStep", "ExpectedTools")


def _ragas(*messages: Any, **more: Any) -> dict[str, Any]:
    return {"user_input": list(messages), **more}


HUMAN = {"type": "human", "content": "q"}
BAD_OTHER_LAYOUTS = [
    (_ragas(HUMAN, {"type": "bot", "content": "x"}), "field 'user_input[1].type': expected one "
     "of human, ai, tool, got the string 'bot'"),
    (_ragas(HUMAN, {"type": "ai", "content": 3}), "field 'user_input[1].content': expected a "
     "string, got the number 3"),
    (_ragas(HUMAN, {"type": "tool", "content": "r"}), "field 'user_input[1]': a tool message "
     "answers a tool call of the ai message before it, and no call is left unanswered"),
    (_ragas(HUMAN, {"type": "ai", "content": "", "tool_calls": [{"name": "f", "arg": {}}]}),
     "field 'user_input[1].tool_calls[0]': unknown key 'arg' (did you mean 'args'?); legal "
     "keys: name, args"),
    (_ragas(HUMAN, {"type": "ai", "content": "", "tool_calls": [{"name": ""}]}),
     "field 'turns[0].steps[0].tool' (from user_input[1].tool_calls[0]): must not be empty"),
    (_ragas(HUMAN, {"type": "ai", "content": "a", "metadata": {"retrieved_contexts": ["x"],
     "retrieved_context_ids": ["d1", "d2"]}}), "field 'user_input[1].metadata."
     "retrieved_context_ids': 2 ids for 1 retrieved_contexts"),
    (_ragas(HUMAN, response="a"), "field 'response': belongs to a single-turn sample"),
    ({"user_input": "q", "reference_tool_calls": []}, "field 'reference_tool_calls': belongs to "
     "a multi-turn sample, whose 'user_input' is a list of messages"),
    ({"turns": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]},
     "field 'turns[1].role': expected one of user, assistant, got the string 'bot'"),
    ({"turns": [{"role": "user", "content": "q", "retrieval_context": ["x"]}]},
     "field 'turns[0].retrieval_context': only an assistant turn has retrieval_context"),
    ({"turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
     "tools_called": [{"name": "f", "input_parameters": [1]}]}]},
     "field 'turns[1].tools_called[0].input_parameters': expected an object, got a list"),
    ({"turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
     "retrieval_context": [{"id": "d1"}, {"id": "d1"}]}]}, "field 'turns[0].steps[0]' (from "
     "turns[1].retrieval_context): doc id 'd1' appears twice in the ranking of this step"),
    ({"scenario": "s", "turns": [{"role": "user", "content": "q"}], "expected_outcome": ["x"]},
     "field 'goal' (from expected_outcome): expected a string (what the conversation should "
     "achieve), got a list"),
    ({"scenario": "s", "turns": [{"role": "user", "content": "q"}], "question": "q"},
     "the columns mix the rag-judge layout (question) and the deepeval layout"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "message"), BAD_OTHER_LAYOUTS)
def test_ragas_and_deepeval_errors_speak_the_rows_words(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    path = write_lines(tmp_path / "d.jsonl", row)
    with pytest.raises(DataError) as err:
        load_dataset(path)
    assert message in str(err.value)
    assert str(err.value).startswith(f"{path}:1: " if ":1:" in str(err.value) else f"{path}: ")
    assert_plain(str(err.value), "Sample", "Turn")
