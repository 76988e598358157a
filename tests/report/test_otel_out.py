"""Evaluation results out as OpenTelemetry ``gen_ai.evaluation.result`` events: a run exported
to a loopback OTLP/HTTP receiver (decoded with opentelemetry-proto) delivers every value once,
linked to its sample's trace; a dead endpoint is a warning of a run that still succeeds; the
OTLP-JSON file reads back; docs/traces.md's "Traces out" example runs as written."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import re
import socket
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

import rag_judge.report
from rag_judge import ExperimentConfig, Sample
from rag_judge.cli import main
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Report,
    SampleResult,
    UnitResult,
    WarningKind,
)
from rag_judge.report.otel import EVENT_NAME, evaluations, export_results, logs_url
from tests import REPO

TRACES = {  # sample id -> (trace id, span id) in its metadata
    "s1": ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
    "s2": ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"),
    "s4": ("5bf92f3577b34da6a3ce929d0e0e4736", None),  # a trace, no span: linked to the trace
}
SAMPLES = [
    {"id": "s1", "question": "Which ocean is the largest?",
     "answer": "The Pacific is the largest ocean.",
     "contexts": ["The Pacific is the largest ocean on Earth."]},
    {"id": "s2", "question": "What is the capital of France?", "answer": "Paris.",
     "contexts": ["Paris is the capital of France."]},
    {"id": "s3", "question": "Who wrote Hamlet?", "answer": "Shakespeare wrote it.",
     "contexts": ["Hamlet is a tragedy by William Shakespeare."]},
    {"id": "s4", "question": "Who painted it?",  # no answer: a missing_input failure
     "contexts": ["The Mona Lisa was painted by Leonardo."]},
    {"id": "s5", "question": "Is it?", "answer": "Yes.", "contexts": ["It is."],
     "metadata": {"trace_id": "not-hex", "span_id": "b7ad6b7169203331"}},  # malformed: no link
]  # fmt: skip
CONFIG = """\
name: otel-out
dataset: data.jsonl
evaluators:
  - type: judge
    rubrics: [faithfulness, answer_relevance]
    client: {provider: stub}
    cache: null
"""


class Receiver:
    """An OTLP/HTTP logs receiver on 127.0.0.1: each request decoded as an
    ``ExportLogsServiceRequest``, kept with its path and headers; it answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[str, dict[str, str], ExportLogsServiceRequest]] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportLogsServiceRequest.FromString(body)
                received.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                 request))  # fmt: skip
                reply = ExportLogsServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def records(self) -> list[Any]:
        return [
            record
            for _, _, request in self.requests
            for resource_logs in request.resource_logs
            for scope_logs in resource_logs.scope_logs
            for record in scope_logs.log_records
        ]


def _value(value: AnyValue) -> object:
    return getattr(value, value.WhichOneof("value"))


def _attributes(record: Any) -> dict[str, object]:
    return {a.key: _value(a.value) for a in record.attributes}


def _closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(tmp_path: Path, otel: str) -> tuple[int, Path]:
    rows = []
    for sample in SAMPLES:
        row = dict(sample)
        if sample["id"] in TRACES:
            trace_id, span_id = TRACES[str(sample["id"])]
            row["metadata"] = {"trace_id": trace_id, **({"span_id": span_id} if span_id else {})}
        rows.append(row)
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "exp.yaml").write_text(CONFIG + otel)
    out = tmp_path / "run"
    return main(["run", str(tmp_path / "exp.yaml"), "--out", str(out), "--quiet"]), out


def _expected(report: Report) -> Counter[tuple[str, str]]:
    """Every (sample, metric) value of the report, from report.json itself."""
    keys: Counter[tuple[str, str]] = Counter()
    for result in report.samples:
        for metric in {*result.scores, *result.errors}:
            keys[(result.id, metric)] += 1
    return keys


def test_every_event_arrives_once_with_its_trace_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Receiver() as receiver:
        otel = f"otel:\n  endpoint: {receiver.url}\n  headers: {{x-team: rag-secret-7}}\n"
        code, out = _run(tmp_path, otel)
    assert code == 0
    report = Report.load(out)
    assert report.warnings == []
    records = receiver.records()
    received = Counter(
        (str(_attributes(r)["rag_judge.sample.id"]), str(_attributes(r)["gen_ai.evaluation.name"]))
        for r in records
    )
    assert received == _expected(report)  # every value, exactly once
    assert len(records) == 20  # 5 samples x (2 rubrics + their _norm twins)
    assert {path for path, _, _ in receiver.requests} == {"/v1/logs"}  # the bare URL's path
    assert all(h["x-team"] == "rag-secret-7" for _, h, _ in receiver.requests)
    assert "rag-secret-7" not in (out / "report.json").read_text()  # headers stay out of it
    resource = {a.key: _value(a.value) for a in receiver.requests[0][2].resource_logs[0]
                .resource.attributes}  # fmt: skip
    assert resource["service.name"] == "rag-judge"
    assert resource["rag_judge.experiment"] == "otel-out"
    by_id = {r.id: r for r in report.samples}
    for record in records:
        attrs = _attributes(record)
        sample, metric = str(attrs["rag_judge.sample.id"]), str(attrs["gen_ai.evaluation.name"])
        assert record.event_name == EVENT_NAME
        assert attrs["rag_judge.signature"] == report.signatures[metric].render()
        result = by_id[sample]
        trace_id, span_id = TRACES.get(sample, (None, None))
        assert record.trace_id.hex() == (trace_id or "")
        assert record.span_id.hex() == (span_id or "")
        if sample == "s4":  # no answer: the failure, no score
            assert attrs["error.type"] == FailureKind.MISSING_INPUT.value
            assert attrs["gen_ai.evaluation.explanation"] == result.errors[metric].message
            assert "gen_ai.evaluation.score.value" not in attrs
        else:
            assert attrs["gen_ai.evaluation.score.value"] == result.scores[metric]
            assert "error.type" not in attrs
    assert "20 evaluation events (12 linked to their trace)" in capsys.readouterr().out


@pytest.mark.parametrize("dead", ["closed port", "HTTP 400"])
def test_a_dead_endpoint_is_reported_and_the_run_succeeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, dead: str
) -> None:
    with contextlib.ExitStack() as stack:
        if dead == "closed port":
            url, reason = f"http://127.0.0.1:{_closed_port()}/v1/logs", "Connection refused"
        else:
            url, reason = stack.enter_context(Receiver(status=400)).url, "HTTP 400"
        otel = f"otel:\n  endpoint: {url}\n  file: events.jsonl\n  timeout: 0.5\n"
        code, out = _run(tmp_path, otel)
    assert code == 0  # the report is written and the run succeeds
    report = Report.load(out)
    [warning] = report.warnings
    assert warning.kind is WarningKind.OTEL_EXPORT and warning.metric == "otel"
    assert warning.value == 20
    assert reason in warning.message and logs_url(url) in warning.message
    assert warning.message in (out / "report.md").read_text()
    assert any(warning.message in r.getMessage() for r in caplog.records)
    lines = (out / "events.jsonl").read_text().splitlines()  # the file got every event still
    assert sum(len(_file_records(json.loads(line))) for line in lines) == 20


def _file_records(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        record
        for resource_logs in request["resourceLogs"]
        for scope_logs in resource_logs["scopeLogs"]
        for record in scope_logs["logRecords"]
    ]


def test_the_file_reads_back_as_otlp_json(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "otel: {file: events.jsonl}\n")
    assert code == 0
    report = Report.load(out)
    assert report.config["otel"] == {"file": "events.jsonl", "endpoint": None, "timeout": 10.0}
    lines = (out / "events.jsonl").read_text().splitlines()
    records = [r for line in lines for r in _file_records(json.loads(line))]
    expected = list(evaluations(report))
    assert len(records) == len(expected) == 20
    for record, evaluation in zip(records, expected):
        attrs = {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}
        assert record["eventName"] == EVENT_NAME
        assert attrs["rag_judge.sample.id"] == evaluation.sample_id
        assert attrs["gen_ai.evaluation.name"] == evaluation.metric
        assert attrs.get("gen_ai.evaluation.score.value") == evaluation.score
        trace_id, span_id = TRACES.get(evaluation.sample_id, (None, None))
        assert record.get("traceId") == trace_id  # hex, as OTLP/JSON writes ids
        assert record.get("spanId") == span_id
        assert "body" not in record
    # Appended, as a log is: a second export adds its lines.
    [status] = export_results(report, file=out / "events.jsonl")
    assert status.ok and status.exported == 20 and status.linked == 12
    assert len((out / "events.jsonl").read_text().splitlines()) == 2 * len(lines)


def test_a_file_that_cannot_be_written_is_a_status(tmp_path: Path) -> None:
    assert _run(tmp_path, "otel: {file: events.jsonl}\n")[0] == 0
    [status] = export_results(Report.load(tmp_path / "run"), file=tmp_path)  # a folder
    assert not status.ok and status.exported == 0 and status.events == 20
    assert status.error is not None and "IsADirectoryError" in status.error


def test_units_are_events_labelled_by_their_thresholds() -> None:
    turns = [{"question": "q0"}, {"question": "q1", "metadata": {"trace_id": "ef" * 16}}]
    sample = Sample(id="c1", turns=turns, metadata={"trace_id": "ab" * 16, "span_id": "cd" * 8})
    result = SampleResult(
        id="c1",
        sample=sample,
        scores={"faithfulness": 4.0},
        errors={"abstention": Failure(kind=FailureKind.NOT_APPLICABLE, message="answered")},
        units=[
            UnitResult(id="c1", turn=0, scores={"turn.faithfulness": 0.9}),
            UnitResult(id="c1", turn=1, scores={"turn.faithfulness": 0.2}),
            UnitResult(id="c1", turn=1, step=0, scores={"step.ndcg@3": None},
                       errors={"step.ndcg@3": Failure(message="no relevance")}),
        ],
    )  # fmt: skip
    report = Report(
        summary={}, samples=[result], signatures={},
        config={"thresholds": {"turn.faithfulness": ">= 0.5"}},
    )  # fmt: skip
    found = [(e.metric, e.turn, e.step, e.score, e.label, e.error) for e in evaluations(report)]
    assert found == [  # the not-applicable value is no value, and has no event
        ("faithfulness", None, None, 4.0, None, None),
        ("turn.faithfulness", 0, None, 0.9, "pass", None),
        ("turn.faithfulness", 1, None, 0.2, "fail", None),
        ("step.ndcg@3", 1, 0, None, None, "error"),
    ]
    conversation, own = (int("ab" * 16, 16), int("cd" * 8, 16)), (int("ef" * 16, 16), None)
    links = [(e.trace_id, e.span_id) for e in evaluations(report)]
    assert links == [conversation, conversation, own, own]  # turn 1 has a trace of its own


def test_config_checks_and_no_otel_key_when_unset() -> None:
    base: dict[str, Any] = {"evaluators": [{"type": "retrieval", "metrics": ["mrr"]}]}
    assert "otel" not in ExperimentConfig(**base).model_dump(mode="json")  # reports unchanged
    for otel, problem in [
        ({}, "needs a 'file'"),
        ({"endpoint": "localhost:4318"}, "not an http(s) URL"),
        ({"file": "e.jsonl", "timeout": 0}, "greater than 0"),
        ({"file": "e.jsonl", "port": 1}, "Extra inputs"),
    ]:
        with pytest.raises(ValueError, match=re.escape(problem)):
            ExperimentConfig(**base, otel=otel)
    config = ExperimentConfig(**base, otel={"endpoint": "https://c:4318", "headers": {"a": "b"}})
    assert config.otel is not None and config.otel.headers == {"a": "b"}
    assert config.model_dump(mode="json")["otel"] == {
        "file": None, "endpoint": "https://c:4318", "timeout": 10.0,
    }  # fmt: skip
    assert logs_url("http://c:4318") == logs_url("http://c:4318/") == "http://c:4318/v1/logs"
    assert logs_url("http://c:4318/custom/logs") == "http://c:4318/custom/logs"


def test_a_missing_extra_is_a_warning_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # opentelemetry absent: the module that imports it cannot be imported.
    monkeypatch.delattr(rag_judge.report, "_otel_sdk", raising=False)
    monkeypatch.setitem(sys.modules, "rag_judge.report._otel_sdk", None)
    code, out = _run(tmp_path, "otel: {file: events.jsonl}\n")
    assert code == 0
    [warning] = Report.load(out).warnings
    assert "pip install 'rag-judge[otel]'" in warning.message
    assert not (out / "events.jsonl").exists()


def _section() -> str:
    page = (REPO / "docs" / "traces.md").read_text(encoding="utf-8")
    return page.split("## Traces out", 1)[1].split("\n## ", 1)[0]


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = _section()
    [config] = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    checked = ExperimentConfig(evaluators=[{"type": "judge"}], **yaml.safe_load(config))
    assert checked.otel is not None and checked.otel.endpoint is not None
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    [printed] = re.findall(r"```text\n(.*?)```", section, re.DOTALL)
    monkeypatch.chdir(tmp_path)
    stdout = io.StringIO()
    logging.getLogger("rag_judge").setLevel(logging.WARNING)
    with contextlib.redirect_stdout(stdout):
        namespace: dict[str, object] = {"__name__": "traces_doc"}
        for block in blocks:
            exec(compile(block, "docs/traces.md", "exec"), namespace)
    assert stdout.getvalue() == printed


@pytest.fixture(autouse=True)
def _no_otel_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The user's own OTLP settings (headers, compression) must not reach the test's receiver.
    for name in (
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION",
    ):
        monkeypatch.delenv(name, raising=False)  # fmt: skip
    yield


def test_a_token_in_the_endpoint_url_reaches_no_report_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from rag_judge.messages import redact_url

    url = "http://user:SECRETPASS@127.0.0.1:1/v1/logs?api_key=SECRETQUERY"
    assert redact_url(url) == "http://***@127.0.0.1:1/v1/logs?api_key=***"
    config = tmp_path / "c.yaml"
    config.write_text(
        f"name: t\ndataset: {REPO / 'configs' / 'data' / 'demo.jsonl'}\n"
        "evaluators: [{type: retrieval, metrics: [mrr]}]\n"
        f"otel: {{endpoint: '{url}', timeout: 1}}\n"
    )
    out = tmp_path / "out"
    with caplog.at_level("WARNING"):
        assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    written = "".join(p.read_text() for p in out.iterdir() if p.is_file())
    assert "otel_export" in written  # the dead endpoint is reported ...
    for secret in ("SECRETPASS", "SECRETQUERY"):  # ... without its token
        assert secret not in written and secret not in caplog.text
