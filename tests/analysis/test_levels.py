"""compare, gates and pairwise at a level: a turn-level metric pairs its units by conversation
id and turn index, and its interval and test treat a conversation's turns as one draw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge import Pipeline
from rag_judge.analysis.audit import length_slope
from rag_judge.analysis.compare import CompareOptions, compare_reports
from rag_judge.analysis.gates import RegressionRule, check_gates
from rag_judge.analysis.paired import cluster_sums, paired
from rag_judge.cli import main
from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.judge.pairwise import PairwiseJudge
from rag_judge.judge.preference import outcome_values
from rag_judge.report.model import Report
from rag_judge.stats import clustered_bootstrap_ci, sign_flip_pvalue


def _turn(ranking: list[str], gold: str, answer: str = "a") -> dict[str, Any]:
    return {
        "question": f"where is {gold}?",
        "steps": [{"contexts": [{"id": d, "text": d} for d in ranking]}],
        "answer": answer,
        "references": [f"{gold} is here"],
        "relevance": {gold: 1},
    }


def _conversation(cid: str, rankings: list[list[str]], answers: list[str]) -> Sample:
    turns = [_turn(r, f"g{i}", a) for i, (r, a) in enumerate(zip(rankings, answers, strict=True))]
    return Sample.model_validate({"id": cid, "turns": turns})


# BASE finds each turn's gold at rank 2; NEW at rank 1 in c1 and c2, and loses it in c3's last
# turn. c4 is only in NEW.
BASE = [
    _conversation("c1", [["x", "g0"], ["x", "g1"]], ["g0 is here", "g1"]),
    _conversation("c2", [["x", "g0"], ["x", "g1"], ["x", "g2"]], ["no", "g1 is here", "g2"]),
    _conversation("c3", [["x", "g0"], ["x", "g1"]], ["g0", "g1"]),
]
NEW = [
    _conversation("c1", [["g0"], ["g1"]], ["g0 is here", "g1 is here"]),
    _conversation("c2", [["g0"], ["g1"], ["g2"]], ["g0 is here", "g1 is here", "g2"]),
    _conversation("c3", [["x", "g0"], ["x"]], ["g0", "nothing"]),
    _conversation("c4", [["g0"]], ["g0"]),
]


def _report(samples: list[Sample]) -> Report:
    evaluators = [
        {"type": "retrieval", "metrics": ["mrr"], "per": "turn", "judged": False},
        {"type": "retrieval", "metrics": ["mrr"], "per": "step", "judged": False},
    ]
    config = ExperimentConfig.model_validate({"name": "levels", "evaluators": evaluators})
    return Pipeline(config).run(samples).report


@pytest.fixture(scope="module")
def reports() -> tuple[Report, Report]:
    return _report(BASE), _report(NEW)


def test_turn_metrics_pair_by_conversation_and_turn_index(reports: tuple[Report, Report]) -> None:
    base, new = reports
    found = paired(base, new, "turn.mrr")
    # c1 t0-t1, c2 t0-t2, c3 t0-t1: seven pairs; c4 is only in NEW.
    assert found.clusters == ["c1", "c1", "c2", "c2", "c2", "c3", "c3"]
    assert found.base.tolist() == [0.5] * 7
    assert found.new.tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.0]
    assert found.missing == 0
    assert paired(base, new, "mrr").clusters is None  # a per-sample metric: no clusters


def test_a_turn_comparison_resamples_conversations(reports: tuple[Report, Report]) -> None:
    base, new = reports
    options = CompareOptions(resamples=2000, permutations=1000, seed=3)
    comp = compare_reports(base, new, options, level="turn")
    assert list(comp.metrics) == ["turn.mrr"]  # the level picks its metrics
    m = comp.metrics["turn.mrr"]
    d = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.0, -0.5])
    assert m.n == 7 and m.diff == pytest.approx(2.0 / 7)
    clusters = ["c1", "c1", "c2", "c2", "c2", "c3", "c3"]
    low, high = clustered_bootstrap_ci(d, clusters, resamples=2000, seed=3)
    assert (m.ci_low, m.ci_high) == (low, high)
    # Three conversations, summed differences 1.0, 1.5, -0.5: 2**3 sign vectors, enumerated.
    assert cluster_sums(d, clusters).tolist() == [1.0, 1.5, -0.5]
    p, exact = sign_flip_pvalue(np.array([1.0, 1.5, -0.5]), permutations=1000, seed=3)
    assert (m.p_value, m.exact) == (p, exact) == (0.5, True)
    # Naively, seven independent differences would look more certain than three conversations.
    naive, _ = sign_flip_pvalue(d, permutations=1000, seed=3)
    assert naive < m.p_value


def test_the_level_selects_what_a_comparison_and_a_regression_gate_cover(
    reports: tuple[Report, Report],
) -> None:
    base, new = reports
    assert list(compare_reports(base, new, level="step").metrics) == ["step.mrr"]
    assert list(compare_reports(base, new, level="conversation").metrics) == []
    assert list(compare_reports(base, new).metrics) == ["turn.mrr", "step.mrr"]
    rule = RegressionRule(base, level="turn", max_drop=0.0)
    assert rule.names(new) == ["turn.mrr"]
    result = check_gates(new, {}, rule)
    (check,) = result.checked
    assert check.passed  # 0.5 -> 0.714 over the paired turns
    assert "paired n=7" in check.message
    worse = check_gates(base, {}, RegressionRule(new, level="turn"))
    assert not worse.passed


def test_pairwise_at_turn_level_judges_each_turn_with_a_clustered_interval() -> None:
    judge = PairwiseJudge(rubric="correctness", level="turn", cache=None, resamples=500)
    result = judge.compare(BASE, NEW[:3])
    assert [p.id for p in result.pairs] == [
        "c1#t0", "c1#t1", "c2#t0", "c2#t1", "c2#t2", "c3#t0", "c3#t1",
    ]  # fmt: skip
    assert result.signature.options["level"] == "turn"
    assert result.signature.run["cluster"] == "conversation"
    assert result.win_rate is not None
    by_conversation = [p.id.split("#")[0] for p in result.pairs if p.outcome is not None]
    values = outcome_values([p.outcome for p in result.pairs if p.outcome is not None])
    low, high = clustered_bootstrap_ci(values, by_conversation, resamples=500, seed=0)
    assert result.ci == (low, high)
    plain = PairwiseJudge(rubric="correctness", cache=None).compare(BASE, NEW[:3])
    assert "level" not in plain.signature.options  # the default signs as before
    assert all(p.reason for p in plain.pairs)  # a conversation has no top-level answer


def test_the_command_line_takes_a_level(
    reports: tuple[Report, Report], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = reports
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(base.to_json())
    b.write_text(new.to_json())
    assert main(["compare", str(a), str(b), "--level", "turn", "--format", "json"]) == 0
    (comparison,) = json.loads(capsys.readouterr().out)["comparisons"]
    assert list(comparison["metrics"]) == ["turn.mrr"]
    assert comparison["metrics"]["turn.mrr"]["n"] == 7
    assert main(["gate", str(a), "--baseline", str(b), "--level", "step"]) == 1
    assert "step.mrr" in capsys.readouterr().out


def test_the_audit_reads_a_per_turn_rubric_with_each_turns_answer() -> None:
    evaluators = [
        {"type": "judge", "rubrics": ["answer_relevance"], "per": "turn", "cache": None},
    ]
    config = ExperimentConfig.model_validate({"name": "audit", "evaluators": evaluators})
    report = Pipeline(config).run(BASE).report
    audit = report.audit["turn.answer_relevance"]
    assert audit.n == report.summary["turn.answer_relevance"].n == 7
    # Each verdict is set beside its own turn's answer: lengths 3, 1, 1, 3, 1, 1, 1 words.
    lengths = [len(t.answer.split()) for s in BASE for t in s.conversation_turns() if t.answer]
    assert lengths == [3, 1, 1, 3, 1, 1, 1]
    scores = [u.scores["turn.answer_relevance"] for _, u in report.units("turn.answer_relevance")]
    expected = length_slope(np.array(lengths, dtype=float), np.array(scores, dtype=float))
    assert expected is not None and audit.length_slope == pytest.approx(expected)
