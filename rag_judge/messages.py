"""Pydantic's validation errors in the words of a user's file.

Configs, datasets and rubric files are validated by pydantic models. The messages here say
what is wrong in the words of YAML and JSON: lists and mappings, never tuples, sets or class
names. They say what was expected and what was found. An unknown key gets the closest legal
key and the legal set. The exceptions themselves are in ``rag_judge.errors``.
"""

from __future__ import annotations

import difflib
import re
from collections import abc
from collections.abc import Mapping, Sequence
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from rag_judge.errors import ConfigError, format_loc

if TYPE_CHECKING:  # pydantic is imported where it is used: `rag-judge retrieval` never needs it
    from pydantic import BaseModel, ValidationError

__all__ = [
    "Problem",
    "Syntax",
    "cli_error",
    "describe_value",
    "did_you_mean",
    "friendly_message",
    "input_problems",
    "moved_error",
    "redact_url",
    "scrub_url",
    "unknown_key_message",
]

# pydantic's words for a wrong type, in the words of YAML and JSON, which have lists and
# mappings (not tuples, sets, dictionaries or model instances).
_LIST_TYPES = {"list_type", "tuple_type", "set_type", "frozen_set_type", "iterable_type"}
_MAPPING_TYPES = {"dict_type", "model_type", "model_attributes_type", "dataclass_type"}


def moved_error(err: Mapping[str, Any], loc: tuple[int | str, ...]) -> Any:
    """A pydantic error of one model's validation, at ``loc``, to raise again in another's
    (``ValidationError.from_exception_data``): an ``InitErrorDetails``. An error type pydantic
    cannot raise by its name (``path_type``) keeps its message as a custom error."""
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    ctx = err.get("ctx", {})
    try:
        ValidationError.from_exception_data(
            "", [InitErrorDetails(type=err["type"], input=None, ctx=ctx)]
        )
    except (KeyError, TypeError):  # an unknown type, or one whose context is not at hand
        # Without a context pydantic leaves the message as it is (no "{...}" is filled in).
        return InitErrorDetails(
            type=PydanticCustomError(err["type"], err["msg"]), loc=loc, input=err["input"]
        )
    return InitErrorDetails(type=err["type"], loc=loc, input=err["input"], ctx=ctx)


def friendly_message(err: Mapping[str, Any]) -> str:
    """One pydantic error's message for a user: no "Value error, " prefix, no tuple, set or
    class names (YAML and JSON have lists and mappings)."""
    msg = _message(err)
    kind = err.get("type")
    if kind == "literal_error":
        return _not_legal(err, [], describe_value(err.get("input")))
    if kind in _LIST_TYPES:
        return "expected a list"
    if kind in _MAPPING_TYPES:
        return "expected a mapping of keys to values"
    if kind in ("too_short", "too_long"):
        msg = re.sub(r"^(Tuple|Set|Frozenset)\b", "List", msg)
        msg = msg.replace(" after validation", "")
    return msg


def _not_legal(err: Mapping[str, Any], values: list[str], given: str | None) -> str:
    """``'rayy' is not a legal value (did you mean 'ray'?); legal values: local, ray``; the
    legal values from ``values`` (reprs), else from pydantic's "'a' or 'b'"."""
    ctx = err.get("ctx") or {}
    values = values or re.findall(r"'[^']*'", str(ctx.get("expected", "")))
    legal = [v.strip("'") for v in values]
    value = err.get("input")
    match = did_you_mean(value, legal) if isinstance(value, str) else None
    hint = f" (did you mean {match!r}?)" if match else ""
    shown = repr(value) if isinstance(value, str) else given
    return f"{shown} is not a legal value{hint}; legal values: {', '.join(legal)}"


def _message(err: Mapping[str, Any]) -> str:
    """pydantic's message without the "Value error, " its validators' errors get."""
    return str(err["msg"]).removeprefix("Value error, ")


def cli_error(exc: ValidationError, options: Mapping[str, str] | None = None) -> ConfigError:
    """A ConfigError naming the command-line option behind each problem of a model built from
    options: the option ``options`` maps the field to, by default ``--field-name`` for field
    ``field_name``; a problem of the whole object is its message alone."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        msg = friendly_message(err)
        if not loc:
            problems.append(msg)
            continue
        field = str(loc[0])
        option = (options or {}).get(field) or "--" + field.replace("_", "-")
        rest = format_loc(loc[1:])
        problems.append(f"{option}{'.' + rest if rest and rest[0] != '[' else rest}: {msg}")
    return ConfigError("; ".join(problems))


# ---- problems with input data, in the words of its format ------------------------------------
# Datasets (JSON lines, CSV and Parquet cells) and rubric files (YAML) are validated by pydantic
# models; input_problems says what is wrong in the words of the file's format: lists and
# objects (JSON) or mappings (YAML), never tuples, dictionaries or class names, with what was
# expected, what was found, and for an unknown key the closest legal key and the legal set.

Syntax = Literal["json", "yaml"]


class Problem(NamedTuple):
    """One problem in validated input.

    ``loc`` is where it is in the input (keys and list indices), ending at an unknown key or a
    bad mapping key when ``at_key`` (so a caller with the source can point at the key's line);
    ``field`` is the field to name ("" for the object itself; a bad key's mapping);
    ``message`` says what is wrong. ``str()`` gives ``field 'contexts[0].score': message``.
    """

    loc: tuple[int | str, ...]
    field: str
    message: str
    at_key: bool = False

    def __str__(self) -> str:
        return f"field '{self.field}': {self.message}" if self.field else self.message


def input_problems(
    exc: ValidationError,
    model: type[BaseModel],
    *,
    syntax: Syntax = "json",
    expected: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Every problem of ``exc`` (from validating input against ``model``) for a user.

    ``expected`` overrides the description of what a field takes, where its type does not say
    it all (a field that also accepts a single string, a grade), by field pattern: names joined
    by dots, ``[]`` for any list item, ``*`` for any mapping value, ``[key]`` for any key of a
    mapping (``contexts[].score``, ``relevance.*``, ``levels[key]``). A list's "too short" that
    only follows from its own bad items is left out.
    """
    errors = exc.errors(include_url=False)
    out = []
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] in ("too_short", "too_long") and any(
            len(other["loc"]) > len(loc) and tuple(other["loc"][: len(loc)]) == loc
            for other in errors
        ):
            continue  # a list left empty by dropping its bad items; those are reported
        out.append(_input_problem(err, model, syntax, expected or {}))
    return out


def describe_value(value: Any, syntax: Syntax = "json") -> str:
    """A value as a user would name it in JSON or YAML: ``the string 'high'``, ``a list``,
    ``an object`` (JSON) or ``a mapping`` (YAML), ``the number 7``, ``true``, ``null``."""
    if value is None:
        return "null" if syntax == "json" else "an empty value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        short = len(value) <= 40 and "\n" not in value
        return f"the string {value!r}" if short else "a string"
    if isinstance(value, list | tuple | set | frozenset):
        return "a list" if value else "an empty list"
    if isinstance(value, Mapping):
        return _mapping(syntax)
    return f"a value of type {type(value).__name__}"


def did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    """The choice closest to ``word`` (case aside), or None when none is close."""
    close = difflib.get_close_matches(word, choices, n=1) or difflib.get_close_matches(
        word.lower(), [c.lower() for c in choices], n=1
    )
    return next((c for c in choices if c.lower() == close[0].lower()), None) if close else None


def unknown_key_message(key: str, legal: Sequence[str] | None) -> str:
    """``unknown key 'refrences' (did you mean 'references'?); legal keys: id, ...``."""
    msg = f"unknown key {key!r}"
    if not legal:
        return msg
    match = did_you_mean(key, legal)
    if match is not None:
        msg += f" (did you mean {match!r}?)"
    return f"{msg}; legal keys: {', '.join(legal)}"


_KIND_WORDS = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "none_required": "null",
}
_TYPE_ERRORS = _LIST_TYPES | _MAPPING_TYPES | set(_KIND_WORDS) | {"bytes_type"}
_BOUNDS = {
    "greater_than_equal": ("ge", "must be at least"),
    "less_than_equal": ("le", "must be at most"),
    "greater_than": ("gt", "must be greater than"),
    "less_than": ("lt", "must be less than"),
}


def _input_problem(
    err: Mapping[str, Any], model: type[BaseModel], syntax: Syntax, expected: Mapping[str, str]
) -> Problem:
    kind = str(err["type"])
    loc = tuple(err["loc"])
    ctx = err.get("ctx") or {}
    given = describe_value(err["input"], syntax) if "input" in err else None
    if kind == "extra_forbidden":  # named at its mapping, with the legal keys there
        parent, field, _ = _walk(model, loc[:-1])
        legal = list(_model_keys(parent)) if _model_of(parent) is not None else None
        return Problem(loc, field, unknown_key_message(str(loc[-1]), legal), at_key=True)
    if loc[-1:] == ("[key]",):  # a mapping key of the wrong type: ("levels", "one", "[key]")
        loc = loc[:-1]
        mapping, field, pattern = _walk(model, loc[:-1])
        args = get_args(_bare(mapping)) or (None,)
        want = expected.get(f"{pattern}[key]") or _describe(args[0], syntax) or _kind(kind, syntax)
        return Problem(loc, field, f"key {loc[-1]!r} is not {want}", at_key=True)
    annotation, field, pattern = _walk(model, loc)
    want = expected.get(pattern) or _describe(annotation, syntax) or _kind(kind, syntax)
    if kind == "missing":
        msg = f"required but missing (expected {want})"
    elif kind in _TYPE_ERRORS:
        msg = f"expected {want}, got {given}"
    elif kind == "literal_error":
        msg = _not_legal(err, [repr(v) for v in get_args(annotation)], given)
    elif kind == "string_pattern_mismatch":
        msg = f"expected {want if pattern in expected else _pattern(ctx)}, got {given}"
    elif kind == "string_too_short":
        least = int(ctx.get("min_length", 1))
        msg = "must not be empty" if least == 1 else f"must be at least {least} characters long"
    elif kind == "string_too_long":
        msg = f"must be at most {ctx.get('max_length')} characters long"
    elif kind in ("too_short", "too_long"):
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        words = "needs at least" if kind == "too_short" else "takes at most"
        found = ctx.get("actual_length")
        items = "item" if bound == 1 else "items"
        msg = f"{words} {bound} {items}" + (f", got {found}" if found is not None else "")
    elif kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        msg = f"{words} {ctx.get(key)}, got {err.get('input')!r}"
    elif kind == "assertion_error":
        msg = str(err["msg"]).removeprefix("Assertion failed, ")
    else:
        msg = friendly_message(err)
        if msg.startswith("Input should be "):
            msg = f"expected {msg.removeprefix('Input should be ')}, got {given}"
    return Problem(loc, field, msg)


def _walk(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[Any, str, str]:
    """The annotation at ``loc`` in ``model`` (None where unknown), the field path to show
    (``contexts[0].score``) and its pattern (``contexts[].score``)."""
    annotation: Any = model
    field = pattern = ""
    for part in loc:
        bare = _bare(annotation)
        origin = get_origin(bare)
        args = [a for a in get_args(bare) if a is not Ellipsis]
        found = _model_of(bare)
        tagged = _tagged_member(bare, part)
        if tagged is not None:  # a discriminated union's tag: not a key of the user's input
            annotation = tagged
            continue
        if found is not None and isinstance(part, str):
            annotation = _model_field(found, part)
            step, pstep = f".{part}", f".{part}"
        elif origin in (dict, Mapping, abc.Mapping):
            annotation = args[1] if len(args) == 2 else None
            step, pstep = f".{part}", ".*"
        elif isinstance(part, int) and origin in (list, tuple, set, frozenset, abc.Sequence):
            annotation = args[0] if len(args) == 1 else None
            step, pstep = f"[{part}]", "[]"
        else:
            annotation = None
            step = pstep = f"[{part}]" if isinstance(part, int) else f".{part}"
        field = field + step if field or step.startswith("[") else step[1:]
        pattern = pattern + pstep if pattern or pstep.startswith("[") else pstep[1:]
    return annotation, field, pattern


def _tagged_member(union: Any, part: int | str) -> Any:
    """The member of a discriminated union that ``part`` tags (pydantic puts the tag in an
    error's location), or None."""
    if get_origin(union) not in (Union, UnionType) or not isinstance(part, str):
        return None
    for member in get_args(union):
        if get_origin(member) is Annotated and any(
            getattr(m, "tag", None) == part for m in get_args(member)[1:]
        ):
            return member
    return None


def _bare(annotation: Any) -> Any:
    """The annotation without Annotated metadata and without None from an optional."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _bare(members[0])
    return annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    from pydantic import BaseModel

    bare = _bare(annotation)
    return bare if isinstance(bare, type) and issubclass(bare, BaseModel) else None


def _model_field(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info.annotation
    return None


def _model_keys(annotation: Any) -> list[str]:
    model = _model_of(annotation)
    if model is None:
        return []
    # A field the run sets (marked ``json_schema_extra={"set_by_run": True}``) is no key to offer.
    fields = model.model_fields.items()
    return [f.alias or n for n, f in fields if f.json_schema_extra != {"set_by_run": True}]


def _mapping(syntax: Syntax) -> str:
    return "an object" if syntax == "json" else "a mapping"


def _describe(annotation: Any, syntax: Syntax) -> str | None:
    """What a value of ``annotation`` is, in JSON or YAML words; None where that is unknown."""
    bare = _bare(annotation)
    origin = get_origin(bare)
    args = [a for a in get_args(bare) if a is not Ellipsis]
    simple = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
    if isinstance(bare, type) and bare in simple:
        return simple[bare]
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if _model_of(bare) is not None:
        return f"{_mapping(syntax)} with keys {', '.join(_model_keys(bare))}"
    if origin in (list, tuple, set, frozenset, abc.Sequence):
        inner = _plural(args[0], syntax) if len(args) == 1 else None
        return f"a list of {inner}" if inner else "a list"
    if origin in (dict, Mapping, abc.Mapping) or bare is dict:
        value = _plural(args[1], syntax) if len(args) == 2 else None
        return f"{_mapping(syntax)} whose values are {value}" if value else _mapping(syntax)
    if origin in (Union, UnionType):
        parts = [_describe(a, syntax) for a in args]
        return " or ".join(p for p in parts if p) if all(parts) else None
    return None


def _plural(annotation: Any, syntax: Syntax) -> str | None:
    bare = _bare(annotation)
    simple = {str: "strings", int: "whole numbers", float: "numbers", bool: "true or false"}
    if isinstance(bare, type) and bare in simple:
        return simple[bare]
    if get_origin(bare) is Literal:
        return "values among " + ", ".join(str(a) for a in get_args(bare))
    if _model_of(bare) is not None:
        word = "objects" if syntax == "json" else "mappings"
        return f"{word} with keys {', '.join(_model_keys(bare))}"
    return None


def _kind(kind: str, syntax: Syntax) -> str:
    if kind in _LIST_TYPES:
        return "a list"
    if kind in _MAPPING_TYPES:
        return _mapping(syntax)
    return _KIND_WORDS.get(kind, "another value")


def _pattern(ctx: Mapping[str, Any]) -> str:
    return f"a string matching the pattern {ctx.get('pattern')}"


def redact_url(url: str) -> str:
    """``url`` as a report or a log may show it: its user and password, and its query's
    values, replaced by ``***`` (an endpoint may carry a token in either)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = host + (f":{parts.port}" if parts.port else "")
    if parts.username is not None or parts.password is not None:
        netloc = "***@" + netloc
    query = "&".join(f"{k}=***" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub_url(text: str, url: str) -> str:
    """``text`` (an error message) with the secret parts of ``url`` in it replaced by
    ``***``: its password, its user and its query's values of 4 characters or more (a
    shorter one is no token, and replacing it would garble the rest of the text)."""
    parts = urlsplit(url)
    secrets = [parts.password, parts.username, *(v for _, v in parse_qsl(parts.query))]
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
