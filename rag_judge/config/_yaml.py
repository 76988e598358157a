"""A config file as YAML: reading it, and a validation error as ``file:line: key.path:
message`` lines (an unknown key with the closest legal key, or where it belongs); ``where``
gives a key's ``file:line`` to the CLI. ``rag_judge.config`` re-exports ``where``."""

from __future__ import annotations

from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from rag_judge.config._models import BootstrapConfig, ExperimentConfig
from rag_judge.data.yaml_file import line_of, read_yaml
from rag_judge.errors import ConfigError, format_loc
from rag_judge.evaluators import EVALUATORS, Evaluator, evaluator_class
from rag_judge.judge.settings import Judge
from rag_judge.llm.providers import ClientConfig
from rag_judge.messages import friendly_message, unknown_key_message

__all__ = ["where"]


def _read_yaml(path: Path) -> tuple[dict[str, Any], yaml.Node | None]:
    data, root = read_yaml(path, "a YAML config file", "file not found")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a YAML mapping of keys to values")
    return data, root


def _describe(
    exc: ValidationError, path: Path, root: yaml.Node | None, raw: dict[str, Any] | None = None
) -> str:
    """``file:line: key.path: message`` for each problem. An unknown key is named with the
    closest legal key and the legal keys at its level (found by walking the model classes along
    its location in ``raw``, the mapping validated); the value is never echoed."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        msg = friendly_message(err)
        unknown = err["type"] == "extra_forbidden"
        if unknown:
            msg = _unknown_key(str(loc[-1]), _legal_keys(loc[:-1], raw), _elsewhere(loc))
        elif loc == ("evaluators",) and err["type"] == "too_short":
            msg = f"give at least one evaluator; valid types: {', '.join(EVALUATORS)}"
        line = line_of(root, loc, at_key=unknown)
        where = f"{path}:{line}" if line else str(path)
        key = format_loc(loc)
        problems.append(f"{where}: {key}: {msg}" if key else f"{where}: {msg}")
    return "\n".join(problems)


def where(path: str | Path, loc: tuple[int | str, ...]) -> str:
    """``file:line`` of the key at ``loc`` in a YAML config (of its nearest existing parent key
    when it is absent, e.g. the ``client`` key for ``client.api_key_env``); just the file when
    no line is known."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return str(path)
    line = _key_line(root, loc)
    return f"{path}:{line}" if line else str(path)


def _key_line(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the deepest key (or list item) along ``loc`` that the YAML has."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if k.value == part]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _elsewhere(loc: tuple[int | str, ...]) -> str | None:
    """Where a key unknown at ``loc`` is legal, if it is at another level of a config: a
    top-level key, an evaluator option, a ``client`` or ``bootstrap`` option."""
    key, level = loc[-1], loc[:-1]
    evaluator_level = len(level) == 2 and level[0] == "evaluators"
    places = []
    if level and (key in ExperimentConfig.model_fields or key == "matrix"):
        places.append("a top-level key (no indentation)")
    if not evaluator_level:
        types = [t for t, cls in EVALUATORS.items() if key in cls.model_fields and key != "type"]
        if types:
            places.append(
                f"an option of an evaluator (an item of evaluators) of type {', '.join(types)}"
            )
    if level[-1:] != ("client",) and key in ClientConfig.model_fields:
        places.append("an option of a judge's client (client: {...})")
    if level[-1:] != ("bootstrap",) and key in BootstrapConfig.model_fields:
        places.append("an option of bootstrap (bootstrap: {...})")
    return f"it is {' or '.join(places)}" if places else None


def _unknown_key(key: str, legal: list[str] | None, elsewhere: str | None = None) -> str:
    if elsewhere:  # a key at the wrong level: say where it belongs, not a near miss here
        msg = f"unknown key {key!r} here: {elsewhere}"
        return f"{msg}; legal keys here: {', '.join(legal)}" if legal else msg
    return unknown_key_message(key, legal)


def _legal_keys(loc: tuple[int | str, ...], raw: Any) -> list[str] | None:
    """The keys the mapping at ``loc`` of a raw config may hold, or None where that is not
    known: the fields (by alias) of the model class found by walking ``ExperimentConfig``'s
    annotations along ``loc``; an evaluator's class is looked up from its ``type``."""
    annotation: Any = ExperimentConfig
    node: Any = raw
    for part in loc:
        model = _model_of(annotation, node)
        if model is not None and isinstance(part, str):
            fields = _flat_fields(model)
            field = next((f for name, f in fields.items() if part in (name, f.alias)), None)
            if field is None:
                return None
            annotation = field.annotation
        elif isinstance(part, int) and get_origin(_unwrap(annotation)) in (list, tuple):
            args = [a for a in get_args(_unwrap(annotation)) if a is not Ellipsis]
            if len(args) != 1:
                return None
            annotation = args[0]
        else:
            return None
        node = _child_of(node, part)
    model = _model_of(annotation, node)
    if model is None:
        return None
    keys = [f.alias or name for name, f in _flat_fields(model).items()]
    if issubclass(model, Evaluator):  # the family's own options first, then what all share
        keys = [*(k for k in keys if k != "per"), "per"]
    return [*keys, "matrix"] if model is ExperimentConfig else keys


def _flat_fields(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s fields as a config writes them: a family's ``judge`` spread into its keys
    (``client``, ``temperature`` ...), which the config names at the family's own level."""
    fields = dict(model.model_fields)
    judge = fields.get("judge")
    if judge is None or judge.annotation is not Judge:
        return fields
    out: dict[str, Any] = {}
    for name, field in fields.items():
        out |= dict(Judge.model_fields) if name == "judge" else {name: field}
    return out


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:  # SerializeAsAny[X] and Field metadata
        annotation = get_args(annotation)[0]
    return annotation


def _model_of(annotation: Any, node: Any) -> type[BaseModel] | None:
    """The model class an annotation (or one member of a union) names; for an evaluator, the
    class the raw mapping's ``type`` names."""
    annotation = _unwrap(annotation)
    if get_origin(annotation) in (Union, UnionType):
        members = [_model_of(a, node) for a in get_args(annotation)]
        return next((m for m in members if m is not None), None)
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return None
    if issubclass(annotation, Evaluator):
        try:
            return evaluator_class(node.get("type") if isinstance(node, dict) else None)
        except ValueError:
            return None
    return annotation


def _child_of(node: Any, part: int | str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None
