"""pipeline/rejudge.py: a config's judge evaluators over chosen samples give the verdicts the
full run gave those samples, and nothing else runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_judge.config import load_config
from rag_judge.errors import ConfigError
from rag_judge.pipeline import Pipeline
from rag_judge.pipeline.rejudge import (
    judge_config,
    judged_samples,
    rejudge,
    report_config,
    seeded_subset,
)
from rag_judge.report.model import MetricKind

DEMO = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"


def _judge_only_demo() -> Pipeline:
    cfg = load_config(DEMO)
    keep = [e for e in cfg.evaluators if e.type in ("retrieval", "judge", "grounding")]
    return Pipeline(cfg.model_copy(update={"evaluators": keep}))


def test_seeded_subset_is_stable_and_in_order() -> None:
    ids = [f"q{i:02d}" for i in range(40)]
    a = seeded_subset(ids, 10, seed=3)
    assert a == seeded_subset(ids, 10, seed=3)
    assert a != seeded_subset(ids, 10, seed=4)
    assert a == sorted(a) and len(set(a)) == 10
    assert seeded_subset(ids, 99, seed=3) == ids
    with pytest.raises(ConfigError, match="at least 1"):
        seeded_subset(ids, 0, seed=3)


def test_rejudge_gives_the_runs_verdicts_on_a_subset() -> None:
    full = _judge_only_demo().run()
    cfg = report_config(full.report)
    assert [e.type for e in judge_config(cfg).evaluators] == ["judge", "grounding"]
    chosen = seeded_subset(full.report.ids(), 6, seed=0)
    samples = [s for s in judged_samples(full.report) if s.id in chosen]
    again = rejudge(cfg, samples).report
    assert again.ids() == chosen
    summary = full.report.summary
    judge_metrics = [m for m, s in summary.items() if s.kind is MetricKind.JUDGE]
    assert judge_metrics and set(judge_metrics) <= set(again.summary)
    assert "ndcg@5" not in again.summary  # the retrieval evaluator did not run
    for metric in judge_metrics:
        before, after = full.report.column(metric), again.column(metric)
        assert {sid: before[sid] for sid in chosen} == after, metric
    assert not again.labels and not again.estimates


def test_a_config_without_a_judge_is_refused() -> None:
    cfg = load_config(DEMO)
    lexical = cfg.model_copy(update={"evaluators": [cfg.evaluators[1]]})
    with pytest.raises(ConfigError, match="has no judge evaluator"):
        judge_config(lexical)
