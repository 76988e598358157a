"""The tools evaluator (``type: tools``): hand-built conversations scored by hand, per entry
and pooled; missing inputs and metrics that do not apply; through the Pipeline, the CLI and the
agent demo config; config errors that name the legal set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_judge import EVALUATORS, ConfigError, Pipeline, Sample, load_config, load_dataset
from rag_judge.cli import main
from rag_judge.data.conversation import ExpectedTools, RetrievalStep, ToolStep, Turn
from rag_judge.evaluators import ToolsEvaluator
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.report.html._sample_view import _GROUPS, column_groups
from rag_judge.report.model import Direction, FailureKind, MetricKind
from tests import REPO

METRICS = ("trajectory_match", "tool_precision", "tool_recall", "argument_match", "steps_to_answer")
COMPARED = METRICS[:4]


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": name, "arguments": arguments, "result": "ok"}


# Two turns, an entry for each. Turn 0 searches twice then computes; its entry wants a search
# (any arguments) then the computation, in order. Turn 1 mails the wrong address and never
# logs; its entry wants both, strictly.
PER_TURN = {
    "id": "per-turn",
    "turns": [
        {
            "question": "How deep is the Pacific, in km?",
            "steps": [
                {"query": "Pacific depth", "contexts": ["The Challenger Deep is 10,994 m deep."]},
                tool("search", q="pacific depth"),
                tool("search", q="mariana trench"),
                tool("calc", expr="10994/1000"),
            ],
            "answer": "About 11 km.",
        },
        {
            "question": "Mail it to Ann.",
            "steps": [tool("mail", to="bob@example.org")],
            "answer": "Sent.",
        },
    ],
    "expected_tools": [
        {"turn": 0, "calls": ["search", {"tool": "calc", "arguments": {"expr": "10994/1000"}}],
         "order": "in_order"},
        {"turn": 1, "calls": [{"tool": "mail", "arguments": {"to": "ann@example.org"}}, "log"]},
    ],
}  # fmt: skip
# One entry for the whole conversation: its calls over both turns, in order. A lookup is
# repeated; 20.0 equals 20 as JSON.
WHOLE = {
    "id": "whole",
    "turns": [
        {"question": "Why was I charged twice?", "steps": [tool("lookup", id=7)],
         "answer": "A duplicate charge."},
        {"question": "Refund it.",
         "steps": [tool("lookup", id=7), tool("refund", id=7, amount=20.0)],
         "answer": "Refunded $20."},
    ],
    "expected_tools": [
        {"calls": [{"tool": "lookup", "arguments": {"id": 7}},
                   {"tool": "refund", "arguments": {"id": 7, "amount": 20}}],
         "order": "unordered"},
    ],
}  # fmt: skip
# No expected tools, and turn 1 never answered.
UNLABELLED = {
    "id": "unlabelled",
    "turns": [
        {"question": "Hi", "steps": [tool("greet")], "answer": "Hello."},
        {"question": "And?", "steps": [{"contexts": ["x"]}, {"contexts": ["y"]}]},
    ],
}


def write_lines(path: Path, *rows: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def scored(result: EvaluatorResult, i: int) -> dict[str, Any]:
    """Sample ``i``'s value of each metric, or its failure as (kind, message)."""
    out: dict[str, Any] = {}
    for metric, column in result.scores.items():
        failure = result.errors[i].get(metric)
        out[metric] = column[i] if failure is None else (failure.kind, failure.message)
    return out


def test_conversations_from_jsonl_score_as_computed_by_hand(tmp_path: Path) -> None:
    data = load_dataset(write_lines(tmp_path / "d.jsonl", PER_TURN, WHOLE, UNLABELLED))
    result = ToolsEvaluator().evaluate(list(data))
    per_turn, whole, unlabelled = (scored(result, i) for i in range(3))
    # Turn 0 matches in order (search, then calc); turn 1 lacks the log: strict fails, so 0.
    # Pooled: turn 0 pairs search and calc of 3 calls, turn 1 pairs mail of 1 call: 3/4; of
    # the 2 + 2 expected calls, 3 are called: 3/4. Arguments: search (any) and calc match,
    # mail's address differs: 2 of 3 pairs. Steps: 4 in turn 0 (a retrieval, 3 calls), 1 after.
    assert per_turn == {
        "trajectory_match": 0.0,
        "tool_precision": 0.75,
        "tool_recall": 0.75,
        "argument_match": pytest.approx(2 / 3),
        "steps_to_answer": 5.0,
    }
    # lookup, lookup, refund against lookup, refund: an extra call, so not unordered. 2 of the
    # 3 calls pair, every expected call is made, both pairs' arguments match.
    assert whole == {
        "trajectory_match": 0.0,
        "tool_precision": pytest.approx(2 / 3),
        "tool_recall": 1.0,
        "argument_match": 1.0,
        "steps_to_answer": 3.0,
    }
    lacks = (FailureKind.MISSING_INPUT, "field 'expected_tools' is missing")
    no_answer = (FailureKind.MISSING_INPUT, "no answer in turn 1 (turns count from 0)")
    assert unlabelled == {**dict.fromkeys(COMPARED, lacks), "steps_to_answer": no_answer}


def test_a_call_pairs_only_within_its_own_entry() -> None:
    # Each turn calls the tool the other turn expects: pooled over the entries, nothing pairs.
    turns = (
        Turn(question="a", steps=(ToolStep(tool="mail"),), answer="a"),
        Turn(question="b", steps=(ToolStep(tool="calc"),), answer="b"),
    )
    entries = (ExpectedTools(turn=0, calls=("calc",)), ExpectedTools(turn=1, calls=("mail",)))
    crossed = Sample(id="crossed", turns=turns, expected_tools=entries)
    assert scored(ToolsEvaluator().evaluate([crossed]), 0) == {
        "trajectory_match": 0.0,
        "tool_precision": 0.0,
        "tool_recall": 0.0,
        "argument_match": (FailureKind.NOT_APPLICABLE, "no call was made to an expected tool"),
        "steps_to_answer": 2.0,
    }


def test_config_order_overrides_each_entry_s_own() -> None:
    sample = Sample.model_validate(WHOLE)
    for order, match in [("superset", 1.0), ("in-order", 1.0), ("any-order", 0.0), ("subset", 0.0)]:
        result = ToolsEvaluator(order=order).evaluate([sample])
        assert result.scores["trajectory_match"] == [match], order
        # The ratios read names and arguments, not order.
        assert result.scores["tool_precision"] == [pytest.approx(2 / 3)]


def one_turn(calls: tuple[ToolStep, ...], expected: list[Any], order: str = "strict") -> Sample:
    """An agent's one turn, built in Python: a retrieval, the calls, an answer."""
    turn = Turn(
        question="What is 2 + 2?",
        steps=(RetrievalStep(query="arithmetic", contexts=()), *calls),
        answer="4",
    )
    entry = ExpectedTools.model_validate({"calls": expected, "order": order})
    return Sample(id="agent", turns=(turn,), expected_tools=(entry,))


@pytest.mark.parametrize(
    ("args", "match"), [("exact", 0.0), ("superset", 1.0), ("subset", 0.0), ("ignore", 1.0)]
)
def test_argument_modes_on_a_sample_built_in_python(args: str, match: float) -> None:
    # The call gives an argument more than the expected one states.
    calls = (ToolStep(tool="calc", arguments={"expr": "2+2", "precision": 2}, result=4),)
    sample = one_turn(calls, [{"tool": "calc", "arguments": {"expr": "2+2"}}])
    result = ToolsEvaluator(args=args).evaluate([sample])  # type: ignore[arg-type]
    assert scored(result, 0) == {
        "trajectory_match": match,
        "tool_precision": 1.0,
        "tool_recall": 1.0,
        "argument_match": match,
        "steps_to_answer": 2.0,
    }


def test_an_expected_call_without_arguments_takes_any() -> None:
    calls = (ToolStep(tool="calc", arguments={"expr": "1+3"}), ToolStep(tool="mail"))
    sample = one_turn(calls, ["calc", {"tool": "mail", "arguments": {}}])
    assert scored(ToolsEvaluator().evaluate([sample]), 0)["trajectory_match"] == 1.0
    # Free arguments alone leave nothing to check: argument_match does not apply, never a 1.
    free = one_turn(calls, ["calc", "mail"])
    assert scored(ToolsEvaluator().evaluate([free]), 0)["argument_match"] == (
        FailureKind.NOT_APPLICABLE,
        "no expected call states its arguments",
    )


def test_a_ratio_with_nothing_to_divide_by_does_not_apply_with_its_reason() -> None:
    na = FailureKind.NOT_APPLICABLE
    # Nothing expected, nothing called: the trajectory matches; no ratio has a denominator.
    idle = scored(ToolsEvaluator().evaluate([one_turn((), [])]), 0)
    assert idle == {
        "trajectory_match": 1.0,
        "tool_precision": (na, "no tool was called (precision divides by the calls made)"),
        "tool_recall": (na, "no tool call is expected (recall divides by the expected calls)"),
        "argument_match": (na, "no tool call is expected"),
        "steps_to_answer": 1.0,
    }
    # A call expected, none made: recall is 0, precision and arguments do not apply.
    lazy = scored(ToolsEvaluator().evaluate([one_turn((), [{"tool": "calc", "arguments": {}}])]), 0)
    assert lazy["tool_recall"] == 0.0 and lazy["trajectory_match"] == 0.0
    assert lazy["tool_precision"][0] is na
    assert lazy["argument_match"] == (na, "no call was made to an expected tool")


def test_a_single_turn_sample_is_one_turn_of_one_retrieval() -> None:
    plain = Sample(id="s", question="q", contexts=["c"], answer="a")
    expects = plain.model_copy(update={"expected_tools": (ExpectedTools(calls=()),)})
    result = ToolsEvaluator().evaluate([plain, expects, Sample(id="t", question="q")])
    assert scored(result, 0)["tool_recall"][0] is FailureKind.MISSING_INPUT
    assert scored(result, 1)["trajectory_match"] == 1.0
    assert result.scores["steps_to_answer"] == [1.0, 1.0, None]
    assert result.errors[2]["steps_to_answer"].message == "field 'answer' is missing"


def test_pipeline_reports_kind_direction_scale_and_the_policies_in_the_signature() -> None:
    samples = [Sample.model_validate(r) for r in (PER_TURN, WHOLE, UNLABELLED)]
    report = (
        Pipeline([ToolsEvaluator(metrics=("steps_to_answer", "trajectory_match"))])
        .run(samples)
        .report
    )
    assert list(report.summary) == ["steps_to_answer", "trajectory_match"]
    steps, match = report.summary["steps_to_answer"], report.summary["trajectory_match"]
    assert steps.kind is match.kind is MetricKind.TOOLS
    assert steps.direction is Direction.NEUTRAL and steps.scale == (0.0, None)
    assert match.direction is Direction.HIGHER and match.scale == (0.0, 1.0)
    assert (steps.mean, steps.n, steps.errors) == (4.0, 2, 1)
    assert (match.mean, match.n, match.errors) == (0.0, 2, 1)
    # The unlabelled sample adds no policy; the others were read strict, in order, unordered.
    options = report.signatures["trajectory_match"].options
    assert options["order"] == "strict+in_order+unordered"
    assert (options["args"], options["entries"]) == ("exact", "all")
    assert report.signatures["steps_to_answer"].options["turns"] == "sum"
    # A not-applicable ratio is not an error.
    idle = Pipeline([ToolsEvaluator()]).run([one_turn((), [])]).report.summary
    assert (idle["tool_recall"].n, idle["tool_recall"].errors) == (0, 0)


def test_the_signature_says_the_policies_of_the_whole_run_across_chunks() -> None:
    strict, whole = Sample.model_validate(PER_TURN), Sample.model_validate(WHOLE)
    parts: list[EvaluatorResult] = []
    final = ToolsEvaluator().prepare().evaluate_chunks([[strict], [whole]], parts.append)
    assert parts[1].signatures["trajectory_match"].options["order"] == "unordered"
    assert final.signatures["trajectory_match"].options["order"] == "strict+in_order+unordered"
    fixed = ToolsEvaluator(order="superset", args="ignore").signatures()["trajectory_match"]
    assert (fixed.options["order"], fixed.options["args"]) == ("superset", "ignore")
    assert ToolsEvaluator().signatures()["trajectory_match"].options["order"] == "entry"


def config(tmp_path: Path, evaluator: str) -> Path:
    data = write_lines(tmp_path / "d.jsonl", PER_TURN, WHOLE, UNLABELLED)
    path = tmp_path / "agent.yaml"
    path.write_text(f"dataset: {data}\nseed: 0\nevaluators:\n  - {evaluator}\n", encoding="utf-8")
    return path


def test_rag_judge_run_writes_the_tools_metrics(tmp_path: Path) -> None:
    path = config(tmp_path, "{type: tools, order: superset}")
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    report = json.loads((tmp_path / "run" / "report.json").read_text(encoding="utf-8"))
    summary = report["summary"]
    assert set(summary) == set(METRICS)
    assert {s["kind"] for s in summary.values()} == {"tools"}
    # Superset: the per-turn sample still lacks turn 1's log, the whole one now matches.
    assert summary["trajectory_match"]["mean"] == 0.5
    assert summary["steps_to_answer"]["direction"] == "neutral"
    unlabelled = report["samples"][2]
    assert unlabelled["errors"]["tool_recall"]["kind"] == "missing_input"


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("metrics: [tool_precision, trajectory]", ["'trajectory'", ", ".join(METRICS)]),
        ("metrics: [tool_recall, tool_recall]", ["listed twice: tool_recall"]),
        ("order: sideways", ["'sideways'", "strict, in_order, unordered, subset, superset"]),
        ("args: loose", ["'loose'", "exact, ignore, subset, superset"]),
    ],
)
def test_a_bad_option_fails_naming_the_legal_set(
    tmp_path: Path, option: str, named: list[str]
) -> None:
    path = config(tmp_path, "type: tools")
    path.write_text(path.read_text(encoding="utf-8") + f"    {option}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:5: evaluators[0].{option.split(':')[0]}: ")
    for text in named:
        assert text in str(info.value)


def test_the_agent_demo_runs_as_its_comments_say() -> None:
    assert EVALUATORS["tools"] is ToolsEvaluator
    report = Pipeline.from_yaml(REPO / "configs" / "agent_demo.yaml").run().report
    values = {s.id: tuple(s.scores.get(m) for m in METRICS) for s in report.samples}
    third = pytest.approx(2 / 3)
    assert values == {
        "c01-annual-cost": (1.0, 1.0, 1.0, 1.0, 3.0),
        "c02-invoice-dispute": (1.0, 0.75, 1.0, 1.0, 4.0),
        "c03-eu-outage": (0.0, 1.0, 1.0, 0.0, 3.0),  # the wrong region
        "c04-key-rotation": (1.0, third, 1.0, 1.0, 5.0),
        "c05-upgrade": (0.0, 1.0, third, 1.0, 3.0),  # the plan never changed
        "s06-team-sla": (1.0, None, None, None, 1.0),
        "s07-status-now": (0.0, None, 0.0, None, 1.0),
    }
    # Retrieval and ROUGE read the top-level fields: the two single-turn questions only.
    for metric in ("ndcg@3", "rougeL_f1"):
        assert (report.summary[metric].n, report.summary[metric].errors) == (2, 5)


def test_tools_metrics_have_their_own_column_group_on_the_page() -> None:
    assert {k for _, kinds in _GROUPS for k in kinds} == set(MetricKind)
    samples = [Sample.model_validate(r) for r in (PER_TURN, WHOLE)]
    report = Pipeline([ToolsEvaluator()]).run(samples).report
    assert column_groups(report, list(report.summary)) == [("tools", list(METRICS))]
