"""Per-turn and per-step rows in a conversation's result, and which hop degraded: for each
failing turn, the first step whose retrieval metric or tool call fell below its threshold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge import ConfigError, Pipeline
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.data.sample import Sample
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.pipeline.hops import degraded, unit_thresholds
from rag_judge.report.html import render_html
from rag_judge.report.levels import unit_tables
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import Degradation, Miss, Report, SampleFile, UnitResult


def _hop(*ids: str) -> dict[str, Any]:
    return {"contexts": [{"id": d, "text": d} for d in ids]}


# c1: turn 0 has two hops, the first misses d1 (ranked 2nd) and the second finds it first;
# turn 1 calls a tool the turn did not expect, then retrieves d5 first.
# c2: one turn, one hop that finds nothing relevant.
C1 = Sample.model_validate(
    {
        "id": "c1",
        "turns": [
            {"question": "q", "steps": [_hop("d2", "d1"), _hop("d1", "d3")],
             "answer": "a", "relevance": {"d1": 1}},
            {"question": "q2",
             "steps": [{"tool": "calc", "arguments": {"x": 1}}, _hop("d4", "d5")],
             "answer": "b", "relevance": {"d5": 1}},
        ],
        "expected_tools": [{"turn": 1, "calls": [{"tool": "calc", "arguments": {"x": 2}}]}],
    }
)  # fmt: skip
C2 = Sample.model_validate(
    {"id": "c2", "turns": [{"question": "q", "steps": [_hop("d7", "d6")], "answer": "c",
                            "relevance": {"d8": 1}}]}
)  # fmt: skip
PLAIN = Sample.model_validate(
    {"id": "p", "question": "q", "contexts": [{"id": "x", "text": "x"}], "answer": "a",
     "relevance": {"x": 1}}
)  # fmt: skip
INV_LOG3 = 1 / np.log2(3)


def _config(**extra: Any) -> ExperimentConfig:
    evaluators = [
        {"type": "retrieval", "metrics": ["ndcg@10", "mrr"], "per": "turn", "judged": False},
        {"type": "retrieval", "metrics": ["ndcg@10"], "per": "step", "judged": False},
    ]
    return ExperimentConfig.model_validate({"name": "hops", "evaluators": evaluators, **extra})


def _report(samples: list[Sample], **extra: Any) -> Report:
    return Pipeline(_config(**extra)).run(samples).report


def test_a_conversation_holds_a_row_per_turn_then_its_steps() -> None:
    c1, c2 = _report([C1, C2]).samples
    assert [(u.id, u.turn, u.step) for u in c1.units] == [
        ("c1#t0", 0, None), ("c1#t0.s0", 0, 0), ("c1#t0.s1", 0, 1),
        ("c1#t1", 1, None), ("c1#t1.s1", 1, 1),  # step 0 of turn 1 is the tool call
    ]  # fmt: skip
    t0, s0, s1, t1, t1s1 = c1.units
    # Turn 0's union is [d2, d1, d3]: d1 at rank 2. Its first hop has d1 at 2, the second at 1.
    assert t0.scores == pytest.approx({"turn.ndcg@10": INV_LOG3, "turn.mrr": 0.5})
    assert s0.scores == pytest.approx({"step.ndcg@10": INV_LOG3})
    assert s1.scores == {"step.ndcg@10": 1.0}
    assert t1.scores == pytest.approx({"turn.ndcg@10": INV_LOG3, "turn.mrr": 0.5})
    assert t1s1.scores == pytest.approx({"step.ndcg@10": INV_LOG3})
    assert [(u.id, u.scores) for u in c2.units] == [
        ("c2#t0", {"turn.ndcg@10": 0.0, "turn.mrr": 0.0}),
        ("c2#t0.s0", {"step.ndcg@10": 0.0}),
    ]
    # No threshold, no degradation; the conversation's own scores stay empty.
    assert c1.degraded == [] and c1.scores == {}


def test_the_first_hop_below_its_threshold_is_named_per_failing_turn() -> None:
    thresholds = {"turn.mrr": ">= 0.75", "step.ndcg@10": ">= 0.9"}
    c1, c2 = _report([C1, C2], thresholds=thresholds).samples
    assert c1.degraded == [
        Degradation(
            turn=0,
            misses=[Miss(metric="turn.mrr", value=0.5, threshold=">= 0.75")],
            step=0,  # the first hop ranked d1 second; the second hop was fine
            step_misses=[Miss(metric="step.ndcg@10", value=INV_LOG3, threshold=">= 0.9")],
        ),
        Degradation(
            turn=1,
            misses=[Miss(metric="turn.mrr", value=0.5, threshold=">= 0.75")],
            step=0,  # calc(x=1) where calc(x=2) was expected, before the hop
            step_misses=[Miss(metric="tool_call", call='calc({"x":1})')],
        ),
    ]
    assert [(d.turn, d.step) for d in c2.degraded] == [(0, 0)]


def test_a_gate_on_a_unit_metric_serves_as_its_threshold() -> None:
    c1, c2 = _report([C1, C2], gates={"turn.ndcg@10": ">= 0.5"}).samples
    assert c1.degraded == []  # 0.63 per turn: no turn fails
    assert c2.degraded == [
        Degradation(turn=0, misses=[Miss(metric="turn.ndcg@10", value=0.0, threshold=">= 0.5")])
    ]  # no step threshold, so no step is named: the turn failed on its own
    # A threshold given beside the gate wins for the units.
    c1, _ = _report([C1, C2], gates={"turn.mrr": ">= 0.9"}, thresholds={"turn.mrr": 0.5}).samples
    assert c1.degraded == []


def test_a_turn_without_a_value_did_not_fall_below_anything() -> None:
    row = UnitResult(id="c#t0", turn=0, scores={"turn.mrr": None})
    found = degraded(C2, [row], unit_thresholds({"turn.mrr": ">= 0.5"}, {}))
    assert found == []


def test_a_single_turn_sample_is_its_own_turn_and_step() -> None:
    (p,) = _report([PLAIN]).samples
    assert [(u.id, u.turn, u.step) for u in p.units] == [("p", 0, None), ("p", 0, 0)]
    assert p.units[0].scores == {"turn.ndcg@10": 1.0, "turn.mrr": 1.0}


def test_reports_without_units_write_neither_key(tmp_path: Path) -> None:
    report = Pipeline([RetrievalEvaluator(metrics=["mrr"], judged=False)]).run([PLAIN]).report
    (sample,) = json.loads(report.to_json())["samples"]
    assert list(sample) == ["id", "scores", "errors", "judgments", "sample"]


def test_units_and_degradations_survive_report_json(tmp_path: Path) -> None:
    report = _report([C1, C2], thresholds={"turn.mrr": ">= 0.75"})
    again = Report.model_validate_json(report.to_json())
    assert [s.units for s in again.samples] == [s.units for s in report.samples]
    assert [s.degraded for s in again.samples] == [s.degraded for s in report.samples]


def test_a_threshold_must_name_a_per_unit_metric(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    lines = [
        "name: hops",
        "dataset: d.jsonl",
        "evaluators:",
        "  - {type: retrieval, metrics: [mrr], per: turn, judged: false}",
        "thresholds:",
        "  ndcg@10: 0.5",
    ]
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"c.yaml:6.*'ndcg@10' is not a per-unit metric"):
        load_config(config)
    config.write_text("\n".join([*lines[:-1], "  turn.mrr: about 0.5"]) + "\n")
    with pytest.raises(ConfigError, match=r"c.yaml:6.*bad threshold 'about 0.5'"):
        load_config(config)
    # The names are checked against the metrics when the evaluators are prepared: before work.
    with pytest.raises(ConfigError, match=r"thresholds.turn.ndcg@5: .*did you mean 'turn.ndcg@10'"):
        Pipeline(_config(thresholds={"turn.ndcg@5": 0.5})).prepare()


def test_a_table_per_level_lists_every_unit() -> None:
    report = _report([C1, C2])
    turns, steps = unit_tables(report, limit=100)
    assert [c.name for c in turns.columns] == ["conversation", "turn", "turn.ndcg@10", "turn.mrr"]
    assert turns.rows == [
        ["c1", "0", "0.6309", "0.5000"],
        ["c1", "1", "0.6309", "0.5000"],
        ["c2", "0", "0.0000", "0.0000"],
    ]
    assert [c.name for c in steps.columns] == ["conversation", "turn", "step", "step.ndcg@10"]
    assert steps.rows == [
        ["c1", "0", "0", "0.6309"],
        ["c1", "0", "1", "1.0000"],
        ["c1", "1", "1", "0.6309"],  # step 0 of turn 1 is the tool call
        ["c2", "0", "0", "0.0000"],
    ]
    (cut, _) = unit_tables(report, limit=2)
    assert len(cut.rows) == 2 and "The first 2 of 3 rows" in cut.notes[-1]
    markdown = render_markdown(report)
    assert "## Turns" in markdown and "| c1 | 1 | 1 | 0.6309 |" in markdown
    page = render_html(report)
    assert "id=turn-values" in page and "id=step-values" in page


def test_grounding_scores_turns_when_it_restates_no_judge_rubric() -> None:
    grounding = {"type": "grounding", "per": "turn", "cache": None}
    config = ExperimentConfig.model_validate({"name": "g", "evaluators": [grounding]})
    report = Pipeline(config).run([C1, C2]).report
    assert report.summary["turn.answer_rate"].n == 3  # three turns, each answered
    assert all(u.scores.get("turn.claims") is not None for s in report.samples for u in s.units)
    # Beside a judge scoring faithfulness per sample, it would restate that rubric's values
    # per sample, which a turn's values cannot be aligned with.
    judge = {"type": "judge", "rubrics": ["faithfulness"], "cache": None}
    config = ExperimentConfig.model_validate({"name": "g", "evaluators": [judge, grounding]})
    with pytest.raises(ConfigError, match=r"evaluators\[1\].per: grounding reads or restates"):
        Pipeline(config).prepare()


def test_per_unit_only_runs_keep_their_samples_in_a_file_past_inline_samples() -> None:
    report = _report([C1, C2, PLAIN], inline_samples=2)
    assert isinstance(report.samples, SampleFile)
    assert [s.id for s in report.samples] == ["c1", "c2", "p"]
    assert [len(s.units) for s in report.samples] == [5, 2, 2]


def test_a_rubric_scored_per_turn_is_not_restated_per_sample() -> None:
    evaluators = [
        {"type": "judge", "rubrics": ["faithfulness"], "per": "turn", "cache": None},
        {"type": "grounding", "per": "turn", "cache": None},
    ]
    pipeline = Pipeline(ExperimentConfig.model_validate({"name": "g", "evaluators": evaluators}))
    assert "faithfulness_answered" not in pipeline.metric_infos()
    report = pipeline.run([C1]).report
    assert "turn.faithfulness" in report.summary and "turn.answer_rate" in report.summary
    assert not any(m.endswith("_answered") for m in report.summary)


def test_a_config_without_thresholds_records_none() -> None:
    assert "thresholds" not in _config().model_dump(mode="json")
    assert _config(thresholds={"turn.mrr": 0.5}).model_dump(mode="json")["thresholds"] == {
        "turn.mrr": 0.5
    }
