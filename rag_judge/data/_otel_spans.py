"""What one span of a trace says, by the OpenInference or the OTel GenAI conventions: its role
(chain, retriever, LLM, tool), and the question, answer, ranking or tool call it holds.

The mapping is catalogued in docs/traces.md, "Traces in". Errors name the span and the
attribute; the reader adds the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import ValidationError

from rag_judge.data.conversation import RetrievalStep, ToolStep
from rag_judge.errors import DataError
from rag_judge.messages import describe_value

__all__ = ["INSTALL_HINT", "Role", "Span", "answer_of", "question_of", "role_of", "step_of"]

INSTALL_HINT = "pip install 'rag-judge[otel]'"

Role = Literal["chain", "retriever", "llm", "tool"]

# The GenAI conventions' names. opentelemetry-semantic-conventions marks them deprecated
# (they moved to their own repository), so they are spelled here rather than imported.
_OPERATION = "gen_ai.operation.name"
_GENAI_ROLES: dict[str, Role | None] = {
    "invoke_agent": "chain",
    "invoke_workflow": "chain",
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "retrieval": "retriever",
    "execute_tool": "tool",
    "embeddings": None,
    "create_agent": None,
}
_INPUT_MESSAGES = "gen_ai.input.messages"
_OUTPUT_MESSAGES = "gen_ai.output.messages"
_PROMPT = "gen_ai.prompt"
_COMPLETION = "gen_ai.completion"
_QUERY_TEXT = "gen_ai.retrieval.query.text"
_DOCUMENTS = "gen_ai.retrieval.documents"
_TOOL_NAME = "gen_ai.tool.name"
_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
_TOOL_RESULT = "gen_ai.tool.call.result"
CONVERSATION_ID = "gen_ai.conversation.id"

# Where a JSON object stands for a text (LangChain records a chain's input as {"question": ..}).
_QUESTION_KEYS = ("question", "query", "input", "user_input")
_ANSWER_KEYS = ("answer", "output", "result", "response", "text")


@dataclass(frozen=True)
class Span:
    """One span as the reader decoded it: ids as lower-case hex, attributes as plain values,
    and each event's attributes."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    attributes: dict[str, Any]
    events: tuple[dict[str, Any], ...]

    def where(self) -> str:
        return f"span {self.name!r} (id {self.span_id}, trace {self.trace_id})"

    def error(self, attribute: str, problem: str) -> DataError:
        return DataError(f"{self.where()}: attribute {attribute!r}: {problem}")


@cache
def _oi() -> Any:
    """The OpenInference conventions' module, or a DataError saying how to install it."""
    try:
        import openinference.semconv.trace as semconv
    except ImportError:
        raise DataError(
            f"reading OpenTelemetry traces needs openinference-semantic-conventions: {INSTALL_HINT}"
        ) from None
    return semconv


def role_of(span: Span) -> Role | None:
    """The span's role, or None for a span neither convention marks (an HTTP call, an
    embedding): such spans are passed over."""
    oi = _oi()
    key = oi.SpanAttributes.OPENINFERENCE_SPAN_KIND
    kinds = oi.OpenInferenceSpanKindValues
    kind = span.attributes.get(key)
    if kind is not None:
        roles: dict[str, Role] = {
            kinds.CHAIN.value: "chain",
            kinds.AGENT.value: "chain",
            kinds.RETRIEVER.value: "retriever",
            kinds.LLM.value: "llm",
            kinds.TOOL.value: "tool",
        }
        known = [k.value for k in kinds]
        if kind not in known:
            raise span.error(key, f"unknown span kind {kind!r}; known: {', '.join(known)}")
        return roles.get(kind)
    operation = span.attributes.get(_OPERATION)
    if operation is None:
        return None
    if operation not in _GENAI_ROLES:
        raise span.error(
            _OPERATION, f"unknown operation {operation!r}; known: {', '.join(_GENAI_ROLES)}"
        )
    return _GENAI_ROLES[operation]


def question_of(span: Span, role: Role) -> str | None:
    """The question a chain or LLM span was asked, or None when it records none."""
    oi = _oi().SpanAttributes
    if role == "llm":
        text = _oi_message(span, oi.LLM_INPUT_MESSAGES, "user")
        if text is not None:
            return text
    if oi.INPUT_VALUE in span.attributes:
        return _text(span, oi.INPUT_VALUE, _QUESTION_KEYS)
    return _genai_message(span, (_INPUT_MESSAGES, _PROMPT), "user")


def answer_of(span: Span, role: Role) -> str | None:
    """The answer a chain or LLM span gave, or None when it records none."""
    oi = _oi().SpanAttributes
    if role == "llm":
        text = _oi_message(span, oi.LLM_OUTPUT_MESSAGES, "assistant")
        if text is not None:
            return text
    if oi.OUTPUT_VALUE in span.attributes:
        return _text(span, oi.OUTPUT_VALUE, _ANSWER_KEYS)
    return _genai_message(span, (_OUTPUT_MESSAGES, _COMPLETION), "assistant")


def step_of(span: Span, role: Role) -> RetrievalStep | ToolStep:
    """The retrieval or tool call a retriever or tool span records."""
    genai = _oi().SpanAttributes.OPENINFERENCE_SPAN_KIND not in span.attributes
    try:
        if role == "retriever":
            return _genai_retrieval(span) if genai else _retrieval(span)
        return _genai_tool(span) if genai else _tool(span)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(f"{span.where()}: {first['msg']}") from None


# --- OpenInference ---------------------------------------------------------------------------


def _retrieval(span: Span) -> RetrievalStep:
    oi = _oi()
    attrs = span.attributes
    prefix = re.escape(oi.SpanAttributes.RETRIEVAL_DOCUMENTS)
    pattern = re.compile(rf"{prefix}\.(\d+)\.document\.(\w+)")
    docs: dict[int, dict[str, tuple[str, Any]]] = {}
    for key, value in attrs.items():
        match = pattern.fullmatch(key)
        if match:
            docs.setdefault(int(match[1]), {})[match[2]] = (key, value)
    doc = oi.DocumentAttributes
    fields = {
        doc.DOCUMENT_ID.split(".")[-1]: "id",
        doc.DOCUMENT_CONTENT.split(".")[-1]: "text",
        doc.DOCUMENT_SCORE.split(".")[-1]: "score",
    }
    contexts = []
    for n in range(len(docs)):
        if n not in docs:  # documents are numbered from 0 without gaps: a gap is a lost rank
            raise span.error(f"{oi.SpanAttributes.RETRIEVAL_DOCUMENTS}.{n}", "missing")
        found = docs[n]
        context = {}
        for name, field in fields.items():
            if name in found:
                key, value = found[name]
                context[field] = _doc_value(span, key, value, field)
        contexts.append(context)
    query = attrs.get(oi.SpanAttributes.INPUT_VALUE)
    if query is not None:
        query = _text(span, oi.SpanAttributes.INPUT_VALUE, _QUESTION_KEYS)
    return RetrievalStep(query=query, contexts=contexts)


def _doc_value(span: Span, key: str, value: Any, field: str) -> Any:
    if field == "score":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise span.error(key, f"expected a number, got {describe_value(value)}")
        return value
    if field == "id" and (isinstance(value, bool) or not isinstance(value, str | int)):
        raise span.error(key, f"expected a string or an integer, got {describe_value(value)}")
    if field == "text" and not isinstance(value, str):
        raise span.error(key, f"expected a string, got {describe_value(value)}")
    return value


def _tool(span: Span) -> ToolStep:
    oi = _oi().SpanAttributes
    attrs = span.attributes
    name = _name(span, oi.TOOL_NAME)
    if oi.TOOL_PARAMETERS in attrs:
        arguments = _object(span, oi.TOOL_PARAMETERS)
    elif oi.INPUT_VALUE in attrs:
        # A tool's input is its arguments when it is a JSON object, else its one argument.
        value = _json_or_text(attrs[oi.INPUT_VALUE])
        arguments = value if isinstance(value, dict) else {"input": value}
    else:
        arguments = {}
    result = attrs.get(oi.OUTPUT_VALUE)
    if attrs.get(oi.OUTPUT_MIME_TYPE) == "application/json" and isinstance(result, str):
        result = _json(span, oi.OUTPUT_VALUE, result)
    return ToolStep(tool=name, arguments=arguments, result=result)


def _name(span: Span, key: str) -> str:
    name = span.attributes.get(key)
    if not isinstance(name, str) or not name:
        raise span.error(key, f"expected the tool's name, got {describe_value(name)}")
    return name


def _oi_message(span: Span, prefix: str, role: str) -> str | None:
    """The content of the last message of ``role`` among ``prefix.N.message.*``."""
    msg = _oi().MessageAttributes
    found = None
    n = 0
    while f"{prefix}.{n}.{msg.MESSAGE_ROLE}" in span.attributes:
        key = f"{prefix}.{n}.{msg.MESSAGE_CONTENT}"
        if span.attributes[f"{prefix}.{n}.{msg.MESSAGE_ROLE}"] == role and key in span.attributes:
            content = span.attributes[key]
            if not isinstance(content, str):
                raise span.error(key, f"expected a string, got {describe_value(content)}")
            found = content
        n += 1
    return found


def _text(span: Span, key: str, names: tuple[str, ...]) -> str:
    """``input.value``/``output.value`` as text: a string, or a JSON object that holds it under
    one of ``names`` or as its one text field."""
    value = span.attributes[key]
    mime = span.attributes.get(key.replace(".value", ".mime_type"))
    if isinstance(value, str) and mime == "application/json":
        value = _json(span, key, value)
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        texts = {k: v for k, v in value.items() if isinstance(v, str)}
        name = next((n for n in names if n in texts), None)
        if name is None and len(texts) == 1:
            name = next(iter(texts))
        if name is not None:
            return texts[name]
        raise span.error(
            key,
            f"a JSON object whose text is not found: expected one text field, or one of "
            f"{', '.join(names)}; got keys {', '.join(value) or '(none)'}",
        )
    raise span.error(key, f"expected text, got {describe_value(value)}")


# --- GenAI -----------------------------------------------------------------------------------


def _genai_message(span: Span, keys: tuple[str, ...], role: str) -> str | None:
    """The text of the last ``role`` message under the first of ``keys`` the span or one of
    its events holds: a JSON list of messages, or plain text."""
    for key in keys:
        for attrs in (span.attributes, *span.events):
            if key in attrs:
                return _message_text(span, key, _json_or_text(attrs[key]), role)
    return None


def _message_text(span: Span, key: str, value: Any, role: str) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise span.error(key, f"expected a list of messages or text, got {describe_value(value)}")
    found = None
    for message in value:
        if isinstance(message, dict) and message.get("role") == role:
            found = _content(message)
    if found is None:
        raise span.error(key, f"no {role} message with text content")
    return found


def _content(message: dict[str, Any]) -> str | None:
    # The older shape is {"role", "content"}; the current one {"role", "parts": [{"type":
    # "text", "content"}]}.
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [
            p["content"]
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
        ]
        return "".join(texts) if texts else None
    return None


def _genai_retrieval(span: Span) -> RetrievalStep:
    docs = _json_or_text(span.attributes[_DOCUMENTS])
    if not isinstance(docs, list):
        raise span.error(
            _DOCUMENTS, f"expected a JSON list of documents, got {describe_value(docs)}"
        )
    contexts = []
    for n, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise span.error(f"{_DOCUMENTS}[{n}]", f"expected an object, got {describe_value(doc)}")
        context = {"id": doc.get("id"), "score": doc.get("score")}
        context["text"] = doc.get("content", doc.get("text", ""))
        for field, value in context.items():
            if value is not None:
                _doc_value(span, f"{_DOCUMENTS}[{n}].{field}", value, field)
        contexts.append({k: v for k, v in context.items() if v is not None})
    query = span.attributes.get(_QUERY_TEXT)
    if query is not None and not isinstance(query, str):
        raise span.error(_QUERY_TEXT, f"expected a string, got {describe_value(query)}")
    return RetrievalStep(query=query, contexts=contexts)


def _genai_tool(span: Span) -> ToolStep:
    name = _name(span, _TOOL_NAME)
    arguments = _object(span, _TOOL_ARGUMENTS) if _TOOL_ARGUMENTS in span.attributes else {}
    result = _json_or_text(span.attributes.get(_TOOL_RESULT))
    return ToolStep(tool=name, arguments=arguments, result=result)


# --- values ----------------------------------------------------------------------------------


def _object(span: Span, key: str) -> dict[str, Any]:
    value = span.attributes[key]
    if isinstance(value, str):
        value = _json(span, key, value)
    if not isinstance(value, dict):
        raise span.error(key, f"expected a JSON object of arguments, got {describe_value(value)}")
    return value


def _json(span: Span, key: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise span.error(key, f"invalid JSON: {exc.msg} (column {exc.colno})") from None


def _json_or_text(value: Any) -> Any:
    """A string that holds a JSON list or object, decoded; anything else as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
