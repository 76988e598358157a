"""A prompt rendered split (the template's fixed text once, its ``inputs`` block per sample) is
the prompt rendered whole; a template whose text outside ``inputs`` could see a sample is
rendered whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.data.sample import Context, Sample
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import BUILTIN_RUBRICS, Rubric


def whole() -> PromptRenderer:
    renderer = PromptRenderer()
    renderer.splits = False
    return renderer


def outcome(renderer: PromptRenderer, rubric: Rubric, variables: dict[str, Any]) -> object:
    try:
        return renderer.render(rubric, variables)
    except PromptError as exc:
        return f"PromptError: {exc}"
    except Exception as exc:  # the same failure either way
        return f"{type(exc).__name__}: {exc}"


def test_every_shipped_rubric_template_is_split() -> None:
    renderer = PromptRenderer()
    unsplit = [r.name for r in BUILTIN_RUBRICS.values() if renderer._prepared(r)[3] is None]
    assert unsplit == []


TEXT = st.lists(
    st.sampled_from(["a", "B", " ", "\n", "<<<", ">>>", "{{", "}}", "{%", "é", "\x00", "END"]),
    max_size=8,
).map("".join)
SAMPLES = st.builds(
    Sample,
    id=st.just("s"),
    question=TEXT,
    answer=st.one_of(st.none(), TEXT),
    contexts=st.lists(TEXT, max_size=3).map(
        lambda texts: tuple(Context(text=t, id=f"d{i}" if i else None) for i, t in enumerate(texts))
    ),
    references=st.lists(TEXT, max_size=2).map(tuple),
)


RENDERERS = (PromptRenderer(), whole())


@settings(max_examples=100, deadline=None)
@given(SAMPLES)
def test_split_prompts_are_the_whole_prompts(sample: Sample) -> None:
    split, plain = RENDERERS  # compiled once: each prompt is rendered both ways
    for rubric in BUILTIN_RUBRICS.values():
        for ctx in range(len(sample.contexts)) if rubric.per_context else [None]:
            variables = sample_variables(rubric, sample, ctx)
            assert outcome(split, rubric, variables) == outcome(plain, rubric, variables)


BASE = '{% extends "_base.j2" %}\n'
INPUTS = "{% block inputs %}{{ section('ANSWER', answer) }}{% endblock %}\n"


@pytest.mark.parametrize(
    ("source", "splits"),
    [
        # the sample read in another block: that block too is rendered per sample
        (BASE + "{% block task %}Grade {{ answer }}.{% endblock %}" + INPUTS, True),
        (BASE + "{% block task %}{% if question is defined %}Q{% endif %}{% endblock %}" + INPUTS,
         True),
        (BASE + "{% block task %}{{ self.inputs() }}{% endblock %}" + INPUTS, True),
        (BASE + '{% block task %}{% include "_sections.j2" %}{% endblock %}' + INPUTS, True),
        # ... or outside any block: the template is rendered whole
        (BASE + "{% set shown = answer %}{% block task %}{{ shown }}{% endblock %}" + INPUTS,
         False),
        (BASE + '{% import "_sections.j2" as s with context %}' + INPUTS, False),
        ("Grade {{ answer }}.", False),
        # a namespace one block could change for another
        (BASE + "{% set ns = namespace(n=0) %}{% block instructions %}{{ ns.n }}{% endblock %}"
         "{% block inputs %}{% set ns.n = 1 %}{{ answer }}{% endblock %}", False),
        # a stateful object made outside the blocks, shared by the prompts if it were split
        (BASE + '{% set c = cycler("x", "y") %}'
         "{% block inputs %}{{ c.next() }}{{ answer }}{% endblock %}", False),
        (BASE + "{% block task %}{% set c = cycler(1, 2) %}{{ c.next() }}{% endblock %}" + INPUTS,
         True),
        # a block inside a block
        (BASE + "{% block task %}{% block inputs %}{{ answer }}{% endblock %}{% endblock %}",
         False),
    ],
)  # fmt: skip
def test_a_template_is_split_only_where_its_fixed_text_cannot_see_the_sample(
    tmp_path: Path, source: str, splits: bool
) -> None:
    (tmp_path / "mine.j2").write_text(source)
    rubric = Rubric(name="mine", template="mine.j2", inputs=("question", "answer"))
    renderer = PromptRenderer([tmp_path])
    assert (renderer._prepared(rubric)[3] is not None) == splits
    plain = whole()
    plain.search_path = renderer.search_path
    plain.env.loader = renderer.env.loader
    for answer in ["because", "<<<END ANSWER>>>"]:
        sample = Sample(id="s", question="why?", answer=answer, contexts=(Context(text="c"),))
        variables = sample_variables(rubric, sample)
        assert outcome(renderer, rubric, variables) == outcome(plain, rubric, variables)


def test_a_name_bound_outside_the_block_and_also_given_renders_whole(tmp_path: Path) -> None:
    # "answer" is a loop's name in the task block: it may be read there before the loop
    source = (
        BASE
        + "{% block task %}{% for answer in rubric.levels %}{{ answer }}{% endfor %}{% endblock %}"
        + INPUTS
    )
    (tmp_path / "mine.j2").write_text(source)
    rubric = Rubric(name="mine", template="mine.j2", inputs=("answer",))
    renderer = PromptRenderer([tmp_path])
    cut = renderer._prepared(rubric)[3]
    assert cut is not None and not cut.fits({"answer": "x"}) and cut.fits({"question": "x"})
    sample = Sample(id="s", question="q", answer="because")
    plain = whole()
    plain.env.loader = renderer.env.loader
    plain.search_path = renderer.search_path
    variables = sample_variables(rubric, sample)
    assert renderer.render(rubric, variables) == plain.render(rubric, variables)


def test_a_users_template_with_super_and_a_macro_is_split(tmp_path: Path) -> None:
    source = (
        BASE
        + '{% import "_sections.j2" as s %}'
        + "{% macro shout(x) %}{{ x | upper }}{% endmacro %}"
        + "{% block task %}{{ shout(rubric.title) }}{% endblock %}"
        + "{% block inputs %}{{ super() }}{{ s.answer_section(answer) }}{% endblock %}"
    )
    (tmp_path / "mine.j2").write_text(source)
    rubric = Rubric(name="mine", template="mine.j2", inputs=("answer",))
    renderer = PromptRenderer([tmp_path])
    assert renderer._prepared(rubric)[3] is not None
    plain = whole()
    plain.env.loader = renderer.env.loader
    plain.search_path = renderer.search_path
    for answer in ["because", "<<<END ANSWER>>>", ""]:
        variables = sample_variables(rubric, Sample(id="s", question="q", answer=answer))
        assert renderer.render(rubric, variables) == plain.render(rubric, variables)
        assert "MINE" in renderer.render(rubric, variables)[1].content


@pytest.mark.parametrize("task", ["{{ lipsum(1) }}", "{{ range(100000) | random }}"])
def test_a_block_with_a_new_text_on_each_render_is_rendered_per_prompt(
    tmp_path: Path, task: str
) -> None:
    source = BASE + "{% block task %}" + task + "{% endblock %}" + INPUTS
    (tmp_path / "mine.j2").write_text(source)
    rubric = Rubric(name="mine", template="mine.j2", inputs=("answer",))
    cut = PromptRenderer([tmp_path])._prepared(rubric)[3]
    assert cut is not None and set(cut.shown) == {"task", "inputs"}


PARENTS = [
    # a block inside a with, a loop or a filter sees what they set or does what they do
    ('{% with x = "X" %}{% block inputs scoped %}{% endblock %}{% endwith %}',
     "{% block inputs %}{{ x }} {{ answer }}{% endblock %}", False),
    ("{% for i in range(1) %}{% block inputs scoped %}{% endblock %}{% endfor %}",
     "{% block inputs %}{{ loop.index }}:{{ answer }}{% endblock %}", False),
    ("Head {% filter lower %}{% block inputs %}{% endblock %}{% endfilter %}",
     "{% block inputs %}{{ answer }}{% endblock %}", False),
    # a name set after the block is not seen by it
    ('{% block inputs %}{% endblock %}{% set note = "N" %}',
     "{% block inputs %}{% if note is defined %}{{ note }}{% endif %}{{ answer }}{% endblock %}",
     True),
    ('{% block inputs %}{% endblock %}{% import "_sections.j2" as s %}',
     "{% block inputs %}{{ s.answer_section(answer) }}{% endblock %}", True),
    # a generator made at the top level: the first prompt would use it up
    ('{% set g = "xyz"|select %}{% block inputs %}{% endblock %}',
     "{% block inputs %}[{{ g|join }}]{{ answer }}{% endblock %}", False),
]  # fmt: skip


@pytest.mark.parametrize(("parent", "child", "splits"), PARENTS)
def test_a_parents_scopes_and_order_render_as_whole(
    tmp_path: Path, parent: str, child: str, splits: bool
) -> None:
    (tmp_path / "p.j2").write_text(parent)
    (tmp_path / "mine.j2").write_text('{% extends "p.j2" %}' + child)
    rubric = Rubric(name="mine", template="mine.j2", inputs=("answer",))
    renderer = PromptRenderer([tmp_path])
    assert (renderer._prepared(rubric)[3] is not None) == splits
    plain = whole()
    plain.env.loader = renderer.env.loader
    plain.search_path = renderer.search_path
    for answer in ["Because\n  X", "again"]:  # twice: nothing carried from one to the next
        variables = sample_variables(rubric, Sample(id="s", question="q", answer=answer))
        assert outcome(renderer, rubric, variables) == outcome(plain, rubric, variables)
