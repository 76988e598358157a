"""The opentelemetry-sdk side of :mod:`rag_judge.report.otel`: a processor that exports in
fixed batches and counts what arrived, and an exporter of OTLP-JSON lines. Only imported
when a report is exported (the ``otel`` extra)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import requests
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LogRecordProcessor,
    ReadableLogRecord,
    ReadWriteLogRecord,
)
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

__all__ = [
    "Batches",
    "JsonLinesExporter",
    "LoggerProvider",
    "OTLPLogExporter",
    "Resource",
    "WatchedSession",
    "context_of",
]


def context_of(trace_id: int | None, span_id: int | None) -> Context:
    """A context whose current span is the evaluated one, or an empty one (no link). Never the
    caller's current context: a run inside a span would link every event to it."""
    if trace_id is None:
        return Context()
    span = SpanContext(trace_id, span_id or 0, is_remote=True, trace_flags=TraceFlags(1))
    return set_span_in_context(NonRecordingSpan(span), Context())


class Batches(LogRecordProcessor):
    """Exports every ``size`` records, synchronously, and counts those that arrived. The SDK's
    batch processor drops records past its queue and says nothing; a run has more values
    than a queue holds. After a failed batch the destination is not tried again: a dead
    endpoint costs one timeout, not one per batch."""

    def __init__(
        self,
        destination: str,
        exporter: LogRecordExporter,
        size: int,
        session: WatchedSession | None = None,
    ) -> None:
        self.destination = destination
        self.exporter = exporter
        self.size = size
        self.session = session
        self.pending: list[ReadableLogRecord] = []
        self.exported = 0
        self.failed = False
        self.error: str | None = None

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        resource = log_record.resource or Resource.create({})
        readable = ReadableLogRecord(
            log_record=log_record.log_record,
            resource=resource,
            instrumentation_scope=log_record.instrumentation_scope,
            limits=log_record.limits,
        )
        self.pending.append(readable)
        if len(self.pending) >= self.size:
            self._export()

    def _export(self) -> None:
        batch, self.pending = self.pending, []
        if not batch or self.failed:
            return
        try:
            result = self.exporter.export(batch)
        except Exception as exc:  # an exporter must not take the run down with it
            self.error = f"{type(exc).__name__}: {exc}"
            result = LogRecordExportResult.FAILURE
        if result is LogRecordExportResult.SUCCESS:
            self.exported += len(batch)
        else:
            self.failed = True

    def reason(self, logged: Sequence[str]) -> str | None:
        """Why the destination failed (None: it did not): the exception, else what the HTTP
        session saw, else the exporter's last error line."""
        if not self.failed:
            return None
        problem = self.session.problem if self.session is not None else None
        return self.error or problem or (logged[-1] if logged else "the export failed")

    def shutdown(self) -> None:
        self._export()
        self.exporter.shutdown()  # type: ignore[no-untyped-call]  # untyped in the SDK

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._export()
        return not self.failed


class WatchedSession(requests.Session):
    """The OTLP exporter's HTTP session, keeping why its last request failed: the exporter
    logs only that it failed ("due to timeout, max retries or shutdown")."""

    def __init__(self) -> None:
        super().__init__()
        self.problem: str | None = None

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            response = super().request(*args, **kwargs)
        except requests.RequestException as exc:
            # urllib3's text nests the reason three deep; "[Errno 111] Connection refused".
            errno = _ERRNO.search(str(exc))
            self.problem = errno.group(0) if errno else f"{type(exc).__name__}: {exc}"[:300]
            raise
        if response.status_code >= 400:
            self.problem = f"HTTP {response.status_code} {response.reason}"
        return response


_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")


class JsonLinesExporter(LogRecordExporter):
    """Appends each batch to a file as one line of OTLP-JSON: an ``ExportLogsServiceRequest``
    in the protobuf JSON mapping, with the OTLP/JSON rules (hex trace and span ids, integer
    enums), as the OpenTelemetry Collector's file exporter writes it. A file that cannot be
    written raises; :class:`Batches` reports it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        request = MessageToDict(encode_logs(batch), use_integers_for_enums=True)
        self._file.write(json.dumps(_hex_ids(request), ensure_ascii=False) + "\n")
        self._file.flush()
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _hex_ids(request: dict[str, Any]) -> dict[str, Any]:
    # The protobuf JSON mapping writes bytes as base64; OTLP/JSON writes ids as hex. An event
    # has no body: the encoder's empty one is left out.
    for resource_logs in request.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
                if record.get("body") == {}:
                    del record["body"]
    return request
