"""An evaluator scored per retrieval step or per turn (``per: step | turn``): its summary is
the mean over the units, its interval the bootstrap clustered by conversation, its names and
signature say the level; the default leaves a run as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge import ConfigError, Pipeline
from rag_judge.analysis.gates import check_gates
from rag_judge.config import load_config
from rag_judge.data.sample import Sample
from rag_judge.data.units import turn_samples
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.evaluators.rouge import RougeEvaluator
from rag_judge.evaluators.sacrebleu import BleuEvaluator
from rag_judge.report.model import Report
from rag_judge.stats import clustered_bootstrap_ci


def _hop(*ids: str) -> dict[str, Any]:
    return {"contexts": [{"id": d, "text": d} for d in ids]}


# Two conversations, four retrieval steps. c1: a turn of two hops, then a turn of one hop
# beside a tool call (so that hop is step 1). c2: one turn of one hop. Binary gold.
C1 = Sample.model_validate(
    {
        "id": "c1",
        "turns": [
            {"question": "q", "steps": [_hop("d1", "d2"), _hop("d3", "d1")],
             "answer": "a", "relevance": {"d1": 1}},
            {"question": "q2", "steps": [{"tool": "calc", "arguments": {}}, _hop("d4", "d5")],
             "answer": "b", "relevance": {"d5": 1}},
        ],
    }
)  # fmt: skip
C2 = Sample.model_validate(
    {"id": "c2", "turns": [{"question": "q", "steps": [_hop("d7", "d6")], "answer": "c",
                            "relevance": {"d8": 1}}]}
)  # fmt: skip
# NDCG@10 of each step by hand, with one relevant document: 1 / log2(rank + 1).
STEPS = [1.0, 1 / np.log2(3), 1 / np.log2(3), 0.0]
STEP_CONVERSATIONS = ["c1", "c1", "c1", "c2"]
# Per turn, the union of the turn's hops: c1 turn 0 [d1, d2, d3], turn 1 [d4, d5]; c2 [d7, d6].
TURNS = [1.0, 1 / np.log2(3), 0.0]


def _run(evaluator: RetrievalEvaluator, samples: list[Sample]) -> Any:
    return Pipeline([evaluator]).run(samples).report


def test_a_step_level_metric_is_the_mean_over_steps_with_a_clustered_interval() -> None:
    report = _run(RetrievalEvaluator(metrics=["ndcg@10"], per="step", judged=False), [C1, C2])
    s = report.summary["step.ndcg@10"]
    assert s.n == 4
    assert s.mean == pytest.approx(sum(STEPS) / 4)  # 0.5655
    assert s.mean == pytest.approx(0.565464, abs=1e-6)
    expected = clustered_bootstrap_ci(np.array(STEPS), STEP_CONVERSATIONS, resamples=1000, seed=0)
    assert (s.ci_low, s.ci_high) == pytest.approx(expected, abs=1e-12)
    # Resampling conversations: c2's one step is 0, c1's three average 0.754, so an interval
    # drawn from two conversations spans from c2 alone (0) to c1 alone.
    assert s.ci_low == 0.0
    assert s.ci_high == pytest.approx(sum(STEPS[:3]) / 3)
    assert "ndcg@10" not in report.summary
    sig = report.signatures["step.ndcg@10"]
    assert sig.name == "step.ndcg@10"
    assert sig.options["per"] == "step"
    assert sig.render().endswith("|per:step|ci:bootstrap-1000@0.95|seed:0|cluster:conversation")
    # The units' values are in the summary only: a sample holds one value per metric.
    assert [r.scores for r in report.samples] == [{}, {}]


def test_a_turn_level_metric_scores_the_union_of_the_turns_hops() -> None:
    report = _run(RetrievalEvaluator(metrics=["ndcg@10"], per="turn", judged=False), [C1, C2])
    s = report.summary["turn.ndcg@10"]
    assert (s.n, s.mean) == (3, pytest.approx(sum(TURNS) / 3))
    expected = clustered_bootstrap_ci(np.array(TURNS), ["c1", "c1", "c2"], resamples=1000)
    assert (s.ci_low, s.ci_high) == pytest.approx(expected, abs=1e-12)


def test_step_and_conversation_levels_report_side_by_side() -> None:
    # A single-turn sample is its own one step: its ndcg@10 per step equals its own.
    single = Sample(id="s", contexts=[{"id": "d2"}, {"id": "d1"}], relevance={"d1": 1})
    result = Pipeline(
        [
            RetrievalEvaluator(metrics=["ndcg@10"], judged=False),
            RetrievalEvaluator(metrics=["ndcg@10"], per="step", judged=False),
        ]
    ).run([single])
    summary = result.report.summary
    assert summary["ndcg@10"].mean == summary["step.ndcg@10"].mean == pytest.approx(1 / np.log2(3))
    assert result.report.samples[0].scores == {"ndcg@10": pytest.approx(1 / np.log2(3))}
    assert result.steps["evaluators[1] (retrieval)"] == ["step.ndcg@10"]


def test_a_turn_level_generation_metric_reads_each_turns_answer() -> None:
    turns = Sample.model_validate(
        {"id": "c", "turns": [{"question": "q", "answer": "a b", "references": "a b"},
                              {"question": "q", "answer": "x y", "references": "a b"}]}
    )  # fmt: skip
    rouge = RougeEvaluator(rouge_types=("rougeL",), measures=("f1",), per="turn")
    report = Pipeline([rouge]).run([turns]).report
    # Turn 0 repeats its reference (F1 1), turn 1 shares no word with it (F1 0).
    assert report.summary["turn.rougeL_f1"].n == 2
    assert report.summary["turn.rougeL_f1"].mean == pytest.approx(0.5)


def test_the_default_level_is_left_out_of_dumps_and_signatures() -> None:
    plain = RetrievalEvaluator(metrics=["ndcg@10"])
    assert "per" not in plain.model_dump(mode="json")
    assert "per" not in plain.signature("ndcg@10").options
    stepped = RetrievalEvaluator(metrics=["ndcg@10"], per="step")
    assert stepped.model_dump(mode="json")["per"] == "step"
    assert RetrievalEvaluator.model_validate(stepped.model_dump(mode="json")) == stepped


def test_a_bad_level_names_the_legal_set_and_the_config_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("evaluators:\n  - type: retrieval\n    per: hop\n")
    with pytest.raises(ConfigError, match=r"p.yaml:3: evaluators\[0\]\.per") as err:
        load_config(path)
    assert str(err.value).endswith(
        "evaluators[0].per: 'hop' is not a legal value; legal values: conversation, turn, step"
    )


def test_one_metric_twice_at_one_level_clashes() -> None:
    # (At two levels it does not: test_step_and_conversation_levels_report_side_by_side.)
    twice = [RetrievalEvaluator(metrics=["mrr"], per="step", judged=False)] * 2
    with pytest.raises(ConfigError, match=r"'step\.mrr' is produced by evaluators\[0\]"):
        Pipeline(twice).prepare()


def test_a_per_step_report_writes_and_loads_back(tmp_path: Path) -> None:
    result = Pipeline([RetrievalEvaluator(metrics=["ndcg@10"], per="step", judged=False)]).run(
        [C1, C2]
    )
    paths = result.write(tmp_path)
    loaded = Report.load(paths["json"])
    assert loaded.summary["step.ndcg@10"].mean == pytest.approx(sum(STEPS) / 4)
    assert loaded.signatures["step.ndcg@10"] == result.report.signatures["step.ndcg@10"]
    assert loaded.config["evaluators"][0]["per"] == "step"
    assert "step.ndcg@10" in paths["md"].read_text()
    assert result.failure_counts() == {"evaluators[0] (retrieval)": (0, 4)}


def test_an_evaluator_that_reads_another_runs_per_conversation_only() -> None:
    reader = RetrievalEvaluator(metrics=["ndcg@10"], relevance_from="context_relevance", per="step")
    with pytest.raises(ConfigError, match=r"evaluators\[0\]\.per: retrieval reads or restates"):
        Pipeline([reader]).prepare()


def test_a_gate_names_the_prefixed_metric() -> None:
    report = _run(RetrievalEvaluator(metrics=["ndcg@10"], per="step", judged=False), [C1, C2])
    passed = check_gates(report, {"step.ndcg@10": ">= 0.56"})
    failed = check_gates(report, {"step.ndcg@10": ">= 0.57"})  # the mean is 0.5655
    assert (passed.passed, failed.passed) == (True, False)


def test_a_corpus_metric_per_turn_resamples_its_units_statistics_by_conversation() -> None:
    def conversation(cid: str, answers: list[str]) -> Sample:
        turns = [{"question": "q", "answer": a, "references": "the cat sat on the mat"}
                 for a in answers]  # fmt: skip
        return Sample.model_validate({"id": cid, "turns": turns})

    samples = [
        conversation("c1", ["the cat sat on the mat", "a cat sat on a mat"]),
        conversation("c2", ["the dog ran", "the cat sat on the mat today"]),
    ]
    report = Pipeline([BleuEvaluator(per="turn")]).run(samples).report
    units = [u for s in samples for u in turn_samples(s)]
    stats = BleuEvaluator().statistics(units)
    s = report.summary["turn.bleu"]
    assert (s.n, s.mean) == (4, pytest.approx(stats.score(stats.rows)))
    expected = clustered_bootstrap_ci(
        stats.rows, ["c1", "c1", "c2", "c2"], resamples=1000, statistic=stats.score
    )
    assert (s.ci_low, s.ci_high) == pytest.approx(expected, abs=1e-12)
    assert s.ci_low < s.mean < s.ci_high
