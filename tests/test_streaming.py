"""The streaming run: evaluators go through the samples a chunk at a time, only score columns
stay in memory, and past ``inline_samples`` the samples live in samples.jsonl beside
report.json. Whatever the chunk size and wherever the samples live, the numbers are the same."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge import DataError, Pipeline, Report, Sample, load_config
from rag_judge.data import column as column_
from rag_judge.data.jsonl import read_jsonl
from rag_judge.data.rows import RowFile, RowWriter, line_offsets
from rag_judge.evaluators import EVALUATORS
from rag_judge.evaluators.base import Evaluator
from rag_judge.report import write_report
from rag_judge.report.model import SampleFile
from rag_judge.resources import resource_dir
from rag_judge.stats import bootstrap as stats_
from rag_judge.stats.pages import mapped

DEMO = resource_dir("configs") / "demo.yaml"
DEMO_DATA = resource_dir("configs") / "data" / "demo.jsonl"
CONFIG = """\
name: stream
dataset: {data}
seed: 3
bootstrap: {{resamples: 200}}
chunk_size: {chunk}
inline_samples: {inline}
evaluators:
  - type: retrieval
    metrics: [precision@3, mrr, map, ndcg@5]
  - type: rouge
    tokenizer: unicode
  - type: bleu
  - type: judge
    rubrics: [faithfulness, context_relevance]
    client: {{provider: stub}}
    cache: null
"""


def run(tmp_path: Path, chunk: int, inline: int, data: Path = DEMO_DATA, **kw: Any) -> Report:
    path = tmp_path / f"c{chunk}-{inline}.yaml"
    path.write_text(CONFIG.format(data=data, chunk=chunk, inline=inline), encoding="utf-8")
    config = load_config(path)
    if kw:
        config = config.model_copy(update=kw)
    return Pipeline(config).run().report


def dumped(report: Report) -> tuple[Any, list[Any], Any]:
    samples = [r.model_dump(mode="json") for r in report.samples]
    signatures = {m: s.model_dump() for m, s in report.signatures.items()}
    return report.model_dump(mode="json", include={"summary", "usage"}), samples, signatures


def test_chunked_and_file_backed_runs_give_the_same_report(tmp_path: Path) -> None:
    whole = run(tmp_path, chunk=2000, inline=5000)
    assert isinstance(whole.samples, list) and len(whole.samples) == 34
    for chunk, inline in [(1, 5000), (7, 0), (34, 0), (4, 33)]:
        other = run(tmp_path, chunk=chunk, inline=inline)
        assert isinstance(other.samples, SampleFile) == (inline < 34)
        assert dumped(other) == dumped(whole), (chunk, inline)
        assert other.column("ndcg@5") == whole.column("ndcg@5")
    # the summary over 34 samples is the exact mean, to the last digit
    ndcg = [r.scores["ndcg@5"] for r in whole.samples]
    assert whole.summary["ndcg@5"].mean == math.fsum(ndcg) / 34  # type: ignore[arg-type]


def test_a_run_with_its_columns_in_files_gives_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = run(tmp_path, chunk=2000, inline=5000)
    monkeypatch.setattr(column_, "TAIL", 4)  # every column and BLEU's rows past 4 samples
    monkeypatch.setattr(stats_, "_ROWS", 5)  # the corpus sums 5 rows at a time
    for chunk, inline in [(7, 0), (3, 5000)]:
        other = run(tmp_path, chunk=chunk, inline=inline)
        assert dumped(other) == dumped(whole), (chunk, inline)
        assert other.audit == whole.audit
    assert mapped(other.index().column("ndcg@5")) is False  # inline: the report's own index
    filed = run(tmp_path, chunk=7, inline=0)
    assert mapped(filed.index().column("ndcg@5"))  # the run's column, read from its file
    assert filed.column("bleu") == whole.column("bleu")


def test_a_file_backed_report_is_written_beside_and_loaded_back(tmp_path: Path) -> None:
    report = run(tmp_path, chunk=8, inline=0)
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert "samples" not in data and data["samples_file"] == "samples.jsonl"
    assert list(data)[:3] == ["summary", "samples_file", "signatures"]
    lines = paths["samples"].read_text(encoding="utf-8").splitlines()
    assert len(lines) == 34 and json.loads(lines[4])["id"] == report.samples[4].id
    loaded = Report.load(tmp_path / "out")
    assert isinstance(loaded.samples, SampleFile)
    assert dumped(loaded) == dumped(report)
    assert loaded.samples[-1] == report.samples[33] and loaded.samples[2:4] == report.samples[2:4]
    assert loaded.ids() == [json.loads(line)["id"] for line in lines]
    assert loaded.column("bleu") == report.column("bleu")
    # the same report inline: Report.to_json holds every sample either way
    assert json.loads(loaded.to_json())["samples"] == json.loads(report.to_json())["samples"]
    html = paths["html"].read_text(encoding="utf-8")
    assert "34 samples" in html
    # written again inline into the same folder: the old samples.jsonl goes
    write_report(run(tmp_path, chunk=8, inline=5000), tmp_path / "out")
    assert not paths["samples"].exists()
    assert len(Report.load(tmp_path / "out").samples) == 34
    # a report.json naming a samples file that is gone says which file
    write_report(report, tmp_path / "again")
    (tmp_path / "again" / "samples.jsonl").unlink()
    with pytest.raises(DataError, match=r"again/samples.jsonl: file not found"):
        Report.load(tmp_path / "again")


def test_compare_and_gate_read_a_file_backed_report(tmp_path: Path) -> None:
    write_report(run(tmp_path, chunk=5, inline=0), tmp_path / "file")
    write_report(run(tmp_path, chunk=2000, inline=5000), tmp_path / "inline")
    cli = [sys.executable, "-m", "rag_judge.cli"]
    out = subprocess.run(
        [*cli, "compare", str(tmp_path / "inline"), str(tmp_path / "file"), "--format", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (comparison,) = json.loads(out.stdout)["comparisons"]
    assert comparison["only_in_base"] == comparison["only_in_new"] == 0
    for metric, row in comparison["metrics"].items():  # the same numbers, paired by id
        assert (row["n"], row["diff"], row["signature_differs"]) == (34, 0.0, False), metric
    gate = subprocess.run(
        [*cli, "gate", str(tmp_path / "file"), "--fail-under", "ndcg@5=0.56",
         "--baseline", str(tmp_path / "inline"), "--max-drop", "0"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_a_bad_line_mid_stream_stops_the_run_naming_file_and_line(tmp_path: Path) -> None:
    lines = DEMO_DATA.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:11], '{"id": "x", "contexts": "oops"}', *lines[11:]]) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:12: field 'contexts'"):
        run(tmp_path, chunk=4, inline=0, data=bad)
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join([*lines, lines[2]]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dup.jsonl:35: field 'id': .* already used on line 3"):
        run(tmp_path, chunk=4, inline=0, data=dup)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="contains no samples"):
        run(tmp_path, chunk=4, inline=0, data=empty)


class FailsLater(Evaluator):
    """Scores 1.0 per sample, and crashes on the sample with id ``crash_on``."""

    type: str = "fails_later"
    crash_on: str = ""

    def metric_names(self) -> list[str]:
        return ["one"]

    def score(self, samples: Sequence[Sample]) -> Mapping[str, Any]:
        if any(s.id == self.crash_on for s in samples):
            raise RuntimeError("boom")
        return {"one": np.ones(len(samples))}


def test_a_crash_mid_stream_keeps_the_chunks_before_it(tmp_path: Path) -> None:
    samples = list(read_jsonl(DEMO_DATA))
    EVALUATORS["fails_later"] = FailsLater
    try:
        evaluators = [FailsLater(crash_on=samples[9].id), EVALUATORS["bleu"]()]
        config = load_config(DEMO).model_copy(update={"evaluators": evaluators, "chunk_size": 4})
        report = Pipeline(config).run(samples).report
        in_file = Pipeline(config.model_copy(update={"inline_samples": 0})).run(samples).report
    finally:
        del EVALUATORS["fails_later"]
    scores = [r.scores["one"] for r in report.samples]
    assert scores == [1.0] * 8 + [None] * 26  # chunks 1-2 scored; the 3rd crashed, the rest not run
    message = report.samples[20].errors["one"].message
    assert message == "fails_later evaluator failed: RuntimeError: boom"
    assert report.summary["one"].n == 8 and report.summary["one"].errors == 26
    assert report.summary["bleu"].n == 34  # the other evaluator is untouched
    # the index of samples kept in a file is the run's own columns: NaN where no value
    assert isinstance(in_file.samples, SampleFile)
    for metric in ("one", "bleu"):
        np.testing.assert_array_equal(in_file.index().column(metric), report.index().column(metric))
        assert list(in_file.index().present(metric)) == list(report.index().present(metric))
    assert np.isnan(in_file.index().column("one")[8:]).all()
    assert in_file.index().failures == report.index().failures


def test_a_target_streams_too(tmp_path: Path) -> None:
    target = tmp_path / "rag.py"
    target.write_text(
        "def answer(q):\n    return {'answer': q.upper(), 'contexts': [{'id': 'd1', 'text': q}]}\n"
    )
    reports = []
    for chunk, inline in [(2000, 5000), (3, 0)]:
        config = load_config(DEMO).model_copy(
            update={
                "target": f"{target}:answer",
                "evaluators": [EVALUATORS["rouge"](), EVALUATORS["bleu"]()],
                "chunk_size": chunk,
                "inline_samples": inline,
            }
        )
        result = Pipeline(config).run()
        assert result.samples[5].answer == result.report.samples[5].sample.answer  # type: ignore[union-attr]
        reports.append(result.report)
    a, b = reports
    assert [s.sample for s in a.samples] == [s.sample for s in b.samples]
    strip = {"summary": {"latency_s"}}
    assert a.model_dump(mode="json", include={"summary"}, exclude=strip) == b.model_dump(
        mode="json", include={"summary"}, exclude=strip
    )
    assert b.summary["latency_s"].n == 34


def test_bootstrap_in_chunks_of_resamples_is_the_same_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(1).random(1234)
    whole = stats_.bootstrap_ci(values, resamples=500, seed=7)
    monkeypatch.setattr(stats_, "_CHUNK", 1234 * 3)  # 3 resamples at a time
    assert stats_.bootstrap_ci(values, resamples=500, seed=7) == whole
    monkeypatch.setattr(stats_, "_CHUNK", 1)
    assert stats_.bootstrap_ci(values, resamples=500, seed=7) == whole


def test_row_files(tmp_path: Path) -> None:
    writer = RowWriter(tmp_path / "rows.jsonl")
    for i in range(5):
        writer.write(json.dumps({"i": i, "s": "é" * i}).encode())
    offsets = writer.close()
    rows = RowFile(tmp_path / "rows.jsonl", json.loads, offsets)
    assert len(rows) == 5 and rows[0] == {"i": 0, "s": ""} and rows[-1]["i"] == 4
    assert [r["i"] for r in rows] == [0, 1, 2, 3, 4] and [r["i"] for r in rows[1:4:2]] == [1, 3]
    with pytest.raises(IndexError):
        rows[5]
    assert list(line_offsets(tmp_path / "rows.jsonl")) == list(offsets)
    (tmp_path / "tail.jsonl").write_bytes(b'{"a": 1}\n{"a": 2}')  # no newline at the end
    assert [r["a"] for r in RowFile(tmp_path / "tail.jsonl", json.loads)] == [1, 2]
    owned = tmp_path / "run" / "x.jsonl"
    owned.parent.mkdir()
    owned.write_bytes(b"{}\n")
    held = RowFile(owned, json.loads, owned=True)
    assert len(held) == 1
    del held
    assert not owned.exists() and not owned.parent.exists()
