"""Every metric rag-judge defines declares which way it improves, as docs/metric-direction.md
says; regression gates, compare's change column and report.html's shading read it."""

from __future__ import annotations

import json
import re

import pytest

from rag_judge import Pipeline, read_jsonl
from rag_judge.analysis.compare import compare_all
from rag_judge.analysis.gates import RegressionRule, check_gates
from rag_judge.cli.compare import render_markdown
from rag_judge.errors import ConfigError
from rag_judge.evaluators import EVALUATORS
from rag_judge.evaluators.grounding import GroundingEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.judge.rubrics import BUILTIN_RUBRICS
from rag_judge.metrics.retrieval import METRIC_FAMILIES
from rag_judge.pipeline import LATENCY, summarize
from rag_judge.report.html._sample_view import table_row
from rag_judge.report.html.charts import RANGE, UNIT
from rag_judge.report.model import (
    Direction,
    MetricInfo,
    MetricKind,
    MetricSummary,
    Report,
    SampleResult,
    Signature,
)
from tests import REPO

PAGE = REPO / "docs" / "metric-direction.md"
RUBRIC = "<rubric>"


def documented() -> dict[str, Direction]:
    """The page's table: each metric named in a row's first cell (``ndcg@k`` read as its
    family, ``ndcg``) with the row's direction."""
    section = PAGE.read_text(encoding="utf-8").split("## Every built-in metric", 1)[1]
    table: dict[str, Direction] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        names, _, direction, _ = (c.strip() for c in line.strip("|").split(" | "))
        for name in re.findall(r"`([^`]+)`", names):
            key = name.partition("@")[0]  # mrr and mrr@k: one family, listed in one row
            assert table.get(key, Direction(direction)) is Direction(direction), name
            table[key] = Direction(direction)
    return table


def _key(metric: str, rubrics: set[str]) -> str:
    """A produced metric as the table names it: a retrieval metric by its family, a judge
    rubric and its twins by the ``<rubric>`` placeholder."""
    for suffix in ("", "_norm", "_answered"):
        if metric.endswith(suffix) and metric.removesuffix(suffix) in rubrics:
            return RUBRIC + suffix
    return metric.removeprefix("doc_").partition("@")[0]


def _retrieval_names() -> list[str]:
    forms = {"yes": ["{}@5"], "opt": ["{}", "{}@5"], "no": ["{}"], "level": ["{}@0.5"],
             "mult": ["{}@0.2"]}  # fmt: skip
    return [form.format(f) for f, need in METRIC_FAMILIES.items() for form in forms[need]]


def built_in() -> dict[str, Direction]:
    """Every built-in evaluator's metrics (every retrieval family, at both levels; every
    ROUGE type and measure; chrF at each word order; every built-in rubric) with the direction
    their ``metric_info`` declares, every tools metric, and the target's latency."""
    evaluators = [
        RetrievalEvaluator(metrics=tuple(_retrieval_names())),
        RetrievalEvaluator(metrics=tuple(_retrieval_names()), level="document"),
        EVALUATORS["rouge"](),
        EVALUATORS["bleu"](),
        *(EVALUATORS["chrf"](word_order=n) for n in (0, 1, 2)),
        EVALUATORS["ter"](),
        EVALUATORS["bertscore"](),
        JudgeEvaluator(rubrics=tuple(BUILTIN_RUBRICS)),
        GroundingEvaluator(),
        EVALUATORS["tools"](),
    ]
    declared = {m: e.metric_info(m).direction for e in evaluators for m in e.metric_names()}
    return {**declared, "latency_s": LATENCY.direction}


def test_every_built_in_metric_declares_the_direction_the_docs_table_gives() -> None:
    table = documented()
    rubrics = set(BUILTIN_RUBRICS)
    seen: set[str] = set()
    for metric, direction in built_in().items():
        key = _key(metric, rubrics)
        assert key in table, f"{metric} is not in docs/metric-direction.md"
        assert direction is table[key], f"{metric}: declares {direction.value}, the docs say "
        seen.add(key)
    # every row names a metric rag-judge makes (<rubric>_answered: the run below)
    assert set(table) - seen == {RUBRIC + "_answered"}
    assert {_key(m, rubrics): d for m, d in built_in().items() if d is not Direction.HIGHER} == {
        k: d for k, d in table.items() if d is not Direction.HIGHER
    }


def test_a_run_s_report_carries_each_metric_s_direction() -> None:
    # judge + grounding with the stub: the summary copies each metric's declared direction,
    # <rubric>_answered included, and report.json keeps it.
    samples = list(read_jsonl(REPO / "configs" / "data" / "demo.jsonl"))[:4]
    judge = JudgeEvaluator(rubrics=("faithfulness",), cache=None)
    grounding = GroundingEvaluator(split="sentences", cache=None, conditioned=("faithfulness",))
    report = Pipeline([judge, grounding]).run(samples).report
    table = documented()
    for metric, summary in report.summary.items():
        assert summary.direction is table[_key(metric, {"faithfulness"})], metric
    assert "faithfulness_answered" in report.summary
    again = Report.model_validate(json.loads(report.to_json()))
    assert json.loads(report.to_json())["summary"]["claims"]["direction"] == "neutral"
    assert again.summary["over_refusal_rate"].direction is Direction.LOWER
    assert again.summary["claims"].direction is Direction.NEUTRAL


def test_a_report_written_before_directions_reads_lower_is_better_as_lower() -> None:
    old = MetricSummary.model_validate({"mean": 0.4, "n": 3, "lower_is_better": True})
    assert old.direction is Direction.LOWER and old.lower_is_better
    assert MetricSummary.model_validate({"mean": 0.4, "n": 3}).direction is Direction.HIGHER
    assert MetricInfo(lower_is_better=True).direction is Direction.LOWER  # type: ignore[call-arg]
    assert "lower_is_better" not in MetricSummary(mean=0.1, n=1).model_dump()


# ---- the readers: gates, compare, the heat map --------------------------------------------------


def _report(metric: str, values: list[float], info: MetricInfo) -> Report:
    samples = [SampleResult(id=f"s{i}", scores={metric: v}) for i, v in enumerate(values)]
    summary = summarize(values, resamples=100, confidence=0.95, seed=0, info=info)
    return Report(
        summary={metric: summary}, samples=samples, signatures={metric: Signature(name=metric)}
    )


def test_a_100x_latency_regression_fails_the_baseline_gate_and_an_improvement_passes() -> None:
    # latency_s as the pipeline summarises it, with the target step's MetricInfo
    fast = _report("latency_s", [0.01, 0.02, 0.015, 0.01], LATENCY)
    slow = _report("latency_s", [1.0, 2.0, 1.5, 1.0], LATENCY)
    (check,) = check_gates(slow, {}, RegressionRule(fast, max_drop=0.05)).checked
    assert not check.passed
    assert check.message == (
        "latency_s = 1.3750 (baseline 0.0138, paired n=4, max_drop 0.05: rose 1.3613)"
    )
    assert (check.op, check.bound) == ("<=", pytest.approx(0.01375 + 0.05))
    assert check_gates(fast, {}, RegressionRule(slow, max_drop=0.0)).passed


def test_a_neutral_metric_is_not_gated_unless_named_and_then_refused() -> None:
    neutral = MetricInfo(kind=MetricKind.JUDGE, scale=(0.0, None), direction=Direction.NEUTRAL)
    base, new = _report("claims", [3, 4, 5], neutral), _report("claims", [1, 1, 1], neutral)
    assert check_gates(new, {}, RegressionRule(base, max_drop=0.0)).checked == []
    with pytest.raises(ConfigError, match=r"regression gate 'claims': a neutral metric"):
        check_gates(new, {}, RegressionRule(base, max_drop=0.0, metrics=["claims"]))
    # --lower-is-better reads it as lower: a fall is then an improvement
    rule = RegressionRule(base, max_drop=0.0, metrics=["claims"], lower_is_better=["claims"])
    assert check_gates(new, {}, rule).passed


@pytest.mark.parametrize(
    ("direction", "change"),
    [(Direction.HIGHER, "worse"), (Direction.LOWER, "better"), (Direction.NEUTRAL, "–")],
)
def test_compare_reads_a_fall_in_the_metric_s_direction(direction: Direction, change: str) -> None:
    info = MetricInfo(kind=MetricKind.JUDGE, direction=direction)
    base = _report("claim_contradiction", [0.5, 0.6, 0.7, 0.4], info)
    new = _report("claim_contradiction", [0.1, 0.2, 0.1, 0.0], info)
    result = compare_all(base, [("NEW", new)], correction="holm")
    mc = result.comparisons[0].metrics["claim_contradiction"]
    assert mc.direction is direction and (mc.change() or "–") == change
    assert result.to_dict()["comparisons"][0]["metrics"]["claim_contradiction"]["direction"] == (
        direction
    )
    row = next(ln for ln in render_markdown(result).splitlines() if ln.startswith("| claim_"))
    # one p-value format in a column: four decimals (exact enumeration: 2/16 here)
    assert row.split(" | ")[4:9] == ["-0.4500", change, "[-0.5500, -0.4000]", "0.1250", "0.1250"]


def test_p_values_print_in_one_format() -> None:
    from rag_judge.report.format import p_value

    assert [p_value(p) for p in (1.0, 0.08429, 0.0005999, 1 / 10001, None)] == [
        "1.0000", "0.0843", "0.0006", "<0.0001", "–",
    ]  # fmt: skip


def test_the_heat_map_shades_a_lower_is_better_metric_the_other_way_round() -> None:
    r = SampleResult(
        id="s", scores={"claim_support": 1.0, "claim_contradiction": 1.0, "answer_rate": 1.0,
                        "support_rank": 1.0, "ter": 0.0}
    )  # fmt: skip
    directions = {
        "claim_support": Direction.HIGHER,
        "claim_contradiction": Direction.LOWER,
        "answer_rate": Direction.NEUTRAL,
        "support_rank": Direction.LOWER,
        "ter": Direction.LOWER,
    }
    scales = {m: UNIT for m in directions} | {"support_rank": RANGE, "ter": RANGE}
    row = table_row(r, list(directions), scales, directions)
    # a support of 1 is the darkest; a contradiction rate of 1 the palest; a neutral share
    # and an unbounded scale are not shaded
    assert [c.shade for c in row.cells] == [4, 0, 0, 0, 0]
    low = SampleResult(id="t", scores={"claim_support": 0.0, "claim_contradiction": 0.0})
    pair = ["claim_support", "claim_contradiction"]
    assert [c.shade for c in table_row(low, pair, scales, directions).cells] == [0, 4]
