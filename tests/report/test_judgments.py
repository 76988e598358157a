"""A judgment is one of four shapes (a rubric verdict, a per-context rubric's, a jury's,
grounding's). report.json stores each with the keys the one flat model had, and each is read
back as its own shape by them: from a report written now, from one written before the shapes
(74c98e2), from a fresh run, and from a run's spool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_judge import GroundingEvaluator, Pipeline
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.pipeline.collect import detail_line, read_detail
from rag_judge.report import write_json
from rag_judge.report.model import (
    GROUNDING,
    BaseJudgment,
    ClaimJudgment,
    Failure,
    GroundingJudgment,
    Judgment,
    JuryJudgment,
    PerContextJudgment,
    Report,
    RubricJudgment,
    SampleResult,
)
from tests.evaluators import judge_sample

LEGACY = Path(__file__).parent / "legacy_report_74c98e2.json"
LEXICAL = {"provider": "stub"}
FOUR = {"provider": "stub", "stub": "fixed", "stub_score": 4}


def _grade(rank: int, score: float | None) -> RubricJudgment:
    return RubricJudgment(score=score, reason=f"context {rank}", rank=rank, id=f"d{rank}")


# One of each shape, with the fields that set it apart.
SHAPES: dict[str, Judgment] = {
    "faithfulness": RubricJudgment(
        score=4.2, reason="weighted", raw='{"score": 4}', probs={"4": 0.8, "5": 0.2}, verdict=4,
        finish_reason="length", schema_valid=True, label_mass=0.9,
    ),
    "context_relevance": PerContextJudgment(
        score=2.5, reason="mean of 2 per-context grades", attempts=2,
        contexts=[_grade(1, 3.0), RubricJudgment(score=2.0, rank=2)],
    ),
    "coherence": JuryJudgment(
        score=3.5, reason="mean of 2 of 2 judges", attempts=2, scores=[3.0, 4.0], spread=0.5,
        jury=[
            RubricJudgment(score=3.0, reason="ok", judge="stub/a", scores=[3.0, 3.0]),
            PerContextJudgment(score=4.0, contexts=[_grade(1, 4.0)], judge="stub/b"),
        ],
    ),
    GROUNDING: GroundingJudgment(
        score=0.5, reason="2 claims: 1 supported, 1 unsupported", attempts=2, abstained=False,
        claims=[
            ClaimJudgment(text="Team costs $12.", verdict="supported", support=[1], span=(0, 15)),
            ClaimJudgment(text="It is free.", verdict="unsupported", cited=[0]),
        ],
    ),
}  # fmt: skip
# Grounding's whose claims could not be read: only its key says whose it is.
UNREAD = GroundingJudgment(score=None, reason="claims: judge call failed: boom", attempts=2)


def _shapes(j: BaseJudgment) -> Any:
    """``j``'s shape and its parts' shapes, nested."""
    return (type(j).__name__, [_shapes(p) for p in j.parts()])


def _report(*samples: SampleResult) -> Report:
    return Report(summary={}, samples=list(samples), signatures={})


def test_each_shape_round_trips_through_report_json_as_itself(tmp_path: Path) -> None:
    a = SampleResult(id="a", judgments=dict(SHAPES))
    b = SampleResult(id="b", judgments={GROUNDING: UNREAD})
    report = _report(a, b)
    write_json(report, tmp_path / "report.json")
    again = Report.load(tmp_path / "report.json")
    assert again == report
    assert isinstance(again.samples, list)
    loaded_a, loaded_b = again.samples
    for key, judgment in SHAPES.items():
        assert _shapes(loaded_a.judgments[key]) == _shapes(judgment)
        assert loaded_a.judgments[key] == judgment
    assert type(loaded_a.judgments["coherence"].parts()[1]) is PerContextJudgment
    assert type(loaded_b.judgments[GROUNDING]) is GroundingJudgment
    assert loaded_b.judgments[GROUNDING] == UNREAD


def test_the_stored_keys_are_the_flat_models() -> None:
    """None fields are left out, score and reason always kept, keys in the old field order."""
    data = json.loads(SampleResult(id="a", judgments=dict(SHAPES)).model_dump_json())
    stored = data["judgments"]
    assert list(stored["faithfulness"]) == [
        "score", "reason", "raw", "attempts", "cached", "probs", "verdict", "finish_reason",
        "schema_valid", "label_mass",
    ]  # fmt: skip
    assert list(stored["context_relevance"]["contexts"][1]) == [
        "score", "reason", "raw", "attempts", "cached", "rank",
    ]  # fmt: skip
    jury = stored["coherence"]
    assert list(jury) == [
        "score", "reason", "raw", "attempts", "cached", "scores", "spread", "jury",
    ]  # fmt: skip
    assert list(jury["jury"][0]) == [
        "score", "reason", "raw", "attempts", "cached", "scores", "judge",
    ]  # fmt: skip
    assert list(jury["jury"][1]) == [
        "score", "reason", "raw", "attempts", "cached", "contexts", "judge",
    ]  # fmt: skip
    assert list(stored[GROUNDING]) == [
        "score", "reason", "raw", "attempts", "cached", "claims", "abstained",
    ]  # fmt: skip
    bare = RubricJudgment(score=None).model_dump()
    assert bare == {"score": None, "reason": "", "raw": "", "attempts": 1, "cached": False}


def test_a_report_from_before_the_shapes_loads_each_judgment_as_its_shape() -> None:
    report = Report.load(LEGACY)
    assert isinstance(report.samples, list) and report.samples
    for r in report.samples:
        j = r.judgments
        assert type(j["faithfulness"]) is RubricJudgment
        context = j["context_relevance"]
        assert isinstance(context, PerContextJudgment)
        assert context.contexts and all(type(c) is RubricJudgment for c in context.contexts)
        assert [c.rank for c in context.contexts] == list(range(1, len(context.contexts) + 1))
        jury = j["coherence"]
        assert isinstance(jury, JuryJudgment)
        assert [type(v) for v in jury.jury] == [RubricJudgment, RubricJudgment]
        assert [v.judge for v in jury.jury] == ["stub/stub-lexical-support", "stub/stub-fixed-4"]
        grounding = j[GROUNDING]
        assert isinstance(grounding, GroundingJudgment) and grounding.claims is not None


def test_a_report_from_before_the_shapes_stores_its_judgments_as_it_read_them() -> None:
    stored = json.loads(LEGACY.read_text(encoding="utf-8"))["samples"]
    report = Report.load(LEGACY)
    assert isinstance(report.samples, list)
    for raw, r in zip(stored, report.samples, strict=True):
        again = {m: j.model_dump(mode="json") for m, j in r.judgments.items()}
        assert json.dumps(again) == json.dumps(raw["judgments"])  # same keys, order, values


@pytest.mark.parametrize("jury_rubric", ["coherence", "context_relevance"])
def test_a_fresh_run_loads_back_as_the_shapes_it_made(tmp_path: Path, jury_rubric: str) -> None:
    """A jury of rubric verdicts, or of per-context ones; a single judge's of either kind."""
    single = [m for m in ("faithfulness", "context_relevance") if m != jury_rubric]
    evaluators = [
        JudgeEvaluator(rubrics=single, cache=None),
        JudgeEvaluator(rubrics=[jury_rubric], cache=None, judges=[LEXICAL, FOUR]),
        GroundingEvaluator(cache=None),
    ]
    samples = [judge_sample(i, answer=f"Context for question {i}.") for i in (1, 2)]
    report = Pipeline(evaluators).run(samples).report
    path = tmp_path / "report.json"
    write_json(report, path)
    again = Report.load(path)
    assert again == report
    assert isinstance(report.samples, list) and isinstance(again.samples, list)
    juror = PerContextJudgment if jury_rubric == "context_relevance" else RubricJudgment
    for made, loaded in zip(report.samples, again.samples, strict=True):
        assert type(made.judgments[jury_rubric]) is JuryJudgment
        assert {type(v) for v in made.judgments[jury_rubric].parts()} == {juror}
        assert type(made.judgments[GROUNDING]) is GroundingJudgment
        shapes = {m: _shapes(j) for m, j in made.judgments.items()}
        assert {m: _shapes(j) for m, j in loaded.judgments.items()} == shapes
    write_json(again, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_a_spool_line_reads_back_as_the_shapes_written() -> None:
    errors = {"coherence": Failure(message="boom")}
    line = detail_line(errors, dict(SHAPES)) + b"\n"
    failed, judged = read_detail(line)
    assert failed == errors
    assert judged == SHAPES
    assert {m: _shapes(j) for m, j in judged.items()} == {m: _shapes(j) for m, j in SHAPES.items()}
    _, unread = read_detail(detail_line({}, {GROUNDING: UNREAD}) + b"\n")
    assert type(unread[GROUNDING]) is GroundingJudgment and unread[GROUNDING] == UNREAD


def test_a_judgment_of_a_shape_it_is_not_is_refused() -> None:
    with pytest.raises(ValueError, match="jury"):
        SampleResult.model_validate({"id": "a", "judgments": {"m": {"score": 1, "jury": [
            {"score": 1, "jury": []}]}}})  # fmt: skip  # a jury is no juror
    with pytest.raises(ValueError, match="claims"):
        SampleResult.model_validate(
            {"id": "a", "judgments": {"m": {"score": 1, "contexts": [], "claims": []}}}
        )
