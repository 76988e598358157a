"""Conversations in other tools' layouts, as a sample's fields: ragas' MultiTurnSample and
DeepEval's ConversationalTestCase (``docs`` and the README say how each maps).

ragas: ``user_input`` is a list of messages ``{type, content, tool_calls?, metadata?}``. A
``human`` message opens a turn; an ``ai`` message's ``tool_calls`` (``{name, args}``) are tool
steps, whose results are the ``tool`` messages that follow, in call order; the turn's answer is
its last ``ai`` message's content. ragas messages carry no retrieved contexts: an ``ai``
message's ``metadata.retrieved_contexts`` (and ``retrieved_context_ids``, named as ragas'
single-turn columns) is a retrieval step, taken before that message's tool calls.
``reference`` is the goal, ``reference_tool_calls`` the whole conversation's expected calls in
strict order (ragas' ToolCallAccuracy compares them in order).

DeepEval: ``turns`` of ``{role, content, retrieval_context?, tools_called?}``. A ``user`` turn
opens a turn; the ``assistant`` turns after it are its steps (each one's
``retrieval_context`` a retrieval step, then its ``tools_called``, ``{name, input_parameters,
output}``) and the last one's content its answer. ``expected_outcome`` is the goal; the
scenario, user description and the like are kept in metadata.

In both, an empty answer is no answer, a message or turn before the first user one opens a
turn without a question, and its other metadata goes to the turn's metadata. Errors name the
field in the user's words; a problem found only when the sample is validated names the
sample's field and where in the row it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag_judge.data._cells import Source, structured
from rag_judge.errors import DataError
from rag_judge.messages import Problem, describe_value, unknown_key_message

__all__ = ["Converted", "deepeval_fields", "ragas_fields"]

_MESSAGE_KEYS = ("type", "content", "tool_calls", "metadata")
_MESSAGE_TYPES = ("human", "ai", "tool")
_RAGAS_RETRIEVAL = ("retrieved_contexts", "retrieved_context_ids")
# ragas columns of a single-turn sample only; the synthesizer's columns are kept in metadata.
_RAGAS_SINGLE_TURN = (
    "response",
    "retrieved_contexts",
    "retrieved_context_ids",
    "reference_context_ids",
    "reference_contexts",
    "multi_responses",
)
_RAGAS_KEPT = ("rubrics", "reference_topics", "persona_name", "query_style", "query_length",
               "synthesizer_name")  # fmt: skip
_RAGAS_STRUCTURED = ("rubrics", "reference_topics")
_TURN_KEYS = ("role", "content", "user_id", "retrieval_context", "tools_called", "metadata",
              "additional_metadata")  # fmt: skip
_ROLES = ("user", "assistant")
_TOOL_CALL_KEYS = ("name", "input_parameters", "output", "description", "reasoning", "type")
_DEEPEVAL_KEPT = ("scenario", "user_description", "chatbot_role", "context", "name", "comments",
                  "tags", "custom_column_key_values")  # fmt: skip


@dataclass
class Converted:
    """A sample's fields, and where in the row each turn and step came from (a sample field's
    path, ``turns[1].steps[0]``, to the row's, ``user_input[4].tool_calls[0]``)."""

    fields: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict)

    def describe(self, problem: Problem) -> str:
        """``problem`` in words that also say where in the row the field came from."""
        best = ""
        for prefix in self.origins:
            inside = problem.field == prefix or problem.field.startswith(
                (prefix + ".", prefix + "[")
            )
            if inside and len(prefix) > len(best):
                best = prefix
        if not best:
            return str(problem)
        return f"field '{problem.field}' (from {self.origins[best]}): {problem.message}"


class _Turns:
    """Turns being built, with the origins of each turn and step."""

    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self.origins: dict[str, str] = {}

    def open(self, question: str | None, where: str) -> dict[str, Any]:
        self.turns.append({"question": question, "steps": [], "answer": None, "metadata": {}})
        self.origins[f"turns[{len(self.turns) - 1}]"] = where
        return self.turns[-1]

    def current(self, where: str) -> dict[str, Any]:
        return self.turns[-1] if self.turns else self.open(None, where)

    def step(self, step: dict[str, Any], where: str) -> dict[str, Any]:
        steps = self.turns[-1]["steps"]
        self.origins[f"turns[{len(self.turns) - 1}].steps[{len(steps)}]"] = where
        steps.append(step)
        return step


def ragas_fields(cells: dict[str, Any], n: int, source: Source) -> Converted:
    """The fields of a ragas MultiTurnSample row (``user_input`` a list of messages)."""
    get = cells.get
    for col in _RAGAS_SINGLE_TURN:
        if get(col) is not None:
            raise DataError(
                f"field {col!r}: belongs to a single-turn sample, and 'user_input' is a list of "
                "messages (a multi-turn sample): an ai message's metadata.retrieved_contexts "
                "holds what it retrieved"
            )
    built = _Turns()
    pending: list[dict[str, Any]] = []  # the tool calls of the last ai message not yet answered
    for i, raw in enumerate(structured(get("user_input"), "user_input", source)):
        where = f"user_input[{i}]"
        msg = _object(raw, where, _MESSAGE_KEYS)
        kind = _choice(msg, "type", _MESSAGE_TYPES, where)
        content = _text(msg.get("content"), f"{where}.content")
        meta = dict(_object(msg.get("metadata", {}), f"{where}.metadata"))
        if kind != "ai" and "tool_calls" in msg:
            raise DataError(f"field '{where}.tool_calls': only an ai message makes tool calls")
        if kind == "human":
            built.open(content, where)["metadata"].update(meta)
            pending = []
            continue
        turn = built.current(where)
        if kind == "tool":
            if not pending:
                raise DataError(
                    f"field '{where}': a tool message answers a tool call of the ai message "
                    "before it, and no call is left unanswered"
                )
            pending.pop(0)["result"] = content
        else:
            retrieval = {k: meta.pop(k) for k in _RAGAS_RETRIEVAL if k in meta}
            if retrieval:
                built.step(_ragas_retrieval(retrieval, f"{where}.metadata"), f"{where}.metadata")
            pending = [
                built.step(
                    _ragas_call(call, f"{where}.tool_calls[{j}]"), f"{where}.tool_calls[{j}]"
                )
                for j, call in enumerate(_list(msg.get("tool_calls", []), f"{where}.tool_calls"))
            ]
            turn["answer"] = content or None
        turn["metadata"].update(meta)
    fields: dict[str, Any] = {"id": get("id", f"row-{n}"), "turns": built.turns}
    origins = dict(built.origins)
    if get("reference") is not None:
        fields["goal"] = get("reference")
        origins["goal"] = "reference"
    expected = get("reference_tool_calls")
    if expected is not None:
        calls = []
        for j, raw in enumerate(
            _list(structured(expected, "reference_tool_calls", source), "reference_tool_calls")
        ):
            call = _ragas_call(raw, f"reference_tool_calls[{j}]")
            calls.append({"tool": call["tool"], "arguments": call["arguments"]})
            origins[f"expected_tools[0].calls[{j}]"] = f"reference_tool_calls[{j}]"
        fields["expected_tools"] = [{"calls": calls, "order": "strict"}]
    fields["metadata"] = {
        col: structured(get(col), col, source) if col in _RAGAS_STRUCTURED else get(col)
        for col in _RAGAS_KEPT
        if get(col) is not None
    }
    return Converted(fields, origins)


def _ragas_retrieval(meta: dict[str, Any], where: str) -> dict[str, Any]:
    texts = _list(meta.get("retrieved_contexts", []), f"{where}.retrieved_contexts")
    if "retrieved_context_ids" not in meta:
        return {"contexts": texts}
    ids = _list(meta["retrieved_context_ids"], f"{where}.retrieved_context_ids")
    if len(ids) != len(texts):
        raise DataError(
            f"field '{where}.retrieved_context_ids': {len(ids)} ids for {len(texts)} "
            "retrieved_contexts"
        )
    return {"contexts": [{"id": i, "text": t} for i, t in zip(ids, texts)]}


def _ragas_call(raw: Any, where: str) -> dict[str, Any]:
    call = _object(raw, where, ("name", "args"))
    name = _text(call.get("name"), f"{where}.name")
    args = call.get("args")
    if args is not None:
        args = _object(args, f"{where}.args")
    return {"tool": name, "arguments": args, "result": None}


def deepeval_fields(cells: dict[str, Any], n: int, source: Source) -> Converted:
    """The fields of a DeepEval ConversationalTestCase row."""
    get = cells.get
    built = _Turns()
    for i, raw in enumerate(_list(structured(get("turns"), "turns", source), "turns")):
        where = f"turns[{i}]"
        item = _object(raw, where, _TURN_KEYS)
        role = _choice(item, "role", _ROLES, where)
        content = _text(item.get("content"), f"{where}.content")
        meta = {
            **_object(item.get("metadata", {}), f"{where}.metadata"),
            **_object(item.get("additional_metadata", {}), f"{where}.additional_metadata"),
        }
        if "user_id" in item:
            meta["user_id"] = item["user_id"]
        if role == "user":
            for key in ("retrieval_context", "tools_called"):
                if key in item:
                    raise DataError(f"field '{where}.{key}': only an assistant turn has {key}")
            built.open(content, where)["metadata"].update(meta)
            continue
        turn = built.current(where)
        if "retrieval_context" in item:
            contexts = _list(item["retrieval_context"], f"{where}.retrieval_context")
            built.step(
                {"contexts": [_deepeval_context(c) for c in contexts]}, f"{where}.retrieval_context"
            )
        for j, call in enumerate(_list(item.get("tools_called", []), f"{where}.tools_called")):
            built.step(
                _deepeval_call(call, f"{where}.tools_called[{j}]"), f"{where}.tools_called[{j}]"
            )
        turn["answer"] = content or None
        turn["metadata"].update(meta)
    metadata = {col: get(col) for col in _DEEPEVAL_KEPT if get(col) is not None}
    for col in ("metadata", "additional_metadata"):
        metadata.update(_object(structured(get(col), col, source) or {}, col))
    fields = {"id": get("id", f"row-{n}"), "turns": built.turns, "metadata": metadata}
    origins = dict(built.origins)
    if get("expected_outcome") is not None:
        fields["goal"] = get("expected_outcome")
        origins["goal"] = "expected_outcome"
    return Converted(fields, origins)


def _deepeval_context(item: Any) -> Any:
    # DeepEval's RetrievedContextData {context, source}: the text and the document it is from.
    if isinstance(item, dict) and set(item) == {"context", "source"}:
        return {"text": item["context"], "doc_id": item["source"]}
    return item


def _deepeval_call(raw: Any, where: str) -> dict[str, Any]:
    call = _object(raw, where, _TOOL_CALL_KEYS)
    name = _text(call.get("name"), f"{where}.name")
    args = _object(call.get("input_parameters", {}), f"{where}.input_parameters")
    return {"tool": name, "arguments": args, "result": call.get("output")}


# --- shapes, with errors in the row's words ----------------------------------------------------


def _object(value: Any, where: str, legal: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``value`` as an object whose null values are left out (Arrow fills a struct's absent
    fields with them); an error for another value or a key outside ``legal``."""
    if not isinstance(value, dict):
        raise DataError(f"field '{where}': expected an object, got {describe_value(value)}")
    for key in value:
        if legal is not None and key not in legal:
            raise DataError(f"field '{where}': {unknown_key_message(str(key), legal)}")
    return {k: v for k, v in value.items() if v is not None}


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise DataError(f"field '{where}': expected a list, got {describe_value(value)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        if value is None:
            raise DataError(f"field '{where}': required but missing (expected a string)")
        raise DataError(f"field '{where}': expected a string, got {describe_value(value)}")
    return value


def _choice(obj: dict[str, Any], key: str, legal: tuple[str, ...], where: str) -> str:
    value = obj.get(key)
    if value not in legal:
        got = "missing" if value is None else describe_value(value)
        raise DataError(f"field '{where}.{key}': expected one of {', '.join(legal)}, got {got}")
    return str(value)
