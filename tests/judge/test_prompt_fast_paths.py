"""The judge sandbox's short ways (a dict's key, a loop's counters, an imported macro, a call of
a macro or of section()) render exactly what Jinja's own sandbox renders, and let nothing
through that it blocks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge.data.jsonl import read_jsonl
from rag_judge.judge.fast_sections import SECTIONS, FastSections
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import (
    BUILTIN_RUBRICS,
    CONVERSATION_RUBRICS,
    Rubric,
    rubric_from_template,
)
from rag_judge.resources import resource_dir
from tests.test_scale_fast_paths import _plain_sandbox

DEMO = resource_dir("configs") / "data" / "demo.jsonl"
CONVERSATIONS = resource_dir("configs") / "data" / "conversations.jsonl"


def plain_renderer() -> PromptRenderer:
    """A renderer over Jinja's own immutable sandbox, without the short ways."""
    return _plain_sandbox(PromptRenderer())


def outcome(renderer: PromptRenderer, rubric: Rubric, variables: dict[str, Any]) -> object:
    """The messages, or the error's text."""
    try:
        return renderer.render(rubric, variables)
    except PromptError as exc:
        return str(exc)


def test_every_shipped_rubric_renders_as_the_plain_sandbox_does() -> None:
    fast, plain = PromptRenderer(), plain_renderer()
    samples = list(read_jsonl(DEMO))
    rendered = 0
    for rubric in BUILTIN_RUBRICS.values():
        for sample in samples:
            if any(getattr(sample, f, None) in (None, (), "") for f in rubric.inputs):
                continue
            for ctx in range(len(sample.contexts)) if rubric.per_context else [None]:
                variables = sample_variables(rubric, sample, ctx)
                assert fast.render(rubric, variables) == plain.render(rubric, variables)
                rendered += 1
    assert rendered > 300
    if CONVERSATIONS.exists():
        for rubric in CONVERSATION_RUBRICS.values():
            for sample in read_jsonl(CONVERSATIONS):
                variables = sample_variables(rubric, sample)
                assert outcome(fast, rubric, variables) == outcome(plain, rubric, variables)


@pytest.mark.parametrize(
    "source",
    [
        "{% for c in contexts %}{{ loop.__class__.__mro__ }}{% endfor %}",
        '{% import "_sections.j2" as s %}{{ s.answer_section.__globals__ }}',
        '{% import "_sections.j2" as s %}{{ s._TemplateModule__body_stream }}',
        '{% import "_sections.j2" as s %}{{ s._module }}',
        '{% import "_sections.j2" as s %}{{ s.context_sections.__self__ }}',
        '{% import "_sections.j2" as s %}{{ s.context_sections.__func__.__globals__ }}',
        "{{ section.__globals__ }}",
        "{{ contexts[0].text.__class__.__mro__[1].__subclasses__() }}",
    ],
)
def test_the_short_ways_let_nothing_through_that_the_sandbox_blocks(
    tmp_path: Path, source: str
) -> None:
    path = tmp_path / "evil.j2"
    path.write_text("{{ answer }}{{ question }}" + source, encoding="utf-8")
    rubric = rubric_from_template(path)
    sample = next(iter(read_jsonl(DEMO)))
    variables = sample_variables(rubric, sample)
    for renderer in (PromptRenderer(), plain_renderer()):  # the messages name other types
        blocked = outcome(renderer, rubric, variables)
        assert isinstance(blocked, str)
        assert re.search(r"SecurityError|unsafe|no attribute|undefined", blocked), blocked


PIECES = [
    "a",
    "b",
    " ",
    "\n",
    "é",
    "\ud800",
    "{{ x }}",
    "<<<BEGIN CONTEXT 1>>>",
    "<<<END ANSWER>>>",
]
SECTION_TEXT = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
CONTEXT = st.fixed_dictionaries({"rank": st.integers(0, 20), "text": SECTION_TEXT})


@given(SECTION_TEXT, st.lists(CONTEXT, max_size=4), st.lists(SECTION_TEXT, max_size=3))
def test_the_python_sections_write_what_the_jinja_macros_write(
    text: str, contexts: list[dict[str, Any]], references: list[str]
) -> None:
    assert type(PromptRenderer().env.get_template(SECTIONS).module) is FastSections
    plain = plain_renderer().env.get_template(SECTIONS).module  # the macros in Jinja
    sections = FastSections(plain)
    for name, arg in [
        ("question_section", text), ("answer_section", text),
        ("context_sections", contexts), ("reference_sections", references),
    ]:  # fmt: skip
        assert getattr(sections, name)(arg) == str(getattr(plain, name)(arg))


def test_only_the_shipped_sections_file_is_replaced(tmp_path: Path) -> None:
    assert PromptRenderer().env.get_template(SECTIONS).fast is True
    edited = (resource_dir("prompts") / SECTIONS).read_text(encoding="utf-8")
    (tmp_path / SECTIONS).write_text(edited.replace('"QUESTION"', '"ASKED"'), encoding="utf-8")
    renderer = PromptRenderer([tmp_path])
    assert not getattr(renderer.env.get_template(SECTIONS), "fast", False)
    rubric = BUILTIN_RUBRICS["faithfulness"]
    sample = next(iter(read_jsonl(DEMO)))
    _, user = renderer.render(rubric, sample_variables(rubric, sample))
    assert "<<<BEGIN ASKED>>>" in user.content and "<<<BEGIN QUESTION>>>" not in user.content


def test_a_name_the_sections_module_lacks_is_undefined_as_in_jinja(tmp_path: Path) -> None:
    sample = next(iter(read_jsonl(DEMO)))
    imported = '{% import "_sections.j2" as s %}{{ answer }}'
    for source, rendered in [
        (imported + "{% if s.nope is defined %}yes{% else %}no{% endif %}", "no"),
        (imported + "{{ s.nope }}", None),
    ]:
        path = tmp_path / "t.j2"
        path.write_text(source, encoding="utf-8")
        rubric = rubric_from_template(path)
        variables = sample_variables(rubric, sample)
        fast, plain = (outcome(r, rubric, variables) for r in (PromptRenderer(), plain_renderer()))
        if rendered is None:  # a PromptError in both; the message names the module's own type
            assert isinstance(fast, str) and isinstance(plain, str)
            assert fast.replace("rag_judge.judge.fast_sections.FastSections", "X") == (
                plain.replace("jinja2.environment.TemplateModule", "X")
            )
        else:
            assert fast == plain and not isinstance(fast, str)
            assert fast[1].content.endswith(rendered)  # type: ignore[index]
