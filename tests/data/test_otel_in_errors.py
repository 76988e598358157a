"""OpenTelemetry traces in: shapes the reader does not know are errors that name the file, the
span and the attribute."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_judge.data._otel_spans import _oi
from rag_judge.data.otel import read_otlp
from rag_judge.errors import DataError
from tests.data.otel_traces import CHAIN, KIND, LLM, RETRIEVER, TOOL, Recorder, rag_chain, sid, tid


def error_of(tmp_path: Path, build: Any) -> str:
    rec = Recorder()
    build(rec)
    path = rec.write(tmp_path / "bad.json")
    with pytest.raises(DataError) as info:
        read_otlp(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    return message


def test_unknown_shapes_are_errors_naming_the_span_and_attribute(tmp_path: Path) -> None:
    def kind(rec: Recorder) -> None:
        with rec.span("odd", **{KIND: "WIDGET"}):
            pass

    assert (
        f"span 'odd' (id {sid(1)}, trace {tid(1)}): attribute 'openinference.span.kind': "
        "unknown span kind 'WIDGET'; known: TOOL, CHAIN, LLM, RETRIEVER" in error_of(tmp_path, kind)
    )

    def score(rec: Recorder) -> None:
        with (
            rec.span("rag", **{KIND: CHAIN, "input.value": "q"}),
            rec.span(
                "ret", **{KIND: RETRIEVER}, **{"retrieval.documents.0.document.score": "high"}
            ),
        ):
            pass

    assert error_of(tmp_path, score).endswith(
        f"span 'ret' (id {sid(2)}, trace {tid(1)}): attribute "
        "'retrieval.documents.0.document.score': expected a number, got the string 'high'"
    )

    def gap(rec: Recorder) -> None:
        with rec.span("ret", **{KIND: RETRIEVER, "input.value": "q"},
                      **{"retrieval.documents.1.document.id": "d2"}):  # fmt: skip
            pass

    assert error_of(tmp_path, gap).endswith(
        f"span 'ret' (id {sid(1)}, trace {tid(1)}): attribute 'retrieval.documents.0': missing"
    )

    def nameless_tool(rec: Recorder) -> None:
        with rec.span("rag", **{KIND: CHAIN, "input.value": "q"}), rec.span("tool", **{KIND: TOOL}):
            pass

    assert error_of(tmp_path, nameless_tool).endswith(
        f"span 'tool' (id {sid(2)}, trace {tid(1)}): attribute 'tool.name': expected the "
        "tool's name, got null"
    )

    def no_question(rec: Recorder) -> None:
        with rec.span("rag", **{KIND: CHAIN, "output.value": "a"}):
            pass

    assert error_of(tmp_path, no_question).endswith(
        f"span 'rag' (id {sid(1)}, trace {tid(1)}): attribute 'input.value': no question: "
        "the trace records none"
    )

    def json_input(rec: Recorder) -> None:
        value = json.dumps({"a": "1", "b": "2"})
        with rec.span(
            "rag", **{KIND: CHAIN, "input.value": value, "input.mime_type": "application/json"}
        ):
            pass

    assert "attribute 'input.value': a JSON object whose text is not found" in error_of(
        tmp_path, json_input
    )

    def two_sessions(rec: Recorder) -> None:
        root = {KIND: CHAIN, "input.value": "q", "session.id": "s1"}
        with rec.span("rag", **root), rec.span("llm", **{KIND: LLM, "session.id": "s2"}):
            pass

    assert f"trace {tid(1)} is in two sessions: 's1' (span 'rag'" in error_of(
        tmp_path, two_sessions
    )

    def nothing(rec: Recorder) -> None:
        with rec.span("GET /", **{"http.method": "GET"}):
            pass

    assert "no span has 'openinference.span.kind' or 'gen_ai.operation.name'" in error_of(
        tmp_path, nothing
    )


def test_bad_files(tmp_path: Path) -> None:
    lines = tmp_path / "x.jsonl"
    lines.write_text('{"resourceSpans": []}\n{"id": "q1"}\n')
    with pytest.raises(
        DataError, match=re.escape(f"{lines}:2: expected an OTLP-JSON trace export")
    ):
        read_otlp(lines)
    lines.write_text('{"resourceSpans": []}\n{"resourceSpans": [\n')
    with pytest.raises(DataError, match=re.escape(f"{lines}:2: invalid JSON")):
        read_otlp(lines)
    lines.write_text('{"id": "q1",\n "question": "x"}')
    with pytest.raises(DataError, match=re.escape(f"{lines}: expected an OTLP-JSON trace export")):
        read_otlp(lines)
    value = {"key": "n", "value": {"intValue": "many"}}
    span = {"name": "s", "traceId": "00" * 16, "spanId": "00" * 8, "attributes": [value]}
    lines.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    with pytest.raises(DataError, match=re.escape("attribute 'n': not a valid intValue")):
        read_otlp(lines)
    lines.write_text('{"resourceSpans": []}\n')
    with pytest.raises(DataError, match="contains no traces"):
        read_otlp(lines)
    spans = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "s", "traceId": "xyz"}]}]}]}
    lines.write_text(json.dumps(spans))
    at = "resourceSpans[0].scopeSpans[0].spans[0] ('s'): 'traceId'"
    with pytest.raises(DataError, match=re.escape(f"{at}: expected a 16-byte id in hex or base64")):
        read_otlp(lines)


def test_skip_invalid_skips_a_bad_trace_with_a_warning(tmp_path: Path) -> None:
    rec = Recorder()
    rag_chain(rec)
    with rec.span("odd", **{KIND: "WIDGET"}):
        pass
    path = rec.write(tmp_path / "t.json")
    with pytest.warns(UserWarning, match="skipping invalid trace: .*span 'odd'"):
        dataset = read_otlp(path, skip_invalid=True)
    assert [s.id for s in dataset] == [tid(1)]


def test_without_the_conventions_package_the_error_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder()
    rag_chain(rec)
    path = rec.write(tmp_path / "t.json")
    _oi.cache_clear()
    monkeypatch.setitem(sys.modules, "openinference.semconv.trace", None)  # as if not installed
    try:
        with pytest.raises(DataError, match=re.escape("pip install 'rag-judge[otel]'")):
            read_otlp(path)
    finally:
        _oi.cache_clear()
