"""A judge's prompts rendered in another process: the side process of a ``processes: 2`` run
parses every sample anyway, so it renders each chunk's prompts (:class:`PromptWork`) and the
run takes them (:class:`Rendered`) instead of rendering them itself. Rendering is the same code
over the same templates, so the messages are the same; a sample the other process did not
render is rendered here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_judge.data.sample import Sample
from rag_judge.judge.prompts import PromptError, PromptRenderer, compiled, sample_variables
from rag_judge.judge.rubrics import Rubric, missing_input
from rag_judge.llm.base import ChatMessage

__all__ = ["PromptWork", "Rendered", "SamplePrompts"]

# Per rubric name: each target's messages as (role, content) pairs (one target, or one per
# context for a per-context rubric), or the PromptError's message where it cannot render.
SamplePrompts = dict[str, list[tuple[tuple[str, str], ...]] | str]


class PromptWork:
    """Renders a chunk's prompts for ``rubrics`` from ``template_dirs`` (then the shipped
    prompts); it pickles as its rubrics and folders and compiles the templates where it is
    called."""

    def __init__(self, rubrics: Sequence[Rubric], template_dirs: Sequence[Path]) -> None:
        self.rubrics = tuple(rubrics)
        self.template_dirs = tuple(template_dirs)
        self._renderer: PromptRenderer | None = None
        self._systems: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"rubrics": self.rubrics, "template_dirs": self.template_dirs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["rubrics"], state["template_dirs"])  # type: ignore[misc]

    def _one(self, message: ChatMessage) -> str:
        """A system message as one object for every sample of the chunk that has it (a
        rubric's fixed text): pickled once per chunk."""
        if message.role != "system":
            return message.content
        return self._systems.setdefault(message.content, message.content)

    def __call__(self, samples: Sequence[Sample]) -> list[SamplePrompts]:
        if self._renderer is None:
            self._renderer = compiled(self.rubrics, self.template_dirs)
        renderer = self._renderer
        self._systems.clear()  # shared within a chunk's message, not kept across chunks
        out = []
        for sample in samples:
            prompts: SamplePrompts = {}
            for rubric in self.rubrics:
                if missing_input(rubric, sample):  # the run reports it; nothing to render
                    continue
                targets = range(len(sample.contexts)) if rubric.per_context else [None]
                try:
                    prompts[rubric.name] = [
                        tuple((m.role, self._one(m)) for m in renderer.render(
                            rubric, sample_variables(rubric, sample, ctx)
                        ))
                        for ctx in targets
                    ]  # fmt: skip
                except PromptError as exc:
                    prompts[rubric.name] = str(exc)
            out.append(prompts)
        return out


class Rendered:
    """The prompts another process rendered for the chunk being judged, by sample; the
    renderer's for any it did not."""

    def __init__(self, renderer: PromptRenderer) -> None:
        self.renderer = renderer
        self._by_sample: dict[int, tuple[Sample, SamplePrompts]] = {}

    def work(self, rubrics: Sequence[Rubric]) -> PromptWork | None:
        """What renders these prompts elsewhere; None for a renderer of another class (its
        templates might not render the same there)."""
        if type(self.renderer) is not PromptRenderer:
            return None
        return PromptWork(rubrics, self.renderer.template_dirs)

    def take(self, samples: Sequence[Sample], done: Sequence[SamplePrompts] | None) -> None:
        """The prompts of the next chunk (None: none were rendered); the last chunk's are
        dropped (the judge renders all of a chunk's prompts before it takes another)."""
        if done is None or len(done) != len(samples):  # not this chunk's: render them here
            self._by_sample = {}
            return
        self._by_sample = {id(s): (s, p) for s, p in zip(samples, done, strict=True) if p}

    def render(self, rubric: Rubric, sample: Sample, ctx: int | None) -> tuple[ChatMessage, ...]:
        """``sample``'s messages on ``rubric`` (of context ``ctx``); raises PromptError."""
        kept = self._by_sample.get(id(sample))
        found = kept[1].get(rubric.name) if kept is not None and kept[0] is sample else None
        if found is None:
            return self.renderer.render(rubric, sample_variables(rubric, sample, ctx))
        if isinstance(found, str):
            raise PromptError(found)
        pairs = found[0 if ctx is None else ctx]
        return tuple(ChatMessage(role=role, content=content) for role, content in pairs)  # type: ignore[arg-type]
