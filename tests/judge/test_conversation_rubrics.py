"""Conversation rubrics as data: by name in a config, in a user's YAML file or template, their
validation errors, and the stub's rule for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import (
    BUILTIN_RUBRICS,
    CONVERSATION_RUBRICS,
    ConversationRubric,
    Rubric,
    check_specs,
    load_rubrics,
    resolve_rubrics,
    rubric_from_mapping,
    rubric_from_template,
)
from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.providers.stub import lexical_support, parse_sections

CONVERSATION = Sample.model_validate(
    {"id": "c", "goal": "book a table", "metadata": {"role": "waiter"},
     "turns": [{"question": "A table for two", "answer": "Booked a table for two."}]}
)  # fmt: skip
LEVELS = {i: f"level {i}" for i in range(1, 6)}


def test_conversation_rubrics_resolve_by_name_beside_the_others() -> None:
    check_specs(["faithfulness", "goal_completion"])
    found = resolve_rubrics(["knowledge_retention", "fluency"])
    assert [type(r) for r in found] == [ConversationRubric, Rubric]
    assert found[0] is CONVERSATION_RUBRICS["knowledge_retention"]
    with pytest.raises(ConfigError, match="conversation rubrics: knowledge_retention, "):
        check_specs(["goal_completeness"])
    judge = JudgeEvaluator(rubrics=["goal_completion", "role_adherence"], cache=None)
    assert judge.rubrics == ("goal_completion", "role_adherence")
    # The single-turn table is unchanged: the ten rubrics that score any sample.
    assert len(BUILTIN_RUBRICS) == 10


def test_a_user_conversation_rubric_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: politeness_over_time\ninputs: [turns, role]\ncriteria: Stays polite.\n"
        + "levels:\n"
        + "".join(f"  {i}: level {i}\n" for i in range(1, 6)),
        encoding="utf-8",
    )
    (rubric,) = load_rubrics(path)
    assert isinstance(rubric, ConversationRubric) and rubric.inputs == ("turns", "role")
    # No template of its own: the conversation's generic one shows its brief and its turns.
    assert PromptRenderer().template_name(rubric) == "_conversation.j2"
    user = PromptRenderer().render(rubric, sample_variables(rubric, CONVERSATION))[1].content
    assert set(parse_sections(user)) == {"ROLE", "TURN 1 USER", "TURN 1 ASSISTANT"}
    assert PromptRenderer().template_name(BUILTIN_RUBRICS["fluency"].model_copy(
        update={"name": "plain"})) == "_generic.j2"  # fmt: skip
    custom = tmp_path / "convo.j2"
    custom.write_text(
        '{% extends "_base.j2" %}{% block inputs %}{{ section("ROLE", role) }}\n\n'
        "{{ conversation(turns) }}{% endblock %}",
        encoding="utf-8",
    )
    inline = rubric_from_mapping(
        {"name": "mine", "inputs": ["turns", "role"], "template": str(custom)}, "rubrics[0]", None
    )
    user = PromptRenderer().render(inline, sample_variables(inline, CONVERSATION))[1].content
    assert "<<<BEGIN TURN 1 ASSISTANT>>>\nBooked a table for two.\n" in user
    assert "<<<BEGIN ROLE>>>\nwaiter\n<<<END ROLE>>>" in user


def test_a_template_that_shows_the_turns_is_a_conversation_rubric(tmp_path: Path) -> None:
    path = tmp_path / "goal_check.j2"
    path.write_text(
        "{{ section('GOAL', goal) }}\n{{ conversation(turns) }}\nReply with a score.",
        encoding="utf-8",
    )
    rubric = rubric_from_template(path)
    assert isinstance(rubric, ConversationRubric) and rubric.inputs == ("turns", "goal")
    none = tmp_path / "nothing.j2"
    none.write_text("Grade this: {{ other }}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"uses none of the inputs .*turns, goal, role, topics"):
        rubric_from_template(none)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (["goal"], "needs 'turns' among its inputs"),
        (["turns", "answer"], "'answer' is an input of a single-turn rubric"),
        (
            ["turns", "mood"],
            "legal values: question, answer, contexts, references, turns, goal, role, topics$",
        ),
    ],
)
def test_conversation_rubric_errors(inputs: list[str], message: str) -> None:
    item = {"name": "x", "inputs": inputs, "criteria": "c", "levels": LEVELS}
    with pytest.raises(ConfigError, match=message):
        rubric_from_mapping(item, "rubrics[0]", None)


def test_an_example_cannot_hold_a_conversation() -> None:
    item = {"name": "x", "inputs": ["turns"], "criteria": "c", "levels": LEVELS,
            "examples": [{"score": 3, "reason": "r"}]}  # fmt: skip
    with pytest.raises(ConfigError, match="examples\\[0\\] lacks 'turns'"):
        rubric_from_mapping(item, "rubrics[0]", None)


def test_a_single_turn_rubrics_errors_are_as_they_were() -> None:
    item = {"name": "x", "inputs": ["answr"], "criteria": "c", "levels": LEVELS}
    with pytest.raises(ConfigError) as err:
        rubric_from_mapping(item, "rubrics[0]", None)
    assert "legal values: question, answer, contexts, references" in str(err.value)
    assert "turns" not in str(err.value)


def test_the_conversation_global_rejects_other_values(tmp_path: Path) -> None:
    path = tmp_path / "bad.j2"
    path.write_text("{{ conversation(turns[0].question) }}", encoding="utf-8")
    rubric = rubric_from_template(path)
    with pytest.raises(PromptError, match="conversation\\(\\): expected the turns variable"):
        PromptRenderer().render(rubric, sample_variables(rubric, CONVERSATION))


def _stub(user: str) -> dict[str, object]:
    request = CompletionRequest(messages=(ChatMessage(role="user", content=user),))
    reply = lexical_support()(request)
    assert isinstance(reply, str)
    found: dict[str, object] = json.loads(reply)
    return found


def test_the_stub_scores_a_conversation_by_the_brief_else_the_user() -> None:
    def turn(n: int, role: str, text: str) -> str:
        return f"<<<BEGIN TURN {n} {role}>>>\n{text}\n<<<END TURN {n} {role}>>>\n"

    talk = turn(1, "USER", "table for two tonight") + turn(1, "ASSISTANT", "A table for two.")
    # The user's {table, two, tonight}: table and two are taken up -> 2/3 -> 1 + round(2.67).
    assert _stub(talk)["score"] == 4
    # With a brief, the brief's words count: {book, table} -> table -> 1/2 -> 1 + round(2).
    brief = _stub("<<<BEGIN GOAL>>>\nbook table\n<<<END GOAL>>>\n" + talk)
    assert brief["score"] == 3 and "brief" in str(brief["reason"])
