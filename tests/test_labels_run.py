"""A run given human labels of a slice: the config's ``labels`` (a file next to the config, or a
dataset column), read before any sample is scored; the report keeps the slice and what the run
concluded from it (PPI estimates), from its jury and from the audit."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from rag_judge import ConfigError, DataError, Pipeline, Report, load_config
from rag_judge.analysis.audit import audit_report
from rag_judge.analysis.calibration import load_labels
from rag_judge.analysis.ppi import ppi_estimates
from rag_judge.cli import main
from rag_judge.report.html import render_html
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import WarningKind
from rag_judge.resources import resource_dir
from tests import assert_plain

CONFIGS = resource_dir("configs")
DEMO_DATA = CONFIGS / "data" / "demo.jsonl"
DEMO_LABELS = CONFIGS / "data" / "demo_labels.jsonl"


def _config(tmp_path: Path, labels: str, dataset: Path = DEMO_DATA) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: labelled\ndataset: {dataset}\n{labels}"
        "evaluators:\n  - type: judge\n    rubrics: [faithfulness, correctness]\n"
        "    cache: null\n",
        encoding="utf-8",
    )
    return path


def test_a_bare_label_path_is_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text('{"id": "q01", "faithfulness": 5}\n')
    cfg = load_config(_config(tmp_path, "labels: labels.jsonl\n"))
    assert cfg.labels is not None
    assert cfg.labels.path == tmp_path / "labels.jsonl"
    assert cfg.labels.pass_score == 4.0


def test_labels_need_a_path_or_a_column(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, "labels:\n  pass_score: 3\n"))
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'exp.yaml'}:4: labels: needs a 'path'")
    assert "needs a 'path' (a label file) or a 'column'" in message
    assert_plain(message, "LabelsConfig")


def test_the_interval_method_is_checked_with_the_config(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text('{"id": "q01", "faithfulness": 5}\n')
    spec = load_config(_config(tmp_path, "labels: labels.jsonl\n")).labels
    assert spec is not None and spec.method == "t"  # the small-sample interval by default
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, "labels: {path: labels.jsonl, method: normal}\n"))
    assert (
        str(err.value)
        == f"{tmp_path / 'exp.yaml'}:3: labels.method: Input should be 't' or 'ppi_py'"
    )


def test_a_bad_label_file_stops_the_run_before_any_sample_is_scored(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text(
        '{"id": "q01", "faithfulness": 5}\n{"id": "q02", "faithfulness": 9}\n'
    )
    pipeline = Pipeline.from_yaml(_config(tmp_path, "labels: labels.jsonl\n"))
    with pytest.raises(DataError, match=r"labels.jsonl:2: field 'faithfulness': 9 is not a label"):
        pipeline.run()


def test_the_demo_slice_gives_bias_corrected_estimates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "labels.jsonl").write_text(
        DEMO_LABELS.read_text() + '{"id": "elsewhere", "faithfulness": 3}\n'
    )
    with caplog.at_level(logging.WARNING, logger="rag_judge.pipeline"):
        report = Pipeline.from_yaml(_config(tmp_path, "labels: labels.jsonl\n")).run().report
    unmatched = "1 of the 13 labelled ids are not samples of this run and were left out"
    assert unmatched in caplog.text
    # ... and in the report, not only on stderr (the log).
    warning = next(w for w in report.warnings if w.kind is WarningKind.UNMATCHED_LABELS)
    assert (warning.metric, warning.value, warning.threshold) == ("labels", 1.0, 0.0)
    assert warning.message.startswith(unmatched + " (e.g. 'elsewhere')")
    shipped = load_labels(DEMO_LABELS)
    assert report.labels == {k: {m: float(v) for m, v in r.items()} for k, r in shipped.items()}
    assert set(report.estimates) == {"faithfulness", "correctness"}
    # What the run stored is what the analysis computes from the report.
    assert report.estimates == ppi_estimates(report, confidence=0.95, pass_score=4.0, seed=0)
    faith = report.estimates["faithfulness"]
    assert (faith.n_labelled, faith.n_unlabelled) == (12, 22)
    # The stub judge reads word overlap: it marks down paraphrases and abstentions that a
    # person calls faithful, and the labelled slice pulls the estimate up.
    assert faith.judge_mean is not None and faith.estimate is not None
    assert faith.estimate > faith.judge_mean
    # Eleven 5s and a 2: the labels' t interval (method t, the default), 4.75 ± t(11 df)
    # 2.200985·√(0.75/12), would pass 5; the intervals are clipped to the 1-5 scale the mean
    # lives on.
    assert faith.method == "t"
    assert faith.labelled_mean == 4.75
    assert faith.labelled_ci is not None and faith.labelled_ci[1] == 5.0
    assert faith.labelled_ci[0] == pytest.approx(4.75 - 2.200985 * (0.75 / 12) ** 0.5, abs=1e-6)
    # 12 labels are fewer than the 15 the intervals are checked for: the report says so
    few = [(w.kind.value, w.metric, w.value) for w in report.warnings if w.metric != "labels"]
    assert few == [("few_labels", "faithfulness", 12), ("few_labels", "correctness", 12)]
    assert "rests on only 12 labelled samples (fewer than 15)" in report.warnings[-1].message
    for page in (render_markdown(report), render_html(report)):  # beside the numbers it qualifies
        assert "rests on only 12 labelled samples" in page
        assert "Student's t, small-sample" in page.replace("&#39;", "'").replace("\\'", "'")
    assert set(report.audit) == {"faithfulness", "correctness"}
    assert report.audit == audit_report(report, seed=0)
    assert report.jury == {}
    # report.json keeps all of it, and reads back.
    data = json.loads(report.to_json())
    assert data["labels"]["q31"] == {"faithfulness": 2.0, "correctness": 1.0}
    assert data["estimates"]["faithfulness"]["n_labelled"] == 12


def test_labels_of_no_sample_are_a_report_warning(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text('{"id": "x1", "faithfulness": 3}\n')
    report = Pipeline.from_yaml(_config(tmp_path, "labels: labels.jsonl\n")).run().report
    assert report.labels == {} and report.estimates == {}
    (warning,) = report.warnings
    assert warning.kind is WarningKind.UNMATCHED_LABELS and warning.value == 1
    assert warning.message.startswith("none of the 1 labelled ids is a sample of this run")
    data = json.loads(report.to_json())
    assert data["warnings"][0]["kind"] == "unmatched_labels"
    assert "- **labels**: none of the 1 labelled ids" in render_markdown(report)


def test_a_missing_label_file_names_the_resolved_path(tmp_path: Path) -> None:
    pipeline = Pipeline.from_yaml(_config(tmp_path, "labels: gone.jsonl\n"))
    with pytest.raises(ConfigError) as err:
        pipeline.run()
    assert str(err.value) == f"labels.path: file not found: {(tmp_path / 'gone.jsonl').resolve()}"
    assert err.value.loc == ("labels", "path")


def test_labels_from_a_dataset_column(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in DEMO_DATA.read_text().splitlines()]
    labelled = load_labels(DEMO_LABELS)
    for row in rows:
        if row["id"] in labelled:
            row.setdefault("metadata", {})["human"] = labelled[row["id"]]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = Pipeline.from_yaml(_config(tmp_path, "labels: {column: human}\n", data)).run().report
    assert report.estimates["correctness"].n_labelled == 12


def test_a_jury_run_stores_its_agreement(tmp_path: Path) -> None:
    from rag_judge.analysis.jury import jury_agreement

    path = tmp_path / "jury.yaml"
    path.write_text(
        f"dataset: {DEMO_DATA}\nevaluators:\n  - type: judge\n    rubrics: [faithfulness]\n"
        "    cache: null\n    aggregation: median\n    judges:\n      - {provider: stub}\n"
        "      - {provider: stub, stub: fixed, stub_score: 4}\n"
        "      - {provider: stub, stub: fixed, stub_score: 2}\n",
        encoding="utf-8",
    )
    report = Pipeline.from_yaml(path).run().report
    agreement = report.jury["faithfulness"]
    assert agreement == jury_agreement(report)["faithfulness"]
    assert agreement.judges == [
        "stub/stub-lexical-support",
        "stub/stub-fixed-4",
        "stub/stub-fixed-2",
    ]
    assert agreement.units == 34 and agreement.alpha is not None
    # The median of (lexical, 4, 2) is the lexical verdict clipped to [2, 4].
    lexical = [j.jury[0].score for j in (r.judgments["faithfulness"] for r in report.samples)]
    medians = [report.column("faithfulness")[r.id] for r in report.samples]
    assert medians == [min(max(v, 2.0), 4.0) for v in lexical if v is not None]
    assert report.audit["faithfulness"].self_preference is None


@pytest.mark.parametrize("method", ["t", "ppi_py"])
def test_calibrate_takes_its_defaults_from_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    # The run's seed, pass_score and interval method are not calibrate's defaults (0, 4, t):
    # calibrate reads them from the report, so it prints the numbers the report stored.
    (tmp_path / "labels.jsonl").write_text(DEMO_LABELS.read_text())
    labels = f"seed: 7\nlabels: {{path: labels.jsonl, pass_score: 5, method: {method}}}\n"
    report = Pipeline.from_yaml(_config(tmp_path, labels)).run().report
    saved = tmp_path / "report.json"
    saved.write_text(report.to_json())
    faith = report.estimates["faithfulness"]
    assert faith.method == method and faith.pass_rate is not None
    assert faith.pass_rate.threshold == 5.0
    assert main(["calibrate", str(saved), str(DEMO_LABELS), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for metric, estimate in report.estimates.items():
        assert out[metric]["ppi"] == estimate.model_dump(mode="json")
    # an option still overrides the report's setting
    assert main(["calibrate", str(saved), str(DEMO_LABELS), "--format", "json", "--seed", "0",
                 "--pass-score", "4"]) == 0  # fmt: skip
    rate = json.loads(capsys.readouterr().out)["faithfulness"]["ppi"]["pass_rate"]
    assert (rate["threshold"], rate["corrected"]) == (4.0, pytest.approx(0.9058823529411764))


def test_a_report_from_before_the_interval_method_keeps_ppi_py(tmp_path: Path) -> None:
    # A report.json written before labels.method existed computed ppi_py's intervals:
    # recomputing from it (calibrate, gate) gives the same numbers, not the new default's.
    (tmp_path / "labels.jsonl").write_text(DEMO_LABELS.read_text())
    labels = "labels: {path: labels.jsonl, method: ppi_py}\n"
    report = Pipeline.from_yaml(_config(tmp_path, labels)).run().report
    data = json.loads(report.to_json())
    del data["config"]["labels"]["method"]
    for estimate in data["estimates"].values():
        del estimate["method"]
    old = Report.model_validate(data)
    assert old.estimates == report.estimates
    assert ppi_estimates(old) == report.estimates
