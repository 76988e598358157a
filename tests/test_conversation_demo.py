"""The conversation demo (configs/conversations.yaml) does what its comments and the README say:
six conversations driven twice (replayed and with the stub user), scored per hop, per turn and
per conversation, with the hop where a failing turn degraded, and the two runs compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge.cli import main
from rag_judge.report.model import Degradation, Miss, Report

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conversations")
    config = REPO / "configs" / "conversations.yaml"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    return out


def test_six_conversations_replayed_turn_by_turn(run: Path) -> None:
    report = Report.load(run / "user-replayed")
    assert [s.id for s in report.samples] == [
        "conv-pricing", "conv-sla", "conv-keys", "conv-invoice", "conv-transfer", "conv-regions",
    ]  # fmt: skip
    driven = [s.sample.driven for s in report.samples if s.sample is not None]
    assert [(d.mode, d.turns, d.stopped) for d in driven if d is not None] == [
        ("replay", 2, "dataset_end"), ("replay", 2, "dataset_end"), ("replay", 3, "dataset_end"),
        ("replay", 2, "dataset_end"), ("replay", 1, "dataset_end"), ("replay", 2, "dataset_end"),
    ]  # fmt: skip
    summary = report.summary
    # Every dataset turn is scored with its gold: 12 turns, one hop each.
    assert (summary["turn.ndcg@3"].n, summary["step.ndcg@3"].n) == (12, 12)
    assert summary["turn.ndcg@3"].mean == pytest.approx(summary["step.ndcg@3"].mean)
    assert report.signatures["step.ndcg@3"].run["cluster"] == "conversation"
    # The agent looks up the first organization a message names: right for conv-invoice,
    # wrong for conv-transfer, which names org_1100 before the org_2200 it asks about.
    tools = {s.id: s.scores.get("argument_match") for s in report.samples}
    assert (tools["conv-invoice"], tools["conv-transfer"]) == (1.0, 0.0)
    assert summary["goal_completion"].n == 6


def test_the_first_hop_below_is_named_in_each_failing_turn(run: Path) -> None:
    report = Report.load(run / "user-replayed")
    degraded = {s.id: s.degraded for s in report.samples if s.degraded}
    assert sorted(degraded) == ["conv-invoice", "conv-sla", "conv-transfer"]
    (transfer,) = degraded["conv-transfer"]
    assert transfer == Degradation(
        turn=0,
        misses=[Miss(metric="turn.ndcg@3", value=transfer.misses[0].value, threshold=">= 0.6")],
        step=0,  # the tool call came first, with the wrong organization
        step_misses=[Miss(metric="tool_call", call='account_lookup({"org":"org_1100"})')],
    )
    assert transfer.misses[0].value == pytest.approx(0.3801, abs=1e-4)
    (invoice,) = degraded["conv-invoice"]
    assert (invoice.turn, invoice.step) == (0, 1)  # the lookup was right, the hop after it not
    assert [m.metric for m in invoice.step_misses] == ["step.ndcg@3"]
    assert "Where conversations degraded" in (run / "user-replayed" / "report.md").read_text()


def test_the_stub_user_drives_each_conversation_to_a_recorded_stop(run: Path) -> None:
    report = Report.load(run / "user-simulated")
    stops = {s.id: s.sample.driven.stopped for s in report.samples if s.sample and s.sample.driven}
    assert stops == {
        "conv-pricing": "max_turns", "conv-sla": "user_done", "conv-keys": "user_done",
        "conv-invoice": "stop_pattern", "conv-transfer": "stop_pattern",
        "conv-regions": "user_done",
    }  # fmt: skip
    signature = report.signatures["latency_s"].render()
    assert "conversation:simulate" in signature and "max_turns:4" in signature


def test_the_two_runs_are_compared_turn_by_turn(run: Path) -> None:
    comparison = json.loads((run / "comparison.json").read_text())
    (metrics,) = [c["metrics"] for c in comparison["comparisons"]]
    # The simulated user opens with the dataset's first question, so only the first turns (and
    # the turns both runs asked the same) pair with gold on both sides.
    assert metrics["turn.ndcg@3"]["n"] == 6
    assert metrics["turn.ndcg@3"]["diff"] == pytest.approx(0.0)
