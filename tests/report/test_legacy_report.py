"""A report.json written by main before the judge-wing redesign (74c98e2: judges named only in
signature text, restated metrics marked only by a ``given`` option, no stored interval level)
still loads, reads the same, and renders."""

from __future__ import annotations

from pathlib import Path

from rag_judge.report import write_report
from rag_judge.report.model import Report, Restatement

LEGACY = Path(__file__).parent / "legacy_report_74c98e2.json"


def test_a_report_from_before_the_redesign_loads_and_reads_the_same(tmp_path: Path) -> None:
    report = Report.load(LEGACY)
    assert report.summary["faithfulness"].mean is not None
    # restated metrics: known from the old ``given`` option
    assert report.summary["faithfulness_answered"].restates == Restatement(
        metric="faithfulness", given="answered"
    )
    assert report.summary["faithfulness"].restates is None
    assert "faithfulness_answered" not in report.graded_rubrics()
    assert {"faithfulness", "correctness", "coherence"} <= set(report.graded_rubrics())
    # judges: read from the signature text, a jury's each, stubs known as stubs
    jury = report.signatures["coherence"].judged_by
    assert [(j.text, j.stub) for j in jury] == [
        ("stub/stub-lexical-support", True), ("stub/stub-fixed-4", True),
    ]  # fmt: skip
    assert report.stub_method("coherence") == (
        "a lexical word-overlap heuristic and a fixed score of 4"
    )
    assert "bleu" not in report.stub_judged().get("a lexical word-overlap heuristic", [])
    # the interval level of a report that did not store it: its config's
    assert report.confidence == 0.9
    paths = write_report(report, tmp_path)
    assert "faithfulness_answered" in paths["md"].read_text(encoding="utf-8")
    again = Report.load(paths["json"])
    assert again.summary == report.summary and again.signatures == report.signatures
