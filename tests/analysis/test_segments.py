"""Segments (group_by): per-segment numbers, compare per segment, gates per segment, errors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from rag_judge.analysis.compare import CompareOptions
from rag_judge.analysis.gates import check_gates
from rag_judge.analysis.segment_compare import compare_segments, segment_table
from rag_judge.analysis.segments import value_at
from rag_judge.cli import main
from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.pipeline import Pipeline, summarize
from rag_judge.report.format import text_table
from rag_judge.report.model import Report, SampleResult, Signature
from rag_judge.report.segments import segment_tables
from rag_judge.stats import bootstrap_ci
from tests import REPO

DOC = REPO / "docs" / "segments.md"


def _sample(sid: str, rank: int, topic: str | None) -> Sample:
    contexts = [{"id": f"d{j}", "text": f"passage {j}"} for j in range(3)]
    metadata = {} if topic is None else {"topic": topic}
    return Sample.model_validate(
        {"id": sid, "question": "?", "contexts": contexts, "relevance": {f"d{rank}": 1},
         "metadata": metadata}
    )  # fmt: skip


# billing: the relevant passage at rank 1, 2, 3 in turn (reciprocal ranks 1, 1/2, 1/3)
SAMPLES = [_sample(f"b{i}", i % 3, "billing") for i in range(12)]
SAMPLES += [_sample(f"a{i}", i % 2, "auth") for i in range(3)] + [_sample("m", 0, None)]


def _config(**extra: object) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {"evaluators": [RetrievalEvaluator(metrics=["mrr"])], "seed": 3, **extra}
    )


def test_per_segment_means_and_cis_are_the_hand_computed_ones() -> None:
    report = Pipeline(_config(group_by="metadata.topic")).run(SAMPLES).report
    by = {s.value: s for s in report.segments}
    assert list(by) == ["auth", "billing", "(missing)"]  # sorted, (missing) last
    billing = by["billing"].metrics["mrr"]
    values = [1.0, 0.5, 1 / 3] * 4
    assert billing.n == 12
    assert billing.mean == pytest.approx(sum(values) / 12)  # 11/18
    low, high = bootstrap_ci(np.array(values), resamples=1000, confidence=0.95, seed=3)
    assert (billing.ci_low, billing.ci_high) == (low, high)  # the run's seed and resamples
    auth = by["auth"].metrics["mrr"]  # 3 samples: a mean, no interval
    assert (auth.n, auth.ci_low, auth.ci_high) == (3, None, None)
    assert auth.mean == pytest.approx(2.5 / 3)  # reciprocal ranks 1, 1/2, 1
    assert by["(missing)"].n == 1 and by["auth"].too_few("mrr")
    # the whole-report summary is what it is without segments
    plain = Pipeline(_config()).run(SAMPLES).report
    assert report.summary == plain.summary
    assert "segments" not in plain.to_json() and "group_by" not in plain.config


def test_the_min_n_note_says_which_segments_have_too_few() -> None:
    report = Pipeline(_config(group_by=["metadata.topic"])).run(SAMPLES).report
    (table,) = segment_tables(report.segments, report.confidence)
    text = text_table(table)
    assert re.search(r"auth\s+mrr\s+3\s+0\.8333\s+–\s+too few \(n < 10\)", text)
    assert "(min_segment_n 10): auth (3), (missing) (1)" in text


def test_value_at_reads_nested_and_non_string_values() -> None:
    meta = {"user": {"tier": 3}, "lang": "en", "flag": True}
    assert value_at(meta, "metadata.user.tier") == "3"
    assert value_at(meta, "metadata.lang") == "en"
    assert value_at(meta, "metadata.flag") == "true"
    assert value_at(meta, "metadata.topic") == "(missing)"
    assert value_at(meta, "metadata.lang.x") == "(missing)"


# ---- compare: a regression planted in one segment --------------------------------------------


def _report(values: dict[str, list[float]]) -> Report:
    """Segments of 30 samples each: ``values[topic]`` the metric's scores."""
    samples = []
    for topic, scores in values.items():
        for i, v in enumerate(scores):
            sample = Sample(id=f"{topic}{i}", question="?", metadata={"topic": topic})
            samples.append(SampleResult(id=sample.id, scores={"score": v}, sample=sample))
    column = [s.scores["score"] for s in samples]
    summary = {"score": summarize(column, resamples=100, confidence=0.95, seed=0)}
    return Report(summary=summary, samples=samples, signatures={"score": Signature(name="score")})


def test_compare_finds_the_planted_regression_after_correction_and_flags_no_other() -> None:
    rng = np.random.default_rng(7)
    topics = ["billing", "auth", "search", "export"]
    base = {t: rng.uniform(0.3, 0.9, 30).tolist() for t in topics}
    new = {t: (np.array(v) + rng.normal(0, 0.05, 30)).tolist() for t, v in base.items()}
    new["billing"] = (np.array(base["billing"]) - 0.15 + rng.normal(0, 0.05, 30)).tolist()
    base["tiny"], new["tiny"] = [0.9] * 4, [0.1] * 4  # a huge drop on 4 samples: not tested
    options = CompareOptions(resamples=2000, permutations=2000, seed=0)
    result = compare_segments(_report(base), [("NEW", _report(new))], ["metadata.topic"], options)
    assert result.correction == "holm"  # compare's "none" becomes holm across segments
    assert result.regressed() == [("NEW", "topic=billing", "score")]
    by = {s.value: s for s in result.segments}
    billing = by["billing"].metrics["score"]
    assert billing is not None and billing.p_adjusted is not None and billing.p_value is not None
    assert billing.p_adjusted >= billing.p_value  # corrected
    assert by["tiny"].metrics["score"] is None and by["tiny"].n == 4
    text = text_table(segment_table(result))
    assert "regressed segments: NEW: topic=billing (score)" in text
    assert "too few (n < 10), not tested" in text


def test_uncorrected_noise_would_flag_a_segment_the_correction_does_not() -> None:
    # Eight segments of pure noise (no true change): seed 10 gives two segments that got worse
    # with an uncorrected p below 0.05; the family-wise correction keeps both out.
    rng = np.random.default_rng(10)
    topics = [f"t{i}" for i in range(8)]
    base = {t: rng.uniform(0.3, 0.9, 12).tolist() for t in topics}
    new = {t: (np.array(v) + rng.normal(0, 0.1, 12)).tolist() for t, v in base.items()}
    options = CompareOptions(resamples=500, permutations=2000, seed=0)
    args = (_report(base), [("NEW", _report(new))], ["metadata.topic"], options)
    corrected = compare_segments(*args, correction="bonferroni")
    cells = [mc for s in corrected.segments for mc in s.metrics.values() if mc is not None]
    assert all(mc.p_adjusted == min(1.0, (mc.p_value or 0) * len(cells)) for mc in cells)
    worse = [mc for mc in cells if mc.diff is not None and mc.diff < 0]
    assert sum(1 for mc in worse if mc.p_value is not None and mc.p_value < 0.05) == 2
    assert corrected.regressed() == []


# ---- gates per segment -----------------------------------------------------------------------


def test_gates_per_segment_pass_fail_and_fail_closed_below_the_minimum() -> None:
    report = Pipeline(_config(group_by=["metadata.topic"])).run(SAMPLES).report
    result = check_gates(
        report,
        {"mrr[topic=billing]": ">= 0.6", "mrr[metadata.topic=billing]": ">= 0.7",
         "mrr[topic=auth]": ">= 0.1", "mrr[topic=sales]": ">= 0.1"},
    )  # fmt: skip
    checks = {c.metric: c for c in result.checked}
    assert checks["mrr[topic=billing]"].passed
    assert checks["mrr[topic=billing]"].value == pytest.approx(11 / 18)
    assert not checks["mrr[metadata.topic=billing]"].passed  # 0.6111 < 0.7
    auth = checks["mrr[topic=auth]"]
    assert not auth.passed and "too few samples" in auth.message
    assert "n=3 < min_segment_n 10; the gate fails closed" in auth.message
    sales = checks["mrr[topic=sales]"]
    assert not sales.passed and "its segments: topic=auth, topic=billing" in sales.message
    with pytest.raises(ConfigError, match="gate 'mrx\\[topic=billing\\]': no such metric"):
        check_gates(report, {"mrx[topic=billing]": ">= 0.1"})
    # a report without segments: the gate fails and says how to get them
    plain = Pipeline(_config()).run(SAMPLES).report
    (failed,) = check_gates(plain, {"mrr[topic=billing]": ">= 0.1"}).failures
    assert "no segments (set group_by" in failed.message
    # a lower minimum gives auth its verdict
    low = Pipeline(_config(group_by=["metadata.topic"], min_segment_n=3)).run(SAMPLES).report
    assert check_gates(low, {"mrr[topic=auth]": ">= 0.7"}).passed
    assert math.isclose(low.segments[0].metrics["mrr"].mean or 0, 2.5 / 3)


# ---- config and CLI errors -------------------------------------------------------------------


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match=re.escape("'metadata.<name>'")):
        _config(group_by=["topic"])
    with pytest.raises(ValidationError, match="given twice"):
        _config(group_by=["metadata.topic", "metadata.topic"])
    with pytest.raises(ValidationError, match="which the run does not group by"):
        _config(group_by=["metadata.lang"], gates={"mrr[topic=billing]": ">= 0.5"})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        _config(group_by=["metadata.topic"], min_segment_n=0)
    assert _config(group_by="metadata.topic").group_by == ["metadata.topic"]


def _doc_block(lang: str) -> str:
    match = re.search(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match is not None, lang
    return match.group(1)


def _write_example(tmp_path: Path) -> Path:
    (tmp_path / "segments.jsonl").write_text(_doc_block("jsonl"), encoding="utf-8")
    config = tmp_path / "segments.yaml"
    config.write_text(_doc_block("yaml\nname: segments"), encoding="utf-8")
    text = config.read_text(encoding="utf-8")
    config.write_text("name: segments\n" + text, encoding="utf-8")
    return config


def test_the_worked_example_of_the_docs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_example(tmp_path)
    out = tmp_path / "run"
    assert main(["run", "--quiet", str(config), "--out", str(out)]) == 1  # the auth gate
    printed = capsys.readouterr().out
    assert _doc_block("text") in printed
    report_md = (out / "report.md").read_text(encoding="utf-8")
    assert _doc_block("markdown") in report_md
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [s["value"] for s in report["segments"]] == ["auth", "billing", "(missing)"]
    assert "Segments by topic" in (out / "report.html").read_text(encoding="utf-8")


def test_cli_group_by_overrides_and_bad_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _write_example(tmp_path)
    code = main(["run", "--quiet", str(config), "--group-by", "topic", "--out", str(tmp_path)])
    assert code == 2
    assert "--group-by 'topic': a key is a path" in capsys.readouterr().err
    # --min-segment-n 2 gives auth (2 samples) its verdict: every gate passes
    out = tmp_path / "low"
    args = ["run", "--quiet", str(config), "--min-segment-n", "2", "--out", str(out)]
    assert main(args) == 0
    # a --fail-under on a key the run does not group by is bad input, before any work
    args = ["run", "--quiet", str(config), "--fail-under", "mrr[lang=en]=0.5"]
    assert main([*args, "--out", str(tmp_path / "x")]) == 2
    assert "which the run does not group by" in capsys.readouterr().err
    # compare per segment, on the CLI: the same report against itself regresses nothing
    report = str(out / "report.json")
    compare = ["compare", report, report, "--group-by", "metadata.topic", "--min-segment-n", "2"]
    assert main([*compare, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["segments"]["regressed"] == [] and data["segments"]["correction"] == "holm"
    assert main(compare) == 0
    assert "regressed segments: none" in capsys.readouterr().out
