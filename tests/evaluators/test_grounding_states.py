"""What grounding records when it could not judge (issue 27, items 8 and 9): a claim never
judged is ``unchecked`` (with why), never ``unsupported``; an empty answer is a missing input
for every grounding metric, as it is for ``type: judge``, never a deliberate refusal."""

from __future__ import annotations

import pytest

from rag_judge import GroundingEvaluator, JudgeEvaluator, Pipeline, Sample
from rag_judge.llm.base import LLMError
from rag_judge.llm.providers.stub import StubClient, scripted
from rag_judge.report.model import UNCHECKED, FailureKind
from tests.evaluators.test_grounding import _sample

CLAIMS = '{"abstention": false, "claims": ["Alpha holds.", "Beta holds."]}'


@pytest.mark.parametrize(
    ("replies", "why"),
    [
        ([CLAIMS, "no verdicts here", "still none"], "unscored: claim verdicts: no JSON object"),
        ([CLAIMS, LLMError("down", retryable=False)], "claim verdicts: judge call failed: down"),
    ],
)
def test_claims_whose_verdicts_never_came_are_unchecked(replies: list, why: str) -> None:
    judge = StubClient(scripted(replies))
    got = GroundingEvaluator(cache=None).evaluate([_sample(answer="Alpha holds. Beta holds.")],
                                                  client=judge)  # fmt: skip
    claims = got.judgments[0]["grounding"].claims or []
    assert [c.verdict for c in claims] == [UNCHECKED, UNCHECKED]  # was "unsupported"
    assert all(c.reason.startswith(why) for c in claims)  # was ""
    assert got.scores["claim_support"] == [None]


def test_claims_without_contexts_are_unchecked() -> None:
    sample = Sample(id="b", question="q", answer="Alpha holds firmly.")
    got = GroundingEvaluator(cache=None, split="sentences").evaluate([sample])
    (claim,) = got.judgments[0]["grounding"].claims or []
    assert (claim.verdict, claim.reason) == (UNCHECKED, "field 'contexts' is missing or empty")


@pytest.mark.parametrize("split", ["judge", "sentences"])
@pytest.mark.parametrize("answer", ["", "  \n "])
def test_an_empty_answer_is_a_missing_input_not_a_refusal(split: str, answer: str) -> None:
    grounding = GroundingEvaluator(cache=None, split=split)  # type: ignore[arg-type]
    client = StubClient()
    got = grounding.evaluate([_sample(answer=answer, answerable=True)], client=client)
    assert client.calls == 0
    assert set(got.errors[0]) == set(grounding.metric_names())
    assert {f.kind for f in got.errors[0].values()} == {FailureKind.MISSING_INPUT}
    assert got.errors[0]["over_refusal_rate"].message == "field 'answer' is empty"
    assert got.scores["over_refusal_rate"] == [None]  # was 1.0: a refusal
    assert got.judgments[0] == {}
    assert grounding.dry_run([_sample(answer=answer)]).skipped == 1


def test_an_empty_answer_is_missing_for_the_judge_and_grounding_alike() -> None:
    samples = [_sample("a", "", answerable=True), _sample("b", "Context number 1 holds.",
                                                         answerable=True)]  # fmt: skip
    pipe = Pipeline(
        [
            JudgeEvaluator(rubrics=["faithfulness"], cache=None),
            GroundingEvaluator(cache=None, split="sentences"),
        ]
    )
    report = pipe.run(samples).report
    summary = report.summary
    assert (summary["over_refusal_rate"].n, summary["over_refusal_rate"].mean) == (1, 0.0)
    assert summary["answer_rate"].mean == 1.0  # was 0.5
    for metric in ("faithfulness", "over_refusal_rate", "answer_rate", "faithfulness_answered"):
        assert summary[metric].errors == 1, metric  # the missing input, counted alike
        assert report.samples[0].errors[metric].kind is FailureKind.MISSING_INPUT, metric
    assert report.samples[0].errors["faithfulness_answered"].message == (
        "no abstention verdict: the sample has no answer to ground"
    )
