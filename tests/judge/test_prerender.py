"""A judge's prompts rendered in another process (``judge.prerender``): the same messages and
the same template errors as rendering them here, across pickling, and rendered here for any
sample the other process did not render."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from rag_judge.data.jsonl import read_jsonl
from rag_judge.data.sample import Sample
from rag_judge.judge.prerender import PromptWork, Rendered
from rag_judge.judge.prompts import PromptError, PromptRenderer, compiled, sample_variables
from rag_judge.judge.rubrics import BUILTIN_RUBRICS, CONVERSATION_RUBRICS, Rubric, missing_input
from rag_judge.resources import resource_dir

DEMO = resource_dir("configs") / "data" / "demo.jsonl"
CONVERSATIONS = resource_dir("configs") / "data" / "conversations.jsonl"


def outcome(render, rubric, sample, ctx):  # type: ignore[no-untyped-def]
    try:
        return render(rubric, sample, ctx)
    except PromptError as exc:
        return str(exc)


def test_prompts_rendered_elsewhere_are_the_ones_rendered_here(tmp_path: Path) -> None:
    (tmp_path / "broken.j2").write_text("{{ question }} {{ no_such_input }}", encoding="utf-8")
    broken = Rubric(name="broken", template="broken.j2", inputs=["question"])
    rubrics = [*BUILTIN_RUBRICS.values(), *CONVERSATION_RUBRICS.values(), broken]
    renderer = compiled(rubrics, [tmp_path])
    rendered = Rendered(renderer)
    work = rendered.work(rubrics)
    assert work is not None
    there = pickle.loads(pickle.dumps(work))  # as the side process gets it
    samples = [*read_jsonl(DEMO), *read_jsonl(CONVERSATIONS)]
    rendered.take(samples, there(samples))
    checked = errors = 0

    def local(r: Rubric, s: Sample, c: int | None) -> object:
        return renderer.render(r, sample_variables(r, s, c))

    for sample in samples:
        for rubric in rubrics:
            if missing_input(rubric, sample):
                continue
            for ctx in range(len(sample.contexts)) if rubric.per_context else [None]:
                here = outcome(
                    lambda r, s, c: renderer.render(r, sample_variables(r, s, c)),
                    rubric,
                    sample,
                    ctx,
                )
                assert outcome(rendered.render, rubric, sample, ctx) == here
                checked += 1
                errors += isinstance(here, str)
    assert checked > 400
    assert errors == sum(not missing_input(broken, s) for s in samples) > 0  # broken's errors


def test_a_sample_not_rendered_elsewhere_is_rendered_here() -> None:
    rubrics = [BUILTIN_RUBRICS["faithfulness"]]
    renderer = compiled(rubrics)
    rendered = Rendered(renderer)
    samples = list(read_jsonl(DEMO))[:3]
    done = PromptWork(rubrics, ())(samples)
    fake = [{"faithfulness": [(("system", "S"), ("user", "U"))]} for _ in samples]
    rendered.take(samples, fake)
    assert [m.content for m in rendered.render(rubrics[0], samples[0], None)] == ["S", "U"]
    twin = samples[0].model_copy()  # equal, but not the chunk's object: rendered here
    assert rendered.render(rubrics[0], twin, None) == renderer.render(
        rubrics[0], sample_variables(rubrics[0], twin)
    )
    rendered.take(samples, done[:2])  # not this chunk's: every prompt rendered here
    assert rendered.render(rubrics[0], samples[0], None)[1].content != "U"
    rendered.take(samples, None)
    assert rendered.render(rubrics[0], samples[2], None) == renderer.render(
        rubrics[0], sample_variables(rubrics[0], samples[2])
    )


def test_a_renderer_of_another_class_renders_here() -> None:
    class Mine(PromptRenderer):
        pass

    assert Rendered(Mine()).work([BUILTIN_RUBRICS["faithfulness"]]) is None
    assert Rendered(PromptRenderer()).work([]) is not None


@pytest.mark.parametrize("dirs", [(), ("/tmp/nowhere",)])
def test_the_work_pickles_as_its_rubrics_and_folders(dirs: tuple[str, ...]) -> None:
    work = PromptWork([BUILTIN_RUBRICS["correctness"]], [Path(d) for d in dirs])
    work(list(read_jsonl(DEMO))[:1])  # compiles its renderer
    state = pickle.loads(pickle.dumps(work)).__getstate__()
    assert state == {"rubrics": work.rubrics, "template_dirs": work.template_dirs}
