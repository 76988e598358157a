"""The grounding evaluator (issue 13): claims and verdicts through a scripted judge with exact
metrics, citation markers in several styles, answerability and abstention, the stub's rule,
and malformed claim lists from a fake OpenAI server (unscored with the reason, never a crash)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rag_judge import GroundingEvaluator, Pipeline, Sample
from rag_judge.evaluators import JudgeEvaluator
from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.providers.stub import StubClient, grounding_stub, scripted
from rag_judge.llm.sections import parse_sections, section
from rag_judge.report.model import FailureKind
from rag_judge.text import Citations, is_abstention
from tests.fake_openai_server import FakeOpenAIServer, Reply, error

CONTEXTS = [{"id": f"c{i}", "text": f"Context number {i}."} for i in range(1, 5)]
ANSWER = "Alpha holds [1]. Beta holds [c3]. Gamma holds [2, 4]. Delta holds."


def _sample(sid: str = "s1", answer: str | None = ANSWER, **extra: Any) -> Sample:
    return Sample.model_validate(
        {"id": sid, "question": "What holds?", "contexts": CONTEXTS, "answer": answer, **extra}
    )


def _verdict(claim: int, verdict: str, contexts: list[int]) -> dict[str, Any]:
    return {"claim": claim, "verdict": verdict, "contexts": contexts, "reason": f"r{claim}"}


VERDICTS = [
    _verdict(1, "supported", [1]),
    _verdict(2, "supported", [2]),  # cites c3 (rank 3): misattributed
    _verdict(3, "contradicted", [4]),
    _verdict(4, "unsupported", []),
]


def _key(request: CompletionRequest) -> str:
    return "claims" if "claims" in (request.json_schema or {}).get("properties", {}) else "verdicts"


def _judge(claims: Any, verdicts: Any) -> StubClient:
    """A judge that splits into ``claims`` and returns ``verdicts`` (JSON-encoded)."""

    def respond(request: CompletionRequest) -> str:
        if _key(request) == "claims":
            return json.dumps({"abstention": False, "claims": claims})
        return json.dumps({"verdicts": verdicts})

    return StubClient(scripted(respond))


def test_scripted_claims_and_verdicts_give_exact_metrics() -> None:
    claims = ["Alpha holds [1].", "Beta holds [c3].", "Gamma holds [2, 4].", "Delta holds."]
    result = GroundingEvaluator(cache=None).evaluate([_sample()], client=_judge(claims, VERDICTS))
    got = {m: v[0] for m, v in result.scores.items()}
    assert got["claims"] == 4 and got["claim_support"] == 0.5
    assert got["claim_contradiction"] == 0.25 and got["support_rank"] == 1
    assert got["context_utilisation"] == 2 / 4  # ranks 1 and 2 support a claim
    # claim 1 cites its support; 2 cites c3 (no support); 3 is contradicted; 4 cites nothing
    assert got["citation_recall"] == 1 / 4
    assert got["citation_precision"] == 1 / 4  # 4 citations, one points at support
    assert got["misattribution"] == 1 / 4
    assert got["answer_rate"] == 1.0
    j = result.judgments[0]["grounding"]
    assert [c.verdict for c in j.claims or []] == [v["verdict"] for v in VERDICTS]
    first, second, third, _ = j.claims or []
    assert (first.support_ids, first.cited, first.span) == (["c1"], [1], (0, 16))
    assert second.cited == [3] and third.cited == [2, 4] and third.reason == "r3"
    assert j.score == 0.5 and j.reason == "4 claims: 2 supported, 1 contradicted, 1 unsupported"
    assert j.attempts == 2 and j.abstained is False


def test_the_verifier_sees_claims_without_their_markers() -> None:
    seen: list[str] = []

    def respond(request: CompletionRequest) -> str:
        if _key(request) == "claims":
            return json.dumps({"abstention": False, "claims": ["Alpha holds [1]."]})
        seen.append(parse_sections(request.messages[-1].content)["CLAIM 1"])
        return json.dumps({"verdicts": [_verdict(1, "supported", [1])]})

    GroundingEvaluator(cache=None).evaluate([_sample()], client=StubClient(scripted(respond)))
    assert seen == ["Alpha holds."]


@pytest.mark.parametrize(
    ("text", "pattern", "refers_to", "ranks"),
    [
        ("x [1] y [3].", None, "auto", (1, 3)),
        ("x [c2].", None, "auto", (2,)),
        ("x [1, 4; c3].", None, "auto", (1, 4, 3)),
        ("x [1][2] [1].", None, "auto", (1, 2)),  # each rank once
        # out of range, unknown id: each distinct key is a citation of nothing (issue 27)
        ("x [9] [zz].", None, "auto", (0, 0)),
        ("x [9][1] [9].", None, "auto", (0, 1)),  # the same key twice is one citation
        ("x [2].", None, "id", (0,)),  # by id only: "2" is no context's id
        ("x [c2].", None, "rank", (0,)),
        ("x^1 y^4", r"\^(\d+)", "rank", (1, 4)),
        ("x 【c4】", r"【(\w+)】", "auto", (4,)),
    ],
)
def test_citation_markers(text: str, pattern: str | None, refers_to: Any, ranks: tuple) -> None:
    reader = Citations(refers_to=refers_to) if pattern is None else Citations(pattern, refers_to)
    assert reader.ranks(text, ["c1", "c2", "c3", "c4"]) == ranks


def test_required_citations_score_an_uncited_answer_zero() -> None:
    claims = ["Alpha holds."]
    judge = _judge(claims, [_verdict(1, "supported", [1])])
    cited = GroundingEvaluator(cache=None, citations={"required": True})
    got = cited.evaluate([_sample(answer="Alpha holds.")], client=judge)
    assert got.scores["citation_recall"] == [0.0]
    assert got.scores["misattribution"] == [1.0]  # supported only by an uncited chunk
    assert got.errors[0]["citation_precision"].kind is FailureKind.NOT_APPLICABLE
    loose = GroundingEvaluator(cache=None).evaluate([_sample(answer="Alpha holds.")], client=judge)
    assert loose.scores["citation_recall"] == [None]
    assert (
        loose.errors[0]["citation_recall"].text() == "n/a: the answer carries no citation markers"
    )
    no_cites = GroundingEvaluator(cache=None, citations=None)
    assert "citation_recall" not in no_cites.metric_names()


UNANSWERABLE = [
    _sample("ok", "Context number 1 holds.", answerable=True),
    _sample("refused", "I don't know based on the provided documents.", answerable=True),
    _sample("abstained", "The documents do not mention it.", answerable=False),
    _sample("invented", "Omega was founded in 1999.", answerable=False),
    _sample("unstated", "Context number 2 holds."),
]


def test_answerability_and_abstention_rates() -> None:
    result = GroundingEvaluator(cache=None, split="sentences").evaluate(UNANSWERABLE)
    assert result.scores["answer_rate"] == [1, 0, 0, 1, 1]
    assert result.scores["over_refusal_rate"] == [0, 1, None, None, None]
    assert result.scores["unsupported_answer_rate"] == [None, None, 0, 1, None]
    assert result.scores["claims"] == [1, 0, 0, 1, 1]
    assert result.scores["claim_support"] == [1.0, None, None, 0.0, 1.0]
    refused = result.errors[1]
    assert refused["claim_support"].text() == "n/a: the answer abstains"
    assert all(f.kind is FailureKind.NOT_APPLICABLE for f in refused.values())
    assert result.errors[4]["over_refusal_rate"].message == (
        "the sample does not say whether it is answerable"
    )
    assert result.judgments[1]["grounding"].abstained is True


def test_the_run_counts_not_applicable_apart_and_conditions_rubrics_on_answering() -> None:
    pipe = Pipeline(
        [
            JudgeEvaluator(rubrics=["faithfulness"], cache=None),
            GroundingEvaluator(cache=None, split="sentences"),
        ]
    )
    run = pipe.run(UNANSWERABLE)
    summary = run.report.summary
    assert (summary["over_refusal_rate"].n, summary["over_refusal_rate"].mean) == (2, 0.5)
    assert summary["over_refusal_rate"].errors == 0
    assert summary["over_refusal_rate"].not_applicable == 3
    assert summary["unsupported_answer_rate"].mean == 0.5
    assert summary["answer_rate"].mean == 3 / 5
    faithful = [r.scores["faithfulness"] for r in run.report.samples]
    answered = [f for f, a in zip(faithful, [1, 0, 0, 1, 1], strict=True) if a]
    cond = summary["faithfulness_answered"]
    assert cond.n == 3 and cond.mean == pytest.approx(sum(answered) / 3, abs=0)  # type: ignore[arg-type]
    assert cond.not_applicable == 2 and cond.errors == 0
    sig = run.report.signatures["faithfulness_answered"]
    assert sig.options["given"] == "answered"
    assert run.failure_counts()["conditioned on answering"] == (0, 3)


def test_the_stub_rule_supports_contradicts_and_abstains() -> None:
    assert is_abstention("I cannot find that in the documents.")
    assert not is_abstention("The plan costs $12. The documents do not mention VAT.")
    prompt = "\n".join(
        [
            section("CONTEXT 1", "The Team plan costs $12 per user per month."),
            section("CLAIM 1", "The Team plan costs $12 per user per month."),
            section("CLAIM 2", "The Team plan costs $15 per user per month."),
            section("CLAIM 3", "Northwind was founded in Seattle."),
        ]
    )
    request = CompletionRequest(messages=(ChatMessage("user", prompt),))
    verdicts = json.loads(grounding_stub(request))["verdicts"]
    assert [(v["verdict"], v["contexts"]) for v in verdicts] == [
        ("supported", [1]),
        ("contradicted", [1]),
        ("unsupported", []),
    ]


def test_missing_answer_and_missing_contexts() -> None:
    no_answer = _sample("a", None)
    no_contexts = Sample(id="b", question="q", answer="Alpha holds firmly.")
    result = GroundingEvaluator(cache=None, split="sentences").evaluate([no_answer, no_contexts])
    assert {f.kind for f in result.errors[0].values()} == {FailureKind.MISSING_INPUT}
    assert result.scores["claims"][1] == 1 and result.scores["answer_rate"][1] == 1
    assert result.errors[1]["claim_support"].kind is FailureKind.MISSING_INPUT


def test_config_errors_name_the_value_and_the_legal_set() -> None:
    with pytest.raises(ValidationError, match="'judge' or 'sentences'"):
        GroundingEvaluator(split="words")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"pattern '\[\(' is not a regular expression"):
        GroundingEvaluator(citations={"pattern": "[("})
    with pytest.raises(ValidationError, match="one group"):
        GroundingEvaluator(citations={"pattern": r"\[(\d)(\d)\]"})


# ---- through a fake OpenAI-compatible server -----------------------------------------------


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def _served(srv: FakeOpenAIServer) -> GroundingEvaluator:
    client = {"provider": "openai", "model": "fake-judge", "max_attempts": 1}
    return GroundingEvaluator(cache=None, client={**client, "base_url": srv.base_url})


def _asks(body: dict[str, Any]) -> str:
    schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
    return "claims" if "claims" in schema.get("properties", {}) else "verdicts"


def test_a_claim_list_that_never_parses_is_unscored_with_its_reason() -> None:
    with FakeOpenAIServer(lambda body: "Here are the claims: alpha, beta") as srv:
        result = _served(srv).evaluate([_sample()])
        assert srv.received == 2  # the first ask and one re-ask
    failure = result.errors[0]["claim_support"]
    assert failure.kind is FailureKind.UNSCORED
    assert failure.message == "claims: no JSON object with 'claims' in the reply"
    assert result.scores["answer_rate"] == [None]  # no verdict on abstention either
    judged = result.judgments[0]["grounding"]
    assert judged.score is None and judged.attempts == 2


def test_a_bad_verdict_list_is_reasked_quoting_the_problem_then_scored() -> None:
    claims = json.dumps({"abstention": False, "claims": ["Alpha holds."]})
    wrong = json.dumps({"verdicts": [_verdict(1, "supported", [])]})  # names no context
    right = json.dumps({"verdicts": [_verdict(1, "supported", [1])]})
    replies = iter([claims, wrong, right])
    with FakeOpenAIServer(lambda body: next(replies)) as srv:
        result = _served(srv).evaluate([_sample(answer="Alpha holds.")])
        reask = srv.requests[2]["messages"][-1]["content"]
    assert "claim 1 is 'supported' but names no context that supports it" in reask
    assert result.scores["claim_support"] == [1.0]
    assert result.judgments[0]["grounding"].attempts == 3


@pytest.mark.parametrize(
    ("verdicts", "reason"),
    [
        ([_verdict(1, "supported", [1])], "claim 2 has no verdict"),
        ([_verdict(1, "supported", [7]), _verdict(2, "unsupported", [])], "names context 7"),
        ([_verdict(1, "maybe", []), _verdict(2, "unsupported", [])], "verdicts: verdict:"),
        ([_verdict(1, "supported", [1])] * 2, "claim 1 is judged more than once"),
    ],
)
def test_malformed_verdicts_are_unscored_with_the_reason(verdicts: list, reason: str) -> None:
    claims = json.dumps({"abstention": False, "claims": ["Alpha holds.", "Beta holds."]})

    def reply(body: dict[str, Any]) -> str:
        return claims if _asks(body) == "claims" else json.dumps({"verdicts": verdicts})

    with FakeOpenAIServer(reply) as srv:
        result = _served(srv).evaluate([_sample(answer="Alpha holds. Beta holds.")])
    failure = result.errors[0]["claim_support"]
    assert failure.kind is FailureKind.UNSCORED and reason in failure.message
    assert result.scores["claims"] == [2] and result.scores["answer_rate"] == [1]


def test_a_failing_server_is_recorded_against_the_sample() -> None:
    with FakeOpenAIServer(
        [error(500), Reply(status=429, body={"error": {"message": "slow"}})]
    ) as srv:
        result = _served(srv).evaluate([_sample("a"), _sample("b")])
    for errors in result.errors:
        assert errors["claims"].kind is FailureKind.ERROR
        assert errors["claims"].message.startswith("claims: judge call failed:")
    assert result.usage.failures == 2
    assert "sk-test" not in json.dumps([e["claims"].message for e in result.errors])


def test_dry_run_and_calls_per_sample() -> None:
    samples = [_sample(), _sample("r", "I don't know.", answerable=True)]
    judge = GroundingEvaluator(cache=None)
    plan = judge.dry_run(samples)
    assert plan.prompts == 3  # two claim lists, one verdict request (the abstention has none)
    sentences = GroundingEvaluator(cache=None, split="sentences").dry_run(samples)
    assert sentences.prompts == 1
    client = StubClient()
    judge.evaluate(samples, client=client)
    assert client.calls == 3


@pytest.mark.slow
def test_the_local_model_runs_grounding_end_to_end() -> None:
    local = GroundingEvaluator(cache=None, client={"provider": "local"}, max_tokens=96, reask=0)
    result = local.evaluate([_sample(answer="Alpha holds [1]. Beta holds.")])
    # a 135M model: no quality claimed; every metric is a value or a failure with its reason
    for metric in local.metric_names():
        assert (result.scores[metric][0] is None) == (metric in result.errors[0]), metric
    judged = result.judgments[0]["grounding"]
    assert judged.attempts >= 1 and judged.raw and result.usage.requests == judged.attempts


def test_a_rerun_reads_every_request_from_the_cache(tmp_path: Path) -> None:
    judge = GroundingEvaluator(cache=tmp_path / "judge.sqlite")
    first, second = StubClient(), StubClient()
    before = judge.evaluate([_sample(), _sample("r", "I don't know.")], client=first)
    after = judge.evaluate([_sample(), _sample("r", "I don't know.")], client=second)
    assert (first.calls, second.calls) == (3, 0)
    assert after.scores == before.scores
    assert all(j["grounding"].cached for j in after.judgments)
    assert (after.usage.requests, after.usage.cache_hits) == (0, 3)
