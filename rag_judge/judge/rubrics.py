"""Rubrics as data: what the judge sees, the criteria, and what each level 1–5 means.

Ten rubrics are built in, as data in ``prompts/rubrics.yaml`` (their prompts are the Jinja
templates of the same name in ``prompts/``). Four more judge a whole conversation
(``ConversationRubric``, in ``prompts/conversation_rubrics.yaml``). Users add rubrics in YAML
(criteria + one description per level) or point a rubric at their own template file.
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
from rag_judge.data.yaml_file import child_node, line_of, read_yaml
from rag_judge.errors import ConfigError
from rag_judge.judge.conversation import CONVERSATION_INPUTS, missing_conversation_input
from rag_judge.messages import describe_value, input_problems
from rag_judge.resources import resource_dir

__all__ = [
    "BUILTIN_RUBRICS",
    "CONVERSATION_INPUTS",
    "CONVERSATION_RUBRICS",
    "FILE_SUFFIXES",
    "INPUTS",
    "NORM",
    "ConversationRubric",
    "Example",
    "Rubric",
    "check_specs",
    "load_rubrics",
    "missing_input",
    "resolve_rubrics",
    "rubric_from_mapping",
    "rubric_from_template",
]

Input = Literal["question", "answer", "contexts", "references"]
INPUTS: tuple[str, ...] = ("question", "answer", "contexts", "references")
# A conversation rubric's inputs: one Literal, so an error lists every legal value at once.
AnyInput = Literal[
    "question", "answer", "contexts", "references", "turns", "goal", "role", "topics"
]
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
            # An example holds no conversation, so it lacks a conversation input.
            lacking = [f for f in self.inputs if not getattr(ex, f, None)]
            if lacking:
                raise ValueError(f"examples[{i}] lacks {lacking[0]!r}, an input of this rubric")
        return self


class ConversationRubric(Rubric):
    """A rubric that judges a whole conversation: its inputs are the turns (always), and the
    goal, the assistant's role or the allowed topics (``rag_judge.judge.conversation`` reads
    them). A turn unit with history counts as the conversation up to that turn.

    A subclass, so that a single-turn rubric's inputs and their error messages stay as they
    were; a rubric mapping whose inputs name a conversation input is read as one.
    """

    # The inputs widen to the conversation's (a tuple of a wider Literal: mypy sees a clash).
    inputs: tuple[AnyInput, ...] = Field(  # type: ignore[assignment]
        default=("turns",), min_length=1
    )

    @model_validator(mode="after")
    def _a_conversation(self) -> ConversationRubric:
        if "turns" not in self.inputs:
            raise ValueError("a conversation rubric needs 'turns' among its inputs")
        plain = [f for f in self.inputs if f in INPUTS]
        if plain:
            raise ValueError(
                f"{plain[0]!r} is an input of a single-turn rubric; a conversation rubric's "
                f"inputs are among {', '.join(CONVERSATION_INPUTS)}"
            )
        return self


def _model_for(item: Mapping[str, Any]) -> type[Rubric]:
    """ConversationRubric for a mapping whose inputs name a conversation input, else Rubric."""
    inputs = item.get("inputs")
    if isinstance(inputs, list | tuple) and any(i in CONVERSATION_INPUTS for i in inputs):
        return ConversationRubric
    return Rubric


# What a rubric's fields take, in YAML's words, where the type does not say it all (for
# rag_judge.messages.input_problems, by field pattern).
_EXPECTED = {
    "name": "a name of lowercase letters, digits and _ that starts with a letter",
    "inputs": f"a list of inputs among {', '.join(INPUTS)}",
    "levels": "a mapping of each level 1, 2, 3, 4, 5 to its description",
    "levels[key]": "a level (1, 2, 3, 4 or 5)",
    "levels.*": "a string (the level's description)",
    "examples": "a list of examples (mappings with question, answer, contexts, references, "
    "score, reason)",
    "examples[].contexts": "a list of strings",
    "examples[].references": "a list of strings",
    "examples[].score": "a whole number from 1 to 5",
    "template": "a string (a template name or a .j2 file)",
}
_CONVERSATION_EXPECTED = {
    **_EXPECTED,
    "inputs": f"a list of inputs among {', '.join(CONVERSATION_INPUTS)}",
}
_SHAPE = "a mapping with name, inputs, criteria, levels"

BUILTIN_FILE = "rubrics.yaml"  # in the shipped prompts folder
CONVERSATION_FILE = "conversation_rubrics.yaml"  # ... and the conversation rubrics


def _builtin_rubrics(file: str) -> dict[str, Rubric]:
    """The built-in rubrics of ``file`` in ``prompts/`` (in the wheel or the checkout)."""
    path = resource_dir("prompts") / file
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {r.name: r for r in (_model_for(d).model_validate(d) for d in data)}


# Each has a template of the same name in prompts/.
BUILTIN_RUBRICS: dict[str, Rubric] = _builtin_rubrics(BUILTIN_FILE)
# A separate table: BUILTIN_RUBRICS stays the single-turn rubrics that score any sample.
CONVERSATION_RUBRICS: dict[str, Rubric] = _builtin_rubrics(CONVERSATION_FILE)
_BUILTIN: dict[str, Rubric] = {**BUILTIN_RUBRICS, **CONVERSATION_RUBRICS}


def missing_input(rubric: Rubric, sample: Sample) -> str | None:
    """Why ``sample`` cannot be judged on ``rubric`` (naming the field), or None."""
    for field in rubric.inputs:
        if field in CONVERSATION_INPUTS:
            problem = missing_conversation_input(rubric.name, field, sample)
            if problem:
                return problem
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

    A relative ``template`` is resolved against the file's folder. Errors read
    ``file:line: rubric 'name': field 'key': message``, one line per problem.
    """
    path = Path(path)
    data, root = read_yaml(path, "a rubric file", "rubric file not found")
    if data is None:
        raise ConfigError(f"{path}: the file is empty; a rubric file holds {_SHAPE}, or a list")
    if isinstance(data, dict) and set(data) == {"rubrics"}:
        data = data["rubrics"]
        root = child_node(root, "rubrics")
    if not isinstance(data, list):
        return [_from_mapping(data, str(path), path.parent, root, "")]
    return [
        _from_mapping(item, str(path), path.parent, child_node(root, i), f"[{i}]")
        for i, item in enumerate(data)
    ]


def rubric_from_mapping(item: Any, where: str, base_dir: Path | None) -> Rubric:
    """A rubric from a mapping (an inline rubric of a config: ``where`` is ``rubrics[0]``);
    errors read ``where: rubric 'name': field 'key': message; ...``."""
    return _from_mapping(item, where, base_dir, None, "")


def _from_mapping(
    item: Any, where: str, base_dir: Path | None, node: yaml.Node | None, label: str
) -> Rubric:
    """A rubric from a mapping found at ``node`` of a YAML file (None: no lines known); errors
    name ``where`` (``file:line`` where the line is known), the rubric (by name, else by
    ``label``, its list index) and each field, one line per problem when lines are known."""
    at = f"{where}:{node.start_mark.line + 1}" if node is not None else where
    if not isinstance(item, Mapping):
        head = f"{at}: {label}: " if label else f"{at}: "
        raise ConfigError(f"{head}expected a rubric ({_SHAPE}), got {describe_value(item, 'yaml')}")
    item = dict(item)
    template = item.get("template")
    if base_dir is not None and isinstance(template, str) and template.endswith(".j2"):
        candidate = base_dir / template
        item["template"] = str(candidate) if candidate.is_file() else template
    model = _model_for(item)
    expected = _CONVERSATION_EXPECTED if model is ConversationRubric else _EXPECTED
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        problems = input_problems(exc, model, syntax="yaml", expected=expected)
        name = item.get("name")
        label = f"rubric {name!r}" if isinstance(name, str) and name else label
        if node is None:
            lines = [f"{where}: {label}: " if label else f"{where}: "]
            raise ConfigError(lines[0] + "; ".join(map(str, problems))) from None
        out = []
        for p in problems:
            line = line_of(node, p.loc, at_key=p.at_key)
            out.append(f"{where}:{line}: {label}: {p}" if label else f"{where}:{line}: {p}")
        raise ConfigError("\n".join(out)) from None


RubricSpec = str | Mapping[str, Any] | Rubric
FILE_SUFFIXES = (".yaml", ".yml", ".j2")
NORM = "_norm"  # a rubric's [0, 1] twin: faithfulness -> faithfulness_norm


def check_specs(specs: tuple[RubricSpec, ...] | list[RubricSpec]) -> None:
    """The shape of config entries, reading no file: each is a Rubric, a valid mapping, a
    built-in name or a ``.yaml``/``.yml``/``.j2`` file name, and the names known without
    reading files are distinct. ``resolve_rubrics`` checks the rest. Raises ConfigError."""
    names: list[str] = []
    for i, spec in enumerate(specs):
        if isinstance(spec, Rubric):
            names.append(spec.name)
        elif isinstance(spec, Mapping):
            names.append(rubric_from_mapping(spec, f"rubrics[{i}]", base_dir=None).name)
        elif spec in _BUILTIN:
            names.append(spec)
        elif not spec.endswith(FILE_SUFFIXES):
            raise _unknown(i, spec)
    _distinct(names)


def _unknown(i: int, spec: str) -> ConfigError:
    return ConfigError(
        f"rubrics[{i}]: unknown rubric {spec!r}; built-in rubrics: "
        + ", ".join(BUILTIN_RUBRICS)
        + "; conversation rubrics: "
        + ", ".join(CONVERSATION_RUBRICS)
        + " (or give a .yaml rubric file or a .j2 template)"
    )


def _distinct(names: list[str]) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"rubric name used twice: {', '.join(dup)}")


def resolve_rubrics(specs: tuple[RubricSpec, ...] | list[RubricSpec]) -> list[Rubric]:
    """Turn config entries into rubrics: a built-in name, a YAML rubric file, a ``.j2`` template
    path (its inputs read from the variables it uses), an inline mapping, or a Rubric."""
    out: list[Rubric] = []
    for i, spec in enumerate(specs):
        if isinstance(spec, Rubric):
            out.append(spec)
        elif isinstance(spec, Mapping):
            out.append(rubric_from_mapping(spec, f"rubrics[{i}]", base_dir=None))
        elif spec in _BUILTIN:
            out.append(_BUILTIN[spec])
        elif spec.endswith((".yaml", ".yml")):
            out.extend(load_rubrics(spec))
        elif spec.endswith(".j2"):
            out.append(rubric_from_template(spec))
        else:
            raise _unknown(i, spec)
    _distinct([r.name for r in out])
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
    # A template that shows the conversation (its turns) is a conversation rubric.
    if "turns" in used:
        inputs = [f for f in CONVERSATION_INPUTS if f in used]
    if not inputs:
        every = ", ".join((*INPUTS, *CONVERSATION_INPUTS))
        raise ConfigError(f"{path}: the template uses none of the inputs {every}")
    name = re.sub(r"[^a-z0-9_]", "_", path.stem.lower()).strip("_") or "custom"
    return _model_for({"inputs": inputs}).model_validate(
        {
            "name": name if name[0].isalpha() else f"r_{name}",
            "inputs": inputs,
            "template": str(path.resolve()),
            "per_context": per_context,
        }
    )
