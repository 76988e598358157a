"""A report's values as OpenTelemetry GenAI evaluation events (``gen_ai.evaluation.result``).

One event per (sample, metric) value, and per (unit, metric) value of a conversation scored per
turn or per step. A sample whose ``metadata`` holds ``trace_id`` (and ``span_id``) as hex
strings gets events parented to that span; others get events without a link. The events are
log records of the real opentelemetry-sdk (the events API is logs), exported as OTLP-JSON
lines to a file and/or to an OTLP/HTTP endpoint. A failed export is a returned status, a log
line and (through :func:`export_run`) a warning of the report; it never raises.
docs/traces.md lists every attribute.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rag_judge._version import __version__
from rag_judge.messages import redact_url, scrub_url
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Report,
    ReportWarning,
    SampleResult,
    UnitResult,
    WarningKind,
)
from rag_judge.report.thresholds import meets, parse_threshold

__all__ = [
    "EVENT_NAME",
    "OTEL_INSTALL_HINT",
    "SIGNATURE_ATTRIBUTE",
    "Evaluation",
    "ExportStatus",
    "evaluations",
    "export_results",
    "export_run",
]

log = logging.getLogger("rag_judge")

OTEL_INSTALL_HINT = "pip install 'rag-judge[otel]'"
EVENT_NAME = "gen_ai.evaluation.result"
# The semantic conventions have no evaluator-version attribute: the metric's rag-judge
# signature (every option that changes its number) goes in an attribute of our own namespace.
SIGNATURE_ATTRIBUTE = "rag_judge.signature"
BATCH = 512  # events per export request


@dataclass(frozen=True)
class Evaluation:
    """One event's content: a value (or why there is none) and the span it evaluated."""

    sample_id: str
    metric: str
    score: float | None
    label: str | None  # "pass"/"fail" against a per-unit threshold of the config
    explanation: str | None  # the judge's reason, or the failure's message
    error: str | None  # the failure's kind, when the value failed
    signature: str | None
    trace_id: int | None
    span_id: int | None
    turn: int | None = None
    step: int | None = None

    def attributes(self) -> dict[str, str | int | float]:
        """The event's attributes, by their semantic-convention names."""
        found: dict[str, str | int | float | None] = {
            "gen_ai.evaluation.name": self.metric,
            "gen_ai.evaluation.score.value": self.score,
            "gen_ai.evaluation.score.label": self.label,
            "gen_ai.evaluation.explanation": self.explanation,
            "error.type": self.error,
            SIGNATURE_ATTRIBUTE: self.signature,
            "rag_judge.sample.id": self.sample_id,
            "rag_judge.turn": self.turn,
            "rag_judge.step": self.step,
        }
        return {k: v for k, v in found.items() if v is not None}


@dataclass(frozen=True)
class ExportStatus:
    """How one destination's export went: events sent and exported, and the first error."""

    destination: str
    events: int
    exported: int
    linked: int  # events parented to a span of the sample's trace
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exported == self.events

    def describe(self) -> str:
        """One line for the run's output."""
        if not self.ok:
            return f"otel: {_problem(self)}"
        return (
            f"otel: {self.exported} evaluation events ({self.linked} linked to their trace) "
            f"exported to {self.destination}"
        )


def evaluations(report: Report) -> Iterator[Evaluation]:
    """Every value of the report as an event's content, sample by sample. A value that does
    not apply to its sample (``not_applicable``) is no value and has no event."""
    signatures = {m: s.render() for m, s in report.signatures.items()}
    thresholds = _thresholds(report.config)
    for result in report.samples:
        sample = result.sample
        turns = (sample.turns or ()) if sample is not None else ()
        rows: list[SampleResult | UnitResult] = [result, *result.units]
        for row in rows:
            # A turn's own trace (a conversation read from traces keeps one a turn), else the
            # sample's.
            turn = row.turn if isinstance(row, UnitResult) else None
            own = turns[turn].metadata if turn is not None and turn < len(turns) else {}
            trace_id, span_id = _link(own)
            if trace_id is None:
                trace_id, span_id = _link(sample.metadata if sample is not None else {})
            for metric in [*row.scores, *(m for m in row.errors if m not in row.scores)]:
                failure: Failure | None = row.errors.get(metric)
                if failure is not None and failure.kind is FailureKind.NOT_APPLICABLE:
                    continue
                score = row.scores.get(metric)
                score = None if score is None or math.isnan(score) else float(score)
                judgment = row.judgments.get(metric)
                reason = getattr(judgment, "reason", "") or None
                yield Evaluation(
                    sample_id=result.id,
                    metric=metric,
                    score=score,
                    label=_label(score, thresholds.get(metric)),
                    explanation=failure.message if failure is not None else reason,
                    error=failure.kind.value if failure is not None else None,
                    signature=signatures.get(metric),
                    trace_id=trace_id,
                    span_id=span_id,
                    turn=turn,
                    step=row.step if isinstance(row, UnitResult) else None,
                )


def export_results(
    report: Report,
    *,
    file: str | Path | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> list[ExportStatus]:
    """Send every value of ``report`` as a ``gen_ai.evaluation.result`` event: appended to
    ``file`` as OTLP-JSON lines (one ``ExportLogsServiceRequest`` a line) and/or posted to the
    OTLP/HTTP ``endpoint`` (a bare ``http://host:4318`` gets ``/v1/logs``). One status per
    destination; a failure is in its status and logged, never raised (a missing
    opentelemetry package is raised, with the install hint)."""
    try:
        from rag_judge.report import _otel_sdk as sdk
    except ImportError as exc:
        raise ImportError(f"exporting to OpenTelemetry needs it: {OTEL_INSTALL_HINT}") from exc
    processors: list[sdk.Batches] = []
    if file is not None:
        exporter = sdk.JsonLinesExporter(Path(file))
        processors.append(sdk.Batches(str(file), exporter, BATCH))
    if endpoint is not None:
        url = logs_url(endpoint)
        session = sdk.WatchedSession()
        http = sdk.OTLPLogExporter(
            endpoint=url, headers=dict(headers or {}), timeout=timeout, session=session
        )
        processors.append(sdk.Batches(url, http, BATCH, session))
    if not processors:
        raise ValueError("export_results needs a file or an endpoint")
    resource = sdk.Resource.create(
        {"service.name": "rag-judge", "service.version": __version__,
         "rag_judge.experiment": str(report.config.get("name", ""))}
    )  # fmt: skip
    provider = sdk.LoggerProvider(resource=resource, shutdown_on_exit=False)
    for processor in processors:
        provider.add_log_record_processor(processor)
    logger = provider.get_logger("rag_judge", __version__)
    when = _nanos(report.created)
    events = linked = 0
    with _ExporterErrors() as reasons:
        for evaluation in evaluations(report):
            events += 1
            linked += evaluation.trace_id is not None
            logger.emit(
                timestamp=when,
                context=sdk.context_of(evaluation.trace_id, evaluation.span_id),
                event_name=EVENT_NAME,
                attributes=evaluation.attributes(),
            )
        provider.shutdown()  # exports what is left
    statuses = [
        ExportStatus(
            destination=_shown(p.destination, endpoint),
            events=events,
            exported=p.exported,
            linked=linked,
            error=_scrubbed(p.reason(reasons), endpoint),
        )
        for p in processors
    ]
    for status in statuses:
        if not status.ok:
            log.warning("otel: %s", _problem(status))
    return statuses


def export_run(
    report: Report,
    out_dir: str | Path,
    *,
    file: str | Path | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> list[ExportStatus]:
    """What ``rag-judge run`` does after writing the report into ``out_dir``: export (a
    relative ``file`` goes into ``out_dir``); a failed destination becomes a warning of the
    report, and the report is written again with it."""
    if file is not None and not Path(file).is_absolute():
        file = Path(out_dir) / file
    try:
        statuses = export_results(
            report, file=file, endpoint=endpoint, headers=headers, timeout=timeout
        )
    except Exception as exc:  # the extra is missing, or worse: the report stands, and says so
        # The message only, scrubbed: a traceback could quote the endpoint's token.
        log.warning("otel: %s", _scrubbed(str(exc), endpoint))
        events = sum(1 for _ in evaluations(report))
        places = [str(file)] if file is not None else []
        places += [redact_url(logs_url(endpoint))] if endpoint is not None else []
        error = _scrubbed(str(exc), endpoint)
        statuses = [ExportStatus(p, events, 0, 0, error) for p in places]
    failed = [s for s in statuses if not s.ok]
    for status in failed:
        report.warnings.append(
            ReportWarning(
                kind=WarningKind.OTEL_EXPORT,
                metric="otel",
                value=status.events - status.exported,
                threshold=0,
                message=_problem(status),
            )
        )
    if failed:
        from rag_judge.report import write_report  # the package's writer, beside this module

        write_report(report, out_dir)
    return statuses


def _shown(destination: str, endpoint: str | None) -> str:
    """A destination as a report shows it: the endpoint's URL without its secrets."""
    if endpoint is not None and destination == logs_url(endpoint):
        return redact_url(destination)
    return destination


def _scrubbed(error: str | None, endpoint: str | None) -> str | None:
    """An error message with the secret parts of the endpoint's URL hidden."""
    return scrub_url(error, endpoint) if error is not None and endpoint is not None else error


def logs_url(endpoint: str) -> str:
    """The OTLP/HTTP logs URL: ``endpoint`` itself, or with ``/v1/logs`` where it has no path."""
    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return urlunsplit(parts._replace(path="/v1/logs"))
    return endpoint


def _problem(status: ExportStatus) -> str:
    lost = status.events - status.exported
    return (
        f"{lost} of {status.events} evaluation events not exported to {status.destination}: "
        f"{status.error or 'the export failed'}"
    )


def _link(metadata: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The trace and span ids of a sample's metadata; a missing or malformed one is no link."""
    trace_id = _hex_id(metadata.get("trace_id"), 32)
    span_id = _hex_id(metadata.get("span_id"), 16) if trace_id is not None else None
    return trace_id, span_id


def _hex_id(value: object, digits: int) -> int | None:
    if not isinstance(value, str) or len(value) != digits:
        return None
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return number or None  # all zeros is OTel's invalid id


def _thresholds(config: Mapping[str, Any]) -> dict[str, tuple[str, float]]:
    """The config's per-unit thresholds (turn.X, step.X), parsed: they label a unit's value."""
    found = config.get("thresholds")
    if not isinstance(found, dict):
        return {}
    return {m: parse_threshold(expr, metric=m) for m, expr in found.items()}


def _label(score: float | None, threshold: tuple[str, float] | None) -> str | None:
    if score is None or threshold is None:
        return None
    return "pass" if meets(score, *threshold) else "fail"


def _nanos(created: str) -> int | None:
    try:
        return int(datetime.fromisoformat(created).timestamp() * 1e9)
    except ValueError:
        return None


class _ExporterErrors(logging.Handler):
    """While open, the opentelemetry exporters' error lines: they say why an export failed,
    which their return value does not."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.reasons: list[str] = []
        self._logger = logging.getLogger("opentelemetry.exporter")

    def emit(self, record: logging.LogRecord) -> None:
        self.reasons.append(record.getMessage())

    def __enter__(self) -> list[str]:
        self._logger.addHandler(self)
        return self.reasons

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
