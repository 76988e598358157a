"""report.md and the terminal per level: a section per level with its n and clustered interval,
where conversations degraded, data escaped; unchanged for a report without units."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rag_judge import Pipeline
from rag_judge.cli import main
from rag_judge.cli._run_text import run_summary
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.report.format import interval, md_text
from rag_judge.report.markdown import render_markdown, summary_table
from rag_judge.report.model import Report
from tests.report.conversations import C1, C2, HOSTILE_ID, PLAIN, report


@pytest.fixture(scope="module")
def run() -> Report:
    return report()


def _section(md: str, heading: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def test_a_section_per_level_with_its_n_and_clustered_interval(run: Report) -> None:
    md = render_markdown(run)
    heads = [line for line in md.splitlines() if line.startswith("## Per ")]
    assert heads == ["## Per conversation", "## Per turn", "## Per step"]
    step = _section(md, "## Per step")
    assert step[1].startswith("n counts retrieval steps") and "resamples conversations" in step[1]
    s = run.summary["step.ndcg@10"]
    # c1: 2 + 1 retrieval steps, c2: 1, the single-turn sample: 1
    assert s.n == 5
    row = (
        f"| step.ndcg@10 | {s.mean:.4f} | {interval(s.ci_low, s.ci_high)} | 5 | 0 | 0 | 0 | mean |"
    )
    assert row in step
    turn = _section(md, "## Per turn")
    assert [r.split(" | ")[0] for r in turn if r.startswith("| turn.")] == [
        "| turn.ndcg@10",
        "| turn.mrr",
    ]
    assert "| tool_recall |" in "\n".join(_section(md, "## Per conversation"))


def test_where_conversations_degraded(run: Report) -> None:
    md = render_markdown(run)
    rows = [r for r in _section(md, "## Where conversations degraded") if r.startswith("| ")]
    assert (
        rows[0] == "| conversation | turn | turn fell short | first step below | step fell short |"
    )
    assert rows[1] == (
        "| c1 | 0 | turn.mrr 0.5 (>= 0.75) | step 0 | step.ndcg@10 0.6309 (>= 0.9) |"
    )
    assert rows[2] == (
        '| c1 | 1 | turn.mrr 0.5 (>= 0.75) | step 0 | tool call calc({"x":1}) matched no '
        "expected call |"
    )
    # the hostile id, escaped: no HTML from data in a file a PR comment renders
    assert rows[3].startswith(f"| {md_text(HOSTILE_ID)} | 0 | turn.mrr 0 (>= 0.75) | step 1 |")
    assert HOSTILE_ID not in "\n".join(rows) and "\\<img" in rows[3]


def test_a_turn_that_failed_on_its_own_names_no_step() -> None:
    run = report([C2], thresholds={"turn.mrr": ">= 0.75"})
    md = render_markdown(run)
    (row,) = [r for r in _section(md, "## Where conversations degraded") if r.startswith("| c2")]
    assert row.endswith("| turn.mrr 0 (>= 0.75) | none | – |")


def test_reports_without_units_are_unchanged() -> None:
    plain = Pipeline([RetrievalEvaluator(metrics=["mrr"], judged=False)]).run([PLAIN, C1]).report
    md = render_markdown(plain)
    assert "## Per" not in md and "degraded" not in md
    lines = md.splitlines()
    assert (
        lines[4 : 4 + len(summary_table(plain).splitlines())] == summary_table(plain).splitlines()
    )
    assert run_summary(plain) == summary_table(plain)
    # units without a threshold: levels, and no section on degradation
    md = render_markdown(report(thresholds={}))
    assert "## Per turn" in md and "Where conversations degraded" not in md


def test_the_terminal_groups_per_level_and_counts_what_degraded(run: Report) -> None:
    text = run_summary(run)
    heads = [line for line in text.splitlines() if line.startswith("### ")]
    assert heads == [
        "### Per conversation (n: samples)",
        "### Per turn (n: turns; the interval resamples conversations)",
        "### Per step (n: retrieval steps; the interval resamples conversations)",
    ]
    assert text.splitlines()[-1] == (
        "rag-judge: 2 of 3 conversations degraded: 3 turns fell short of a threshold, 3 with a "
        "step below its own (report.md: 'Where conversations degraded')"
    )
    # no threshold, no count: nothing could fall short
    assert "degraded" not in run_summary(report(thresholds={}))


def test_rag_judge_run_prints_the_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(s.model_dump_json(exclude_none=True) for s in (C1, C2, PLAIN)) + "\n")
    config = {
        "name": "levels",
        "dataset": str(data),
        "evaluators": [
            {"type": "retrieval", "metrics": ["mrr"], "per": "turn", "judged": False},
        ],
        "thresholds": {"turn.mrr": ">= 0.75"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "### Per turn (n: turns; the interval resamples conversations)" in out
    assert "rag-judge: 2 of 3 conversations degraded: 3 turns fell short" in out
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Where conversations degraded" in md
