"""Rubric files with mistakes: each error names file, line, rubric and field in YAML's words
(lists and mappings, legal keys and values), never pydantic's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_judge.errors import ConfigError
from rag_judge.judge.rubrics import load_rubrics, rubric_from_mapping
from tests import assert_plain as plain

GOOD = """\
name: tone
inputs: [answer]
criteria: polite
levels:
  1: a
  2: b
  3: c
  4: d
  5: e
"""

# (file text, the error after "file:", one line per problem)
BAD_RUBRICS = [
    (
        GOOD + "critera: x\n",
        "10: rubric 'tone': unknown key 'critera' (did you mean 'criteria'?); legal keys: name, "
        "description, inputs, criteria, levels, examples, template, per_context",
    ),
    (
        GOOD.replace("[answer]", "answer"),
        "2: rubric 'tone': field 'inputs': expected a list of inputs among question, answer, "
        "contexts, references, got the string 'answer'",
    ),
    (
        GOOD.replace("[answer]", "[answr]"),
        "2: rubric 'tone': field 'inputs[0]': 'answr' is not a legal value (did you mean "
        "'answer'?); legal values: question, answer, contexts, references",
    ),
    (
        "name: tone\ninputs: [answer]\ncriteria: polite\nlevels: [a, b, c, d, e]\n",
        "4: rubric 'tone': field 'levels': expected a mapping of each level 1, 2, 3, 4, 5 to its "
        "description, got a list",
    ),
    (
        GOOD.replace("  1: a", "  one: a"),
        "5: rubric 'tone': field 'levels': key 'one' is not a level (1, 2, 3, 4 or 5)",
    ),
    (
        GOOD.replace("  1: a", "  1: [a]"),
        "5: rubric 'tone': field 'levels.1': expected a string (the level's description), got a "
        "list",
    ),
    (
        GOOD.replace("name: tone", "name: Tone Score"),
        "1: rubric 'Tone Score': field 'name': expected a name of lowercase letters, digits and _ "
        "that starts with a letter, got the string 'Tone Score'",
    ),
    (
        GOOD.replace("name: tone\n", ""),
        "1: field 'name': required but missing (expected a name of lowercase letters, digits and "
        "_ that starts with a letter)",
    ),
    (
        GOOD + "per_context: maybe\n",
        "10: rubric 'tone': field 'per_context': expected true or false, got the string 'maybe'",
    ),
    (
        GOOD + "examples:\n  - answer: x\n    score: 9\n    reason: ''\n    colr: 1\n",
        "12: rubric 'tone': field 'examples[0].score': must be at most 5, got 9\n"
        "{path}:13: rubric 'tone': field 'examples[0].reason': must not be empty\n"
        "{path}:14: rubric 'tone': field 'examples[0]': unknown key 'colr' (did you mean "
        "'score'?); legal keys: question, answer, contexts, references, score, reason",
    ),
    (
        GOOD.replace("[answer]", "[answer, contexts]")
        + "examples:\n  - answer: x\n    contexts: one\n    score: 3\n    reason: r\n",
        "12: rubric 'tone': field 'examples[0].contexts': expected a list of strings, got the "
        "string 'one'",
    ),
    (
        GOOD + "examples: {answer: x}\n",
        "10: rubric 'tone': field 'examples': expected a list of examples (mappings with "
        "question, answer, contexts, references, score, reason), got a mapping",
    ),
    (
        GOOD + "template: 5\ndescription: {a: 1}\n",
        "11: rubric 'tone': field 'description': expected a string, got a mapping\n"
        "{path}:10: rubric 'tone': field 'template': expected a string (a template name or a .j2 "
        "file), got the number 5",
    ),
    (
        "rubrics:\n  - name: a\n    criteria: c\n    levels: {1: a, 2: b, 3: c, 4: d, 5: e}\n"
        "  - name: b\n    critera: c\n",
        "6: rubric 'b': unknown key 'critera' (did you mean 'criteria'?); legal keys: name, "
        "description, inputs, criteria, levels, examples, template, per_context",
    ),
    (
        "- name: a\n  criteria: c\n  levels: {1: a, 2: b, 3: c, 4: d, 5: e}\n- just a string\n",
        "4: [1]: expected a rubric (a mapping with name, inputs, criteria, levels), got the "
        "string 'just a string'",
    ),
    (
        "hello\n",
        "1: expected a rubric (a mapping with name, inputs, criteria, levels), got the string "
        "'hello'",
    ),
    (
        "",
        " the file is empty; a rubric file holds a mapping with name, inputs, criteria, levels, "
        "or a list",
    ),
    (GOOD + "levels: [\n", "11: invalid YAML: expected the node content, but found '<stream end>'"),
]


def assert_plain(message: str) -> None:
    plain(message, "Rubric", "Example")


@pytest.mark.parametrize(("text", "expected"), BAD_RUBRICS)
def test_rubric_file_errors_speak_yaml(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_rubrics(path)
    assert str(err.value) == f"{path}:" + expected.format(path=path)
    assert_plain(str(err.value).replace("'<stream end>'", ""))  # PyYAML's words, not pydantic's


def test_an_inline_rubric_names_its_place_on_one_line() -> None:
    item = yaml.safe_load(GOOD.replace("[answer]", "answer") + "critera: x\n")
    with pytest.raises(ConfigError) as err:
        rubric_from_mapping(item, "rubrics[0]", base_dir=None)
    assert str(err.value) == (
        "rubrics[0]: rubric 'tone': field 'inputs': expected a list of inputs among question, "
        "answer, contexts, references, got the string 'answer'; unknown key 'critera' (did you "
        "mean 'criteria'?); legal keys: name, description, inputs, criteria, levels, examples, "
        "template, per_context"
    )


WRONG_VALUES: list[Any] = ["x", "", 7, 2.5, True, None, [], ["x"], [1], [[1]], {}, {"a": 1}]
PLACES = [
    ("name",),
    ("description",),
    ("inputs",),
    ("inputs", 0),
    ("criteria",),
    ("levels",),
    ("levels", 1),
    ("examples",),
    ("examples", 0),
    ("examples", 0, "question"),
    ("examples", 0, "contexts"),
    ("examples", 0, "score"),
    ("examples", 0, "reason"),
    ("examples", 0, "scor"),
    ("template",),
    ("per_context",),
    ("colour",),
]


def test_no_message_about_any_bad_value_leaks_pydantic(tmp_path: Path) -> None:
    messages = []
    path = tmp_path / "r.yaml"
    for place in PLACES:
        for value in WRONG_VALUES:
            rubric: dict[str, Any] = yaml.safe_load(GOOD)
            rubric["examples"] = [{"answer": "a", "score": 3, "reason": "r"}]
            node: Any = rubric
            for part in place[:-1]:
                node = node[part]
            node[place[-1]] = value
            path.write_text(yaml.safe_dump(rubric), encoding="utf-8")
            try:
                load_rubrics(path)
            except ConfigError as exc:
                messages.append(str(exc))
    assert len(messages) > 100
    for message in messages:
        assert_plain(message)
        for line in message.splitlines():
            assert line.startswith(f"{path}:"), line
            assert line[len(f"{path}:")].isdigit(), line  # file:line
