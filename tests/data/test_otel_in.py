"""OpenTelemetry traces in: traces recorded by the real opentelemetry-sdk with OpenInference
(or GenAI) attributes, encoded to OTLP-JSON by opentelemetry-proto, read back as samples
(docs/traces.md, "Traces in")."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf.json_format import MessageToJson
from openinference.semconv.trace import SpanAttributes
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from rag_judge.cli import main
from rag_judge.data import Context, RetrievalStep, Sample, ToolStep, Turn, load_dataset
from rag_judge.data.otel import is_otlp, read_otlp
from rag_judge.data.stream import InMemory, open_source
from rag_judge.errors import DataError
from tests import REPO
from tests.data.otel_traces import (
    AGENT,
    CHAIN,
    KIND,
    LLM,
    PACIFIC,
    RETRIEVER,
    TOOL,
    Recorder,
    docs,
    messages,
    rag_chain,
    sid,
    tid,
)


def test_a_rag_chain_is_a_single_turn_sample(tmp_path: Path) -> None:
    rec = Recorder()
    rag_chain(rec)
    path = rec.write(tmp_path / "traces.json")
    assert read_otlp(path).samples == (
        Sample(
            id=tid(1),
            question="Which ocean is the largest?",
            contexts=PACIFIC,
            answer="The Pacific.",
            metadata={"trace_id": tid(1), "span_id": sid(1)},
        ),
    )


def test_an_agent_with_two_retrievals_and_a_tool_is_one_turn_with_steps(tmp_path: Path) -> None:
    rec = Recorder()
    with rec.span("agent", **{KIND: AGENT, "input.mime_type": "application/json",
                              "input.value": json.dumps({"input": "Compare the two oceans.",
                                                         "chat_history": []})}):  # fmt: skip
        with rec.span("r1", **{KIND: RETRIEVER, "input.value": "Pacific"}, **docs(("p1", "P", 3))):
            pass
        with rec.span("calc", **{KIND: TOOL, "tool.name": "area_ratio",
                                 "tool.parameters": json.dumps({"a": "Pacific", "b": "Atlantic"}),
                                 "output.value": "2.1"}):  # fmt: skip
            pass
        with rec.span(
            "r2", **{KIND: RETRIEVER, "input.value": "Atlantic"}, **docs(("a1", "A", 1.5))
        ):
            pass
        with rec.span("search", **{KIND: TOOL, "tool.name": "web", "input.value": "ocean sizes"}):
            pass
        llm = messages(SpanAttributes.LLM_OUTPUT_MESSAGES, ("assistant", "The Pacific, 2.1x."))
        with rec.span("llm", **{KIND: LLM}, **llm):
            pass
    sample = read_otlp(rec.write(tmp_path / "agent.json")).samples[0]
    assert sample == Sample(
        id=tid(1),
        turns=(
            Turn(
                question="Compare the two oceans.",
                steps=(
                    RetrievalStep(query="Pacific", contexts=(Context(id="p1", text="P", score=3),)),
                    ToolStep(
                        tool="area_ratio", arguments={"a": "Pacific", "b": "Atlantic"}, result="2.1"
                    ),
                    RetrievalStep(
                        query="Atlantic", contexts=(Context(id="a1", text="A", score=1.5),)
                    ),
                    ToolStep(tool="web", arguments={"input": "ocean sizes"}),
                ),
                answer="The Pacific, 2.1x.",
            ),
        ),
        metadata={"trace_id": tid(1), "span_id": sid(1)},
    )


def test_a_retriever_inside_a_retriever_is_one_retrieval(tmp_path: Path) -> None:
    rec = Recorder()
    found = docs(
        ("d3", "The Pacific Ocean is the largest.", 0.9), ("d9", "The Sahara is a desert.", 0.2)
    )
    with (
        rec.span("query", **{KIND: CHAIN, "input.value": "q"}),
        rec.span("retrieve", **{KIND: RETRIEVER, "input.value": "q"}, **found),
        rec.span("VectorIndexRetriever", **{KIND: RETRIEVER, "input.value": "inner"}, **found),
    ):
        pass
    (sample,) = read_otlp(rec.write(tmp_path / "t.json")).samples
    assert sample.contexts == PACIFIC
    assert not sample.is_conversation()


def test_traces_of_one_session_are_one_conversation_in_start_order(tmp_path: Path) -> None:
    rec = Recorder()
    # Recorded (and exported) first, but started last: it is the second turn.
    rag_chain(rec, "And the smallest?", **{"session.id": "chat-7"}, start=5_000)
    rag_chain(rec, "Which ocean is the largest?", **{"session.id": "chat-7"}, start=2_000)
    rag_chain(rec, "Alone?", start=3_000)
    samples = read_otlp(rec.write(tmp_path / "s.json")).samples
    step = RetrievalStep(query="largest ocean", contexts=PACIFIC)
    turn = {"steps": (step,), "answer": "The Pacific."}
    assert samples == (
        Sample(
            id="chat-7",
            turns=(
                Turn(
                    question="Which ocean is the largest?",
                    **turn,
                    metadata={"trace_id": tid(2), "span_id": sid(4)},
                ),
                Turn(
                    question="And the smallest?",
                    **turn,
                    metadata={"trace_id": tid(1), "span_id": sid(1)},
                ),
            ),
            metadata={"session_id": "chat-7"},
        ),
        Sample(
            id=tid(3),
            question="Alone?",
            contexts=PACIFIC,
            answer="The Pacific.",
            metadata={"trace_id": tid(3), "span_id": sid(7)},
        ),
    )


def test_the_genai_conventions(tmp_path: Path) -> None:
    rec = Recorder()
    user = [{"role": "user", "parts": [{"type": "text", "content": "Who wrote Dune?"}]}]
    with rec.span("invoke_agent", **{"gen_ai.operation.name": "invoke_agent",
                                     "gen_ai.conversation.id": "c1",
                                     "gen_ai.input.messages": json.dumps(user)}):  # fmt: skip
        found = json.dumps([{"id": "b1", "score": 0.8, "content": "Dune is by Frank Herbert."}])
        with rec.span("retrieval", **{"gen_ai.operation.name": "retrieval",
                                      "gen_ai.retrieval.query.text": "Dune author",
                                      "gen_ai.retrieval.documents": found}):  # fmt: skip
            pass
        with rec.span("execute_tool", **{"gen_ai.operation.name": "execute_tool",
                                         "gen_ai.tool.name": "lookup",
                                         "gen_ai.tool.call.arguments": '{"isbn": "0441013597"}',
                                         "gen_ai.tool.call.result": '{"year": 1965}'}):  # fmt: skip
            pass
        with rec.span("chat", **{"gen_ai.operation.name": "chat"}) as chat:
            # The older conventions: the prompt and completion as events of the span.
            chat.add_event(
                "gen_ai.content.prompt",
                {"gen_ai.prompt": json.dumps([{"role": "user", "content": "x"}])},
            )
            chat.add_event("gen_ai.content.completion", {"gen_ai.completion": "Frank Herbert."})
    (sample,) = read_otlp(rec.write(tmp_path / "g.json")).samples
    assert sample == Sample(
        id="c1",
        turns=(
            Turn(
                question="Who wrote Dune?",
                steps=(
                    RetrievalStep(
                        query="Dune author",
                        contexts=(Context(id="b1", text="Dune is by Frank Herbert.", score=0.8),),
                    ),
                    ToolStep(
                        tool="lookup", arguments={"isbn": "0441013597"}, result={"year": 1965}
                    ),
                ),
                answer="Frank Herbert.",
                metadata={"trace_id": tid(1), "span_id": sid(1)},
            ),
        ),
        metadata={"session_id": "c1"},
    )


def hex_ids(request: Any) -> Any:
    """The request with its ids in hex, as the collector's file exporter writes them."""
    if isinstance(request, dict):
        return {
            k: base64.b64decode(v).hex()
            if k in ("traceId", "spanId", "parentSpanId")
            else hex_ids(v)
            for k, v in request.items()
        }
    return [hex_ids(v) for v in request] if isinstance(request, list) else request


def test_jsonl_with_hex_ids_and_the_dataset_readers(tmp_path: Path) -> None:
    rec = Recorder()
    rag_chain(rec)
    first = rec.request()
    rec.exporter.clear()
    rag_chain(rec, "Alone?")
    path = tmp_path / "export.jsonl"
    path.write_text(f"{json.dumps(hex_ids(first))}\n\n{json.dumps(hex_ids(rec.request()))}\n")
    assert is_otlp(path)
    samples = load_dataset(path).samples  # told by its first key
    assert [(s.id, s.question) for s in samples] == [
        (tid(1), "Which ocean is the largest?"),
        (tid(2), "Alone?"),
    ]
    assert samples[0].contexts == PACIFIC
    source = open_source(path)  # what a run reads: loaded whole, not streamed as samples
    assert isinstance(source, InMemory) and tuple(source) == samples
    # A .json file holding one request, and the format named outright.
    single = rec.write(tmp_path / "t.txt")
    assert load_dataset(single, format="otlp").samples == samples[1:]
    with pytest.raises(DataError, match="have no layout"):
        load_dataset(single, format="otlp", layout="ragas")
    # Protobuf's snake_case field names read the same.
    snake = tmp_path / "snake.json"
    snake.write_text(MessageToJson(encode_spans(rec.exporter.get_finished_spans()),
                                   preserving_proto_field_name=True))  # fmt: skip
    assert read_otlp(snake).samples == samples[1:]
    # A plain dataset is not taken for traces.
    assert not is_otlp(REPO / "configs" / "data" / "demo.jsonl")


# --- the command and a run -------------------------------------------------------------------


JUDGE = {
    "type": "judge",
    "rubrics": ["faithfulness"],
    "client": {"provider": "stub"},
    "cache": None,
}


def test_ingest_writes_a_dataset_that_run_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder()
    rag_chain(rec)
    rag_chain(rec, "Second?")
    traces = rec.write(tmp_path / "traces.json")
    out = tmp_path / "dataset.jsonl"
    assert main(["ingest", str(traces), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out} (2 samples from 2 traces: 2 single-turn)\n"
    assert [Sample.model_validate_json(line) for line in out.read_text().splitlines()] == list(
        read_otlp(traces).samples
    )
    # The written dataset; the traces told by their first key; the traces named otlp.
    for n, (dataset, fmt) in enumerate([(out, None), (traces, None), (traces, "otlp")]):
        config = tmp_path / "c.yaml"
        config.write_text(yaml.safe_dump({
            "name": "traces",
            "dataset": str(dataset),
            "dataset_format": fmt,
            "evaluators": [JUDGE],
        }))  # fmt: skip
        run = tmp_path / f"run-{n}"
        assert main(["run", str(config), "--out", str(run), "--quiet"]) == 0
        report = json.loads((run / "report.json").read_text())
        assert [s["id"] for s in report["samples"]] == [tid(1), tid(2)]
        ids = {"trace_id": tid(1), "span_id": sid(1)}
        assert report["samples"][0]["sample"]["metadata"] == ids


def test_ingest_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"resourceSpans": 3}')
    assert main(["ingest", str(path), "--out", str(tmp_path / "d.jsonl")]) == 2
    assert "rag-judge: error: " in capsys.readouterr().err
    assert not (tmp_path / "d.jsonl").exists()


# --- the worked example of docs/traces.md runs as written -------------------------------------


def section_blocks(page: Path, heading: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block under ``heading``, up to the next ``## ``."""
    text = page.read_text().split(f"\n{heading}\n", 1)[1]
    text = re.split(r"\n## ", text, maxsplit=1)[0]
    return re.findall(r"^```(\w+)\n(.*?)^```$", text, flags=re.M | re.S)


def test_the_worked_example_in_docs_runs(tmp_path: Path) -> None:
    blocks = section_blocks(REPO / "docs" / "traces.md", "## Traces in")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = 0
    for n, (lang, code) in enumerate(blocks):
        if lang == "python":
            done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr
            # Each print line says what it prints in its comment.
            said = [
                line.split("# ", 1)[1] for line in code.splitlines() if line.startswith("print(")
            ]
            assert done.stdout.splitlines() == said
            ran += 1
        elif lang == "bash":
            done = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert blocks[n + 1] == ("text", done.stdout)  # the block below is its output
            ran += 1
    assert ran == 3
