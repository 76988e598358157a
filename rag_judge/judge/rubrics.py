"""Rubrics as data: what the judge sees, the criteria, and what each level 1–5 means.

Ten rubrics are built in (their prompts are the Jinja templates of the same name in
``prompts/``). Users add rubrics in YAML (criteria + one description per level) or point a rubric
at their own template file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import jinja2
import yaml
from jinja2 import meta
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError, validation_messages

__all__ = [
    "BUILTIN_RUBRICS",
    "INPUTS",
    "Example",
    "Rubric",
    "load_rubrics",
    "missing_input",
    "resolve_rubrics",
    "rubric_from_mapping",
    "rubric_from_template",
]

Input = Literal["question", "answer", "contexts", "references"]
INPUTS: tuple[str, ...] = ("question", "answer", "contexts", "references")
_STRICT = ConfigDict(extra="forbid", frozen=True)


class Example(BaseModel):
    """A few-shot example: graded material with the verdict the judge should have given."""

    model_config = _STRICT

    question: str | None = None
    answer: str | None = None
    contexts: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    score: int = Field(ge=1, le=5)
    reason: str = Field(min_length=1)


class Rubric(BaseModel):
    """One judged aspect on a 1–5 scale.

    ``template`` is a template name in the prompt folders or a path to a Jinja file; left unset,
    the built-in ``<name>.j2`` is used when there is one, else the generic ``_generic.j2`` that
    renders the declared inputs. ``per_context`` sends one request per retrieved context (the
    template then sees ``context`` instead of ``contexts``).
    """

    model_config = _STRICT

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    description: str = ""
    inputs: tuple[Input, ...] = Field(default=("question", "answer"), min_length=1)
    criteria: str = ""
    levels: dict[int, str] = Field(default_factory=dict)
    examples: tuple[Example, ...] = ()
    template: str | None = None
    per_context: bool = False

    @field_validator("name")
    @classmethod
    def _not_norm(cls, name: str) -> str:
        if name.endswith("_norm"):
            raise ValueError(f"{name!r} ends in '_norm', which is kept for normalised scores")
        return name

    @field_validator("inputs")
    @classmethod
    def _unique_inputs(cls, inputs: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(inputs)) != len(inputs):
            raise ValueError(f"an input is listed twice in {list(inputs)}")
        return inputs

    @field_validator("levels")
    @classmethod
    def _five_levels(cls, levels: dict[int, str]) -> dict[int, str]:
        if levels and sorted(levels) != [1, 2, 3, 4, 5]:
            raise ValueError(f"needs exactly the levels 1, 2, 3, 4, 5; got {sorted(levels)}")
        empty = [k for k, v in levels.items() if not v.strip()]
        if empty:
            raise ValueError(f"level {empty[0]} has an empty description")
        return dict(sorted(levels.items()))

    @model_validator(mode="after")
    def _complete(self) -> Rubric:
        if self.template is None and not self.criteria.strip():
            raise ValueError("'criteria' is required unless the rubric names its own 'template'")
        if self.template is None and not self.levels:
            raise ValueError(
                "'levels' (a description for each of 1..5) is required unless the "
                "rubric names its own 'template'"
            )
        if self.per_context and "contexts" not in self.inputs:
            raise ValueError("'per_context' needs 'contexts' among the inputs")
        for i, ex in enumerate(self.examples):
            lacking = [f for f in self.inputs if not getattr(ex, f)]
            if lacking:
                raise ValueError(f"examples[{i}] lacks {lacking[0]!r}, an input of this rubric")
        return self


# The built-in rubrics as data (each has a template of the same name in prompts/).
_BUILTIN_YAML = """
- name: faithfulness
  inputs: [question, answer, contexts]
  description: Is every claim in the answer entailed by the retrieved contexts?
  criteria: >-
    Every claim the answer makes must be entailed by the contexts: a reader who knows only the
    contexts could conclude it. A claim that merely does not contradict the contexts, or that
    rests on outside knowledge, is unsupported even when it is true. An answer that only says
    the contexts lack the information makes no claim beyond them.
  levels:
    1: Most or all claims are unsupported by the contexts, or the answer contradicts them.
    2: Several claims are unsupported or contradicted; only a minority is entailed.
    3: >-
      About half of the claims are entailed; the rest are unsupported additions, including
      plausible outside knowledge.
    4: All central claims are entailed; one minor detail is unsupported or overstated.
    5: Every claim is entailed by the contexts; nothing is added beyond them.
- name: answer_relevance
  inputs: [question, answer]
  description: Does the answer address the question that was asked?
  criteria: >-
    The answer responds to the intent and every part of the question, stays on topic and does
    not evade. Judge relevance only, not whether the facts are correct.
  levels:
    1: >-
      Does not address the question: off topic, an unexplained refusal, or an answer to a
      different question.
    2: Touches the topic of the question but misses its main point.
    3: Addresses the main point only partly, or buries it under unrelated material.
    4: Addresses the question directly; a minor part is missed or a little is off topic.
    5: Directly and completely addresses every part of the question and nothing else.
- name: correctness
  inputs: [question, answer, references]
  description: Does the answer agree with the reference answer(s)?
  criteria: >-
    The answer states the facts, numbers and conclusions of the reference answer correctly.
    Wording may differ; extra details are fine unless they contradict the references. When
    several references are given, agreeing with any one of them is enough.
  levels:
    1: Contradicts the references or is wrong on the central fact.
    2: Gets a minor point right, but the central fact is wrong or missing.
    3: The central fact is right, but important details are wrong or missing.
    4: Right on the central fact and nearly all details; one minor omission or imprecision.
    5: Agrees with the references on every fact that matters.
- name: context_relevance
  inputs: [question, contexts]
  per_context: true
  description: Does this one retrieved passage help answer the question?
  criteria: >-
    Judge this single passage on its own, as if no other passage existed: does it contain
    information that helps answer the question? Judge usefulness for answering, not topical
    similarity.
  levels:
    1: Unrelated to the question.
    2: On the topic of the question, but gives nothing that helps answer it.
    3: Contains some information that helps, but only part of what is needed.
    4: Contains most of the information needed to answer the question.
    5: Contains everything needed to answer the question fully.
- name: coherence
  inputs: [answer]
  description: Is the answer logically organised and easy to follow?
  criteria: >-
    Sentences follow from one another, ideas are connected, the answer does not contradict
    itself, and its structure makes it easy to follow. Judge organisation and logical flow, not
    factual accuracy or grammar.
  levels:
    1: "Incoherent: disconnected statements, self-contradiction, or no discernible structure."
    2: "Hard to follow: jumps between ideas, missing links or internal inconsistencies."
    3: Mostly understandable, with some awkward jumps or poorly connected parts.
    4: Logically organised and easy to follow, with minor lapses in flow.
    5: A clear, logical progression throughout; every part connects to the whole.
- name: fluency
  inputs: [answer]
  description: Is the answer fluent, grammatical, natural language?
  criteria: >-
    Correct grammar, spelling and punctuation, idiomatic word choice and readable sentences.
    Judge the language only, not content or accuracy.
  levels:
    1: "Barely readable: pervasive grammatical errors, garbled or broken text."
    2: Frequent errors or unnatural phrasing that impede reading.
    3: Understandable, with noticeable errors or awkward phrasing.
    4: Fluent, with a few minor errors or slightly awkward phrases.
    5: Flawless, natural and idiomatic.
- name: coverage
  inputs: [question, answer, contexts]
  description: Does the answer cover all the key information the question calls for?
  criteria: >-
    Every part of the question is addressed and the key relevant facts the contexts offer are
    included. Judge completeness, not brevity.
  levels:
    1: Covers none of the information the question calls for.
    2: Covers a small part; most key points available in the contexts are missing.
    3: Covers the main point but misses several key points or parts of the question.
    4: Covers nearly all key points; one minor point is missing.
    5: Covers every part of the question and every key relevant point in the contexts.
- name: diversity
  inputs: [question, answer]
  description: Does the answer offer distinct, non-redundant points?
  criteria: >-
    Where the question admits several points, options or perspectives, the answer offers a
    range of distinct ones instead of restating one idea in different words. Where it admits
    one answer, judge whether the supporting points are distinct rather than repetitive.
  levels:
    1: Repeats one idea; the content is redundant throughout.
    2: Mostly one idea with minor variation; notable repetition.
    3: Some distinct points, but relevant alternatives are missing or points overlap.
    4: Several distinct points with little overlap; one relevant perspective may be missing.
    5: A well-chosen range of distinct, complementary points with no redundancy.
- name: detail
  inputs: [question, answer]
  description: Does the answer give the specific details the question warrants?
  criteria: >-
    The answer gives concrete specifics (names, numbers, conditions, steps or examples) rather
    than vague generalities. Judge specificity and depth, not length.
  levels:
    1: Vague and generic; no specific details.
    2: Few specifics; mostly general statements.
    3: Some specific details, but key specifics are missing or left vague.
    4: Specific and concrete on most points; minor details missing.
    5: Precise and concrete throughout, with exactly the specifics the question calls for.
- name: conciseness
  inputs: [question, answer]
  description: Does the answer say what is needed without unnecessary words?
  criteria: >-
    No padding, repetition, digressions or boilerplate. A short answer that omits needed
    information is not concise merely for being short: judge economy of expression for the
    content given.
  levels:
    1: Mostly padding, repetition or digression; the useful content is buried.
    2: Considerably longer than needed, with much repetition or irrelevant material.
    3: Some unnecessary material or repetition, but the main content is easy to find.
    4: Concise, with a little unnecessary wording.
    5: As brief as possible while complete; every sentence earns its place.
"""

BUILTIN_RUBRICS: dict[str, Rubric] = {
    r.name: r for r in (Rubric.model_validate(d) for d in yaml.safe_load(_BUILTIN_YAML))
}


def missing_input(rubric: Rubric, sample: Sample) -> str | None:
    """Why ``sample`` cannot be judged on ``rubric`` (naming the field), or None."""
    for field in rubric.inputs:
        if field == "contexts" and not sample.contexts:
            return f"field 'contexts': rubric '{rubric.name}' needs retrieved contexts; none given"
        if field == "references" and not any(r.strip() for r in sample.references):
            return (
                f"field 'references': rubric '{rubric.name}' needs a reference answer; none given"
            )
        if field in ("question", "answer"):
            value = getattr(sample, field)
            if value is None or not value.strip():
                state = "none" if value is None else "an empty one"
                return f"field '{field}': rubric '{rubric.name}' needs it; the sample has {state}"
    return None


def load_rubrics(path: str | Path) -> list[Rubric]:
    """Rubrics from a YAML file: one mapping, a list of mappings, or ``{rubrics: [...]}``.

    A relative ``template`` is resolved against the file's folder. Errors name file and field.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: rubric file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if isinstance(data, dict) and set(data) == {"rubrics"}:
        data = data["rubrics"]
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        where = f"{path}" if len(items) == 1 and not isinstance(data, list) else f"{path}: [{i}]"
        out.append(rubric_from_mapping(item, where, base_dir=path.parent))
    return out


def rubric_from_mapping(item: Any, where: str, base_dir: Path | None) -> Rubric:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: a rubric is a mapping with name, inputs, criteria, levels")
    item = dict(item)
    template = item.get("template")
    if base_dir is not None and isinstance(template, str) and template.endswith(".j2"):
        candidate = base_dir / template
        item["template"] = str(candidate) if candidate.is_file() else template
    try:
        return Rubric.model_validate(item)
    except ValidationError as exc:
        problems = "; ".join(f"field '{loc}': {msg}" for loc, msg in validation_messages(exc))
        name = item.get("name")
        raise ConfigError(
            f"{where}: rubric {name!r}: {problems}" if name else f"{where}: {problems}"
        ) from None


RubricSpec = str | Mapping[str, Any] | Rubric


def resolve_rubrics(specs: tuple[RubricSpec, ...] | list[RubricSpec]) -> list[Rubric]:
    """Turn config entries into rubrics: a built-in name, a YAML rubric file, a ``.j2`` template
    path (its inputs read from the variables it uses), an inline mapping, or a Rubric."""
    out: list[Rubric] = []
    for i, spec in enumerate(specs):
        if isinstance(spec, Rubric):
            out.append(spec)
        elif isinstance(spec, Mapping):
            out.append(rubric_from_mapping(spec, f"rubrics[{i}]", base_dir=None))
        elif spec in BUILTIN_RUBRICS:
            out.append(BUILTIN_RUBRICS[spec])
        elif spec.endswith((".yaml", ".yml")):
            out.extend(load_rubrics(spec))
        elif spec.endswith(".j2"):
            pass

            out.append(rubric_from_template(spec))
        else:
            raise ConfigError(
                f"rubrics[{i}]: unknown rubric {spec!r}; built-in rubrics: "
                + ", ".join(BUILTIN_RUBRICS)
                + " (or give a .yaml rubric file or a .j2 template)"
            )
    names = [r.name for r in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"rubric name used twice: {', '.join(dup)}")
    return out


def rubric_from_template(path: str | Path) -> Rubric:
    """A rubric for a bare template file: named after the file, inputs read from the variables
    it uses (``context`` means one request per retrieved context)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"template file {str(path)!r} not found")
    try:
        # Parsing needs no loader or sandbox: only the variable names are read.
        used = meta.find_undeclared_variables(
            jinja2.Environment().parse(path.read_text(encoding="utf-8"))
        )
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: {exc.message}") from None
    per_context = "context" in used
    inputs = [f for f in INPUTS if f in used or (f == "contexts" and per_context)]
    if not inputs:
        raise ConfigError(f"{path}: the template uses none of the inputs {', '.join(INPUTS)}")
    name = re.sub(r"[^a-z0-9_]", "_", path.stem.lower()).strip("_") or "custom"
    return Rubric.model_validate(
        {
            "name": name if name[0].isalpha() else f"r_{name}",
            "inputs": inputs,
            "template": str(path.resolve()),
            "per_context": per_context,
        }
    )
