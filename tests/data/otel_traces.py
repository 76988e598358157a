"""Traces for the trace-ingest tests, recorded by the real opentelemetry-sdk with
OpenInference attributes and encoded to OTLP-JSON by opentelemetry-proto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToJson
from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Span

from rag_judge.data import Context

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
CHAIN = OpenInferenceSpanKindValues.CHAIN.value
AGENT = OpenInferenceSpanKindValues.AGENT.value
RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
LLM = OpenInferenceSpanKindValues.LLM.value
TOOL = OpenInferenceSpanKindValues.TOOL.value


class CountingIds(IdGenerator):
    """Trace ids 1, 2, ... and span ids 1, 2, ...: ids a test can write down."""

    def __init__(self) -> None:
        self.traces = 0
        self.spans = 0

    def generate_trace_id(self) -> int:
        self.traces += 1
        return self.traces

    def generate_span_id(self) -> int:
        self.spans += 1
        return self.spans


def tid(n: int) -> str:
    return f"{n:032x}"


def sid(n: int) -> str:
    return f"{n:016x}"


class Recorder:
    """A tracer whose spans start at the times a test gives (a fake clock, in ns)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(id_generator=CountingIds())
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("test")
        self.clock = 1_000

    @contextmanager
    def span(self, name: str, start: int | None = None, **attributes: Any) -> Iterator[Span]:
        self.clock = self.clock + 10 if start is None else start
        with self.tracer.start_as_current_span(
            name, start_time=self.clock, attributes=attributes
        ) as span:
            yield span

    def request(self) -> dict[str, Any]:
        """The finished spans as one OTLP-JSON request (protobuf's JSON: base64 ids)."""
        loaded: dict[str, Any] = json.loads(
            MessageToJson(encode_spans(self.exporter.get_finished_spans()))
        )
        return loaded

    def write(self, path: Path) -> Path:
        path.write_text(MessageToJson(encode_spans(self.exporter.get_finished_spans())))
        return path


def docs(*items: tuple[str, str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n, (doc_id, text, score) in enumerate(items):
        at = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.{n}."
        out[at + DocumentAttributes.DOCUMENT_ID] = doc_id
        out[at + DocumentAttributes.DOCUMENT_CONTENT] = text
        out[at + DocumentAttributes.DOCUMENT_SCORE] = score
    return out


def messages(prefix: str, *items: tuple[str, str]) -> dict[str, Any]:
    out = {}
    for n, (role, content) in enumerate(items):
        out[f"{prefix}.{n}.{MessageAttributes.MESSAGE_ROLE}"] = role
        out[f"{prefix}.{n}.{MessageAttributes.MESSAGE_CONTENT}"] = content
    return out


def rag_chain(rec: Recorder, question: str = "Which ocean is the largest?", **root: Any) -> None:
    """A RAG chain: CHAIN root, RETRIEVER, LLM."""
    with rec.span(
        "rag", **{KIND: CHAIN, "input.value": question, "output.value": "The Pacific."}, **root
    ):
        with rec.span("retrieve", **{KIND: RETRIEVER, "input.value": "largest ocean"},
                      **docs(("d3", "The Pacific Ocean is the largest.", 0.9),
                             ("d9", "The Sahara is a desert.", 0.2))):  # fmt: skip
            pass
        llm = messages(
            SpanAttributes.LLM_INPUT_MESSAGES, ("system", "Be brief."), ("user", question)
        )
        llm |= messages(SpanAttributes.LLM_OUTPUT_MESSAGES, ("assistant", "The Pacific."))
        with rec.span("llm", **{KIND: LLM}, **llm):
            pass


PACIFIC = (
    Context(id="d3", text="The Pacific Ocean is the largest.", score=0.9),
    Context(id="d9", text="The Sahara is a desert.", score=0.2),
)
