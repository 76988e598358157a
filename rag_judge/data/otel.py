"""OpenTelemetry traces in: an OTLP-JSON export read as rag-judge samples.

The file is the JSON form of an ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``),
one per file or one per line, as the collector's file exporter and protobuf's
``MessageToJson`` write it. Ids may be hex (the OTLP/JSON spelling) or base64 (protobuf's).

One trace is one sample: a question, what was retrieved, the answer. Traces that share a
session id are one conversation, a turn per trace. What each span kind gives is in
``rag_judge.data._otel_spans``; the catalogue is docs/traces.md, "Traces in".
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag_judge.data._files import read_text
from rag_judge.data._otel_spans import (
    CONVERSATION_ID,
    Role,
    Span,
    _oi,
    answer_of,
    question_of,
    role_of,
    step_of,
)
from rag_judge.data.conversation import RetrievalStep, ToolStep
from rag_judge.data.sample import Dataset, Sample
from rag_judge.errors import DataError
from rag_judge.messages import describe_value

__all__ = ["is_otlp", "read_otlp"]

# The first key of an OTLP-JSON request, in protobuf's two spellings.
_HEAD = re.compile(r'\A\ufeff?\s*\{\s*"(resourceSpans|resource_spans)"\s*:')


def is_otlp(path: Path) -> bool:
    """Whether the file begins as an OTLP-JSON trace export does (its first key is
    ``resourceSpans``); a file that cannot be read is not."""
    try:
        with path.open("rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return _HEAD.match(head.decode("utf-8", errors="replace")) is not None


def read_otlp(paths: str | Path | Sequence[str | Path], *, skip_invalid: bool = False) -> Dataset:
    """The samples of the traces in one or more OTLP-JSON files, in the order the traces (or
    sessions) started. Errors name the file, the span and the attribute; with
    ``skip_invalid`` a bad trace is skipped with a warning."""
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    traces: dict[str, list[tuple[Path, Span]]] = {}
    for path in files:
        for span in _spans(path):
            traces.setdefault(span.trace_id, []).append((path, span))
    turns: list[_Trace] = []
    for trace_id, spans in traces.items():
        path = spans[0][0]
        try:
            turns.append(_trace(trace_id, [s for _, s in spans]))
        except DataError as exc:
            if not skip_invalid:
                raise DataError(f"{path}: {exc}") from None
            warnings.warn(f"skipping invalid trace: {path}: {exc}", stacklevel=2)
    if not turns:
        raise DataError(f"{', '.join(map(str, files))}: contains no traces")
    return Dataset(samples=tuple(_samples(turns)), source=", ".join(map(str, files)))


# --- the file --------------------------------------------------------------------------------


def _spans(path: Path) -> Iterator[Span]:
    for where, request in _requests(path):
        resource_spans = _list(request, "resourceSpans", where)
        for r, resource in enumerate(resource_spans):
            at = f"{where}resourceSpans[{r}]"
            for s, scope in enumerate(_list(_object(resource, at), "scopeSpans", at)):
                scope_at = f"{at}.scopeSpans[{s}]"
                for n, span in enumerate(_list(_object(scope, scope_at), "spans", scope_at)):
                    yield _span(_object(span, f"{scope_at}.spans[{n}]"), f"{scope_at}.spans[{n}]")


def _requests(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each request of the file with where it is (``line 3: ``, or nothing for a file that is
    one request), keys in protobuf's camelCase."""
    text = read_text(path)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # not one JSON document: JSON Lines, or broken (said per line below)
    if isinstance(whole, dict):
        if not ("resourceSpans" in whole or "resource_spans" in whole):
            raise DataError(
                f'{path}: expected an OTLP-JSON trace export ({{"resourceSpans": [...]}}), '
                f"got an object with keys {', '.join(whole) or '(none)'}"
            )
        yield "", _camel(whole)
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}:{lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
            ) from None
        if not isinstance(obj, dict) or not ("resourceSpans" in obj or "resource_spans" in obj):
            raise DataError(
                f"{path}:{lineno}: expected an OTLP-JSON trace export "
                f'({{"resourceSpans": [...]}}), got {describe_value(obj)}'
            )
        yield f"line {lineno}: ", _camel(obj)


def _camel(value: Any) -> Any:
    """Object keys in camelCase: protobuf writes snake_case when asked to keep field names.
    Every object key of OTLP-JSON is a field name (attribute keys are values), so all may be
    converted."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m[1].upper(), k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _object(value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataError(f"{at}: expected an object, got {describe_value(value)}")
    return value


def _list(obj: dict[str, Any], key: str, at: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise DataError(f"{at}: '{key}': expected a list, got {describe_value(value)}")
    return value


def _span(obj: dict[str, Any], at: str) -> Span:
    name = obj.get("name", "")
    trace_id = _id(obj.get("traceId"), 16, f"{at} ({name!r}): 'traceId'")
    span_id = _id(obj.get("spanId"), 8, f"{at} ({name!r}): 'spanId'")
    parent = obj.get("parentSpanId")
    start = obj.get("startTimeUnixNano", 0)
    try:
        start = int(start)
    except (TypeError, ValueError):
        raise DataError(f"{at} ({name!r}): 'startTimeUnixNano': expected nanoseconds") from None
    events = tuple(
        _attributes(_object(e, at).get("attributes", []), at) for e in _list(obj, "events", at)
    )
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_id(parent, 8, f"{at} ({name!r}): 'parentSpanId'") if parent else None,
        name=str(name),
        start=start,
        attributes=_attributes(obj.get("attributes", []), at),
        events=events,
    )


def _id(value: Any, size: int, at: str) -> str:
    """An id as lower-case hex, from hex (OTLP/JSON) or base64 (protobuf's JSON)."""
    if isinstance(value, str):
        if re.fullmatch(rf"[0-9a-fA-F]{{{2 * size}}}", value):
            return value.lower()
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw.hex()
    raise DataError(
        f"{at}: expected a {size}-byte id in hex or base64, got {describe_value(value)}"
    )


def _attributes(items: Any, at: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise DataError(f"{at}: 'attributes': expected a list, got {describe_value(items)}")
    out = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise DataError(
                f"{at}: expected an attribute {{key, value}}, got {describe_value(item)}"
            )
        out[item["key"]] = _value(item.get("value", {}), f"{at}: attribute {item['key']!r}")
    return out


def _value(any_value: Any, at: str) -> Any:
    """An OTLP ``AnyValue`` as a plain value (64-bit integers come as JSON strings)."""
    if not isinstance(any_value, dict) or len(any_value) > 1:
        raise DataError(f"{at}: expected one typed value, got {describe_value(any_value)}")
    for kind, value in any_value.items():
        try:
            if kind in ("stringValue", "boolValue", "bytesValue"):
                return value
            if kind == "intValue":
                return int(value)
            if kind == "doubleValue":
                return float(value)
            if kind == "arrayValue":
                return [_value(v, at) for v in value.get("values", [])]
            if kind == "kvlistValue":
                return _attributes(value.get("values", []), at)
        except (AttributeError, TypeError, ValueError):
            raise DataError(f"{at}: not a valid {kind}: {describe_value(value)}") from None
        raise DataError(f"{at}: unknown value type {kind!r}")
    return None


# --- traces to samples -----------------------------------------------------------------------


@dataclass
class _Trace:
    trace_id: str
    span_id: str
    start: int
    session: str | None
    question: str | None
    answer: str | None
    steps: list[RetrievalStep | ToolStep] = field(default_factory=list)


def _trace(trace_id: str, spans: list[Span]) -> _Trace:
    spans = sorted(spans, key=lambda s: s.start)  # stable: ties keep the file's order
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None or s.parent_id not in ids]
    if len(roots) != 1:
        named = ", ".join(r.where() for r in roots[:3])
        raise DataError(
            f"trace {trace_id} has {len(roots)} root spans ({named or 'a cycle of parents'}): "
            "is it cut short?"
        )
    depth = _depths(spans)
    roles = [(s, role) for s in spans if (role := role_of(s)) is not None]
    if not roles:
        raise DataError(
            f"trace {trace_id}: no span has {_oi().SpanAttributes.OPENINFERENCE_SPAN_KIND!r} or "
            "'gen_ai.operation.name'"
        )
    of = {
        role: [s for s, r in roles if r == role] for role in ("chain", "retriever", "llm", "tool")
    }
    chain = min(of["chain"], key=lambda s: depth[s.span_id], default=None)  # the outermost
    # A retriever inside a retriever (LlamaIndex records both) is the same retrieval: the
    # outermost stands for it.
    inner = _inside(spans, {s.span_id for s, r in roles if r == "retriever"})
    steps = [
        step_of(s, r) for s, r in roles if r == "tool" or (r == "retriever" and s not in inner)
    ]
    question = _first(chain, "chain", of["llm"][:1], question_of)
    if question is None:
        retrievals = [s.query for s in steps if isinstance(s, RetrievalStep) and s.query]
        question = retrievals[0] if retrievals else None
    if question is None:
        span, key = (chain, "input.value") if chain else (roots[0], "input.value")
        if chain is None and of["llm"]:
            span, key = of["llm"][0], "llm.input_messages"
        raise span.error(key, "no question: the trace records none")
    answer = _first(chain, "chain", of["llm"][-1:], answer_of)
    return _Trace(
        trace_id=trace_id,
        span_id=roots[0].span_id,
        start=roots[0].start,
        session=_session(trace_id, spans),
        question=question,
        answer=answer,
        steps=steps,
    )


def _first(chain: Span | None, role: Role, llms: list[Span], read: Any) -> str | None:
    """What the outermost chain says, else what the LLM span says."""
    if chain is not None:
        found: str | None = read(chain, role)
        if found is not None:
            return found
    return read(llms[0], "llm") if llms else None


def _inside(spans: list[Span], ids: set[str]) -> list[Span]:
    """The spans that have an ancestor among ``ids``."""
    parent = {s.span_id: s.parent_id for s in spans}
    out = []
    for span in spans:
        at, seen = span.parent_id, {span.span_id}
        while at in parent and at not in seen:
            if at in ids:
                out.append(span)
                break
            seen.add(at)
            at = parent[at]
    return out


def _depths(spans: list[Span]) -> dict[str, int]:
    parent = {s.span_id: s.parent_id for s in spans}
    out: dict[str, int] = {}
    for span in spans:
        d, at, seen = 0, span.parent_id, {span.span_id}
        while at in parent and at not in seen:
            seen.add(at)
            d, at = d + 1, parent[at]
        out[span.span_id] = d
    return out


def _session(trace_id: str, spans: list[Span]) -> str | None:
    key = _oi().SpanAttributes.SESSION_ID
    found: dict[str, Span] = {}
    for span in spans:
        for name in (key, CONVERSATION_ID):
            value = span.attributes.get(name)
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise span.error(name, f"expected a session id, got {describe_value(value)}")
                found.setdefault(value, span)
    if len(found) > 1:
        (a, sa), (b, sb) = list(found.items())[:2]
        raise DataError(
            f"trace {trace_id} is in two sessions: {a!r} ({sa.where()}) and {b!r} ({sb.where()})"
        )
    return next(iter(found), None)


def _samples(traces: list[_Trace]) -> Iterator[Sample]:
    sessions: dict[str, list[_Trace]] = {}
    for trace in traces:
        if trace.session is not None:
            sessions.setdefault(trace.session, []).append(trace)
    firsts = {min(ts, key=lambda t: t.start).trace_id for ts in sessions.values()}
    for trace in sorted(traces, key=lambda t: t.start):
        if trace.session is None:
            yield _validate(_single(trace), trace)
        elif trace.trace_id in firsts:
            yield _validate(_conversation(trace.session, sessions[trace.session]), trace)


def _single(trace: _Trace) -> dict[str, Any]:
    ids = {"trace_id": trace.trace_id, "span_id": trace.span_id}
    plain: dict[str, Any] = {"id": trace.trace_id, "question": trace.question}
    plain |= {"answer": trace.answer, "metadata": ids}
    if not trace.steps:
        return plain
    if len(trace.steps) == 1 and isinstance(trace.steps[0], RetrievalStep):
        return plain | {"contexts": trace.steps[0].contexts}
    return {"id": trace.trace_id, "turns": [_turn(trace, {})], "metadata": ids}


def _conversation(session: str, traces: list[_Trace]) -> dict[str, Any]:
    traces = sorted(traces, key=lambda t: t.start)
    turns = [_turn(t, {"trace_id": t.trace_id, "span_id": t.span_id}) for t in traces]
    return {"id": session, "turns": turns, "metadata": {"session_id": session}}


def _turn(trace: _Trace, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "question": trace.question,
        "steps": trace.steps,
        "answer": trace.answer,
        "metadata": metadata,
    }


def _validate(fields: dict[str, Any], trace: _Trace) -> Sample:
    try:
        return Sample.model_validate(fields)
    except ValidationError as exc:  # the spans were checked one by one: this is rare
        raise DataError(f"trace {trace.trace_id}: {exc.errors()[0]['msg']}") from None
