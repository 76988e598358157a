"""Citations in grounding (issue 27, items 6, 7 and 10): every marker naming nothing retrieved
is a citation of its own; whether a claim cites is read from the answer sentence it came from,
never from the judge's claim text; and ``citations: {mode: alce}``, ALCE's definitions (the
cited set must jointly entail a sentence, a citation must be needed), on hand-built cases
through the stub judge, a scripted client and the kernel."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_judge import GroundingEvaluator, Sample
from rag_judge.judge.grounding.claims import read_statements
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.providers.stub import StubClient, scripted
from rag_judge.llm.sections import parse_sections
from rag_judge.metrics.grounding import Statement, alce_citations
from rag_judge.report.model import FailureKind
from rag_judge.text import source_sentences
from tests.evaluators.test_grounding import _judge, _verdict

TWO = [{"id": "c1", "text": "Alpha holds."}, {"id": "c2", "text": "Beta holds."}]


def _sample(answer: str, contexts: list[dict[str, str]] = TWO, sid: str = "s") -> Sample:
    return Sample.model_validate(
        {"id": sid, "question": "What holds?", "answer": answer, "contexts": contexts}
    )


def _scores(result: Any, *metrics: str) -> tuple[Any, ...]:
    return tuple(result.scores[m][0] for m in metrics)


# ---- item 6: unknown markers ---------------------------------------------------------------


def _precision(answer: str) -> float | None:
    judge = _judge([answer], [_verdict(1, "supported", [1])])  # the claim keeps its markers
    got = GroundingEvaluator(cache=None).evaluate([_sample(answer)], client=judge)
    return got.scores["citation_precision"][0]  # type: ignore[no-any-return]


def test_each_marker_naming_nothing_retrieved_is_its_own_citation() -> None:
    assert _precision("Alpha holds [1][5][6].") == 1 / 3  # was 0.5: [5] and [6] were merged
    assert _precision("Alpha holds [1][5].") == 1 / 2
    assert _precision("Alpha holds [1, 5; zz].") == 1 / 3
    # the same unknown key twice is one citation, as a context cited twice is
    assert _precision("Alpha holds [1][5] [5].") == 1 / 2


# ---- item 7: citations come from the answer, not from the judge's claim texts ----------------


def test_a_judge_that_drops_the_markers_keeps_the_answers_citations() -> None:
    judge = _judge(
        ["Alpha holds.", "Beta holds."],  # the answer's [1] and [2] left out
        [_verdict(1, "supported", [1]), _verdict(2, "supported", [2])],
    )
    answer = "Alpha holds [1]. Beta holds [2]."
    loose = GroundingEvaluator(cache=None).evaluate([_sample(answer)], client=judge)
    assert _scores(loose, "citation_recall", "citation_precision", "misattribution") == (1, 1, 0)
    strict = GroundingEvaluator(cache=None, citations={"required": True})
    got = strict.evaluate([_sample(answer)], client=judge)
    assert got.scores["citation_recall"] == [1.0]  # was 0: "the answer cites nothing"
    claims = got.judgments[0]["grounding"].claims or []
    assert [(c.cited, c.sentence) for c in claims] == [([1], 1), ([2], 2)]


def test_a_marker_the_judge_invents_does_not_count() -> None:
    judge = _judge(["Alpha holds [1]."], [_verdict(1, "supported", [1])])
    got = GroundingEvaluator(cache=None).evaluate([_sample("Alpha holds.")], client=judge)
    assert got.scores["citation_recall"] == [None]  # was 1.0
    failure = got.errors[0]["citation_recall"]
    assert failure.kind is FailureKind.NOT_APPLICABLE
    assert (got.judgments[0]["grounding"].claims or [])[0].cited == []


def test_claims_split_from_one_sentence_share_its_markers() -> None:
    answer = (
        "The Team plan costs $12 per user per month [1]. "
        "It renews monthly and can be cancelled anytime [2]."
    )
    claims = [
        "The Team plan costs $12 per user per month.",
        "The Team plan renews monthly.",
        "The Team plan can be cancelled anytime.",
    ]
    judge = _judge(claims, [_verdict(i, "supported", [i // 2 + 1]) for i in (1, 2, 3)])
    got = GroundingEvaluator(cache=None).evaluate([_sample(answer)], client=judge)
    judged = got.judgments[0]["grounding"].claims or []
    assert [(c.sentence, c.cited) for c in judged] == [(1, [1]), (2, [2]), (2, [2])]
    assert got.scores["citation_recall"] == [1.0]


@pytest.mark.parametrize(
    ("claims", "sentences", "sources"),
    [
        (["a b.", "c d."], ["a b [1].", "c d [2]."], [0, 1]),  # verbatim
        (["Beta holds.", "Alpha holds."], ["Alpha holds.", "Beta holds."], [1, 0]),  # reordered
        (["Alpha holds.", "Alpha holds."], ["Alpha holds [1].", "Alpha holds [2]."], [0, 1]),
        (["x y."], [], [None]),
    ],
)
def test_source_sentences(claims: list[str], sentences: list[str], sources: list[Any]) -> None:
    assert source_sentences(claims, sentences) == sources


# ---- item 10: ALCE's definitions as a mode -----------------------------------------------------


def test_the_alce_kernel_by_hand() -> None:
    statements = [
        Statement((1, 2), entailed=True, alone=(), without=()),  # jointly: both needed
        Statement((1, 3), entailed=True, alone=(1,), without=(1, 3)),  # 3 is irrelevant
        Statement((1, 0), entailed=None),  # names nothing retrieved: fails, not counted
        Statement((4,), entailed=False),  # not entailed: recall 0, its citation imprecise
        Statement(()),  # uncited: recall 0
    ]
    assert alce_citations(statements) == (2 / 5, 3 / 5)
    # both cited contexts entail alone: neither is irrelevant (redundant, not irrelevant)
    assert alce_citations([Statement((1, 2), True, alone=(1, 2), without=(1, 2))]) == (1, 1)
    assert alce_citations([Statement(())]) == (None, None)
    assert alce_citations([Statement(())], require_citations=True) == (0.0, None)


CONTEXTS = [
    {"id": "d1", "text": "The Team plan costs $12 per user."},
    {"id": "d2", "text": "The Team plan renews every month."},
    {"id": "d3", "text": "Prices: the Team plan costs $12 per user, billed monthly."},
    {"id": "d4", "text": "Storage is pooled across the workspace."},
]
CASES = {  # answer -> (any: recall, precision), (alce: recall, precision)
    # only the two contexts together entail the sentence
    "The Team plan costs $12 per user and renews every month [1][2].": ((0, 0), (1, 1)),
    "The Team plan costs $12 per user [1][3].": ((1, 1), (1, 1)),  # redundant, each entails
    "The Team plan costs $12 per user [1][4].": ((1, 0.5), (1, 0.5)),  # [4] is irrelevant
    # a marker naming nothing retrieved fails the sentence in alce mode
    "The Team plan costs $12 per user [1][9].": ((1, 0.5), (0, None)),
    "The Team plan costs $12 per user [1]. Storage is pooled across the workspace.": (
        (0.5, 1),
        (0.5, 1),
    ),
}


@pytest.mark.parametrize("mode", ["any", "alce"])
def test_alce_mode_through_the_stub_judge(mode: str) -> None:
    samples = [_sample(a, CONTEXTS, f"s{i}") for i, a in enumerate(CASES)]
    grounding = GroundingEvaluator(cache=None, split="sentences", citations={"mode": mode})
    result = grounding.evaluate(samples, client=StubClient())
    got = list(zip(result.scores["citation_recall"], result.scores["citation_precision"]))
    assert got == [expected[mode == "alce"] for expected in CASES.values()]
    signature = grounding.signature("citation_recall").options
    assert signature["cite_mode"] == mode and ("alce" in signature) == (mode == "alce")
    if mode == "alce":
        assert result.errors[3]["citation_precision"].kind is FailureKind.NOT_APPLICABLE


def _alce_judge(statements: Any, seen: list[str]) -> StubClient:
    """Claims as the answer's sentences, every claim supported by context 1, and
    ``statements`` (a list of replies, one per ALCE request) for the citation round."""
    replies = iter(statements)

    def respond(request: CompletionRequest) -> str:
        keys = (request.json_schema or {}).get("properties", {})
        if "claims" in keys:
            answer = parse_sections(request.messages[-1].content)["ANSWER"]
            return json.dumps({"abstention": False, "claims": [answer]})
        if "verdicts" in keys:
            return json.dumps({"verdicts": [_verdict(1, "supported", [1])]})
        seen.append(request.messages[-1].content)
        reply = next(replies)
        if isinstance(reply, LLMError):
            raise reply
        return json.dumps(reply)

    return StubClient(scripted(respond))


def _statement(n: int, entailed: bool, alone: list[int], without: list[int]) -> dict[str, Any]:
    return {"statement": n, "entailed": entailed, "alone": alone, "without": without,
            "reason": "r"}  # fmt: skip


def test_alce_mode_with_a_scripted_judge() -> None:
    contexts = [*CONTEXTS, {"id": "d5", "text": "Unrelated."}]
    answer = "The plan costs $12 [1][3]."
    seen: list[str] = []
    judge = _alce_judge([{"statements": [_statement(1, True, [1], [1, 3])]}], seen)
    alce = GroundingEvaluator(cache=None, citations={"mode": "alce"})
    got = alce.evaluate([_sample(answer, contexts)], client=judge)
    assert _scores(got, "citation_recall", "citation_precision") == (1.0, 0.5)  # 3 irrelevant
    sections = parse_sections(seen[0])
    # only the cited contexts are shown, and the sentence without its markers
    assert sorted(sections) == ["CONTEXT 1", "CONTEXT 3", "QUESTION", "STATEMENT 1 CITES 1 3"]
    assert sections["STATEMENT 1 CITES 1 3"] == "The plan costs $12."


def test_an_alce_reply_naming_an_uncited_context_is_reasked_then_scored() -> None:
    seen: list[str] = []
    wrong = {"statements": [_statement(1, True, [2], [])]}  # the sentence cites 1 and 3
    right = {"statements": [_statement(1, True, [], [])]}
    judge = _alce_judge([wrong, right], seen)
    alce = GroundingEvaluator(cache=None, citations={"mode": "alce"})
    got = alce.evaluate([_sample("The plan costs $12 [1][3].", CONTEXTS)], client=judge)
    assert "statement 1 names context 2, which it does not cite: it cites 1, 3" in seen[1]
    assert _scores(got, "citation_recall", "citation_precision") == (1.0, 1.0)
    assert got.judgments[0]["grounding"].attempts == 4  # claims, verdicts, two ALCE asks


def test_a_failing_alce_call_fails_only_the_citation_metrics() -> None:
    judge = _alce_judge([LLMError("server down", retryable=False)], [])
    alce = GroundingEvaluator(cache=None, citations={"mode": "alce"})
    got = alce.evaluate([_sample("The plan costs $12 [1][3].", CONTEXTS)], client=judge)
    for metric in ("citation_recall", "citation_precision"):
        failure = got.errors[0][metric]
        assert failure.kind is FailureKind.ERROR
        assert failure.message.startswith("citation support: judge call failed")
    assert _scores(got, "claim_support", "misattribution") == (1.0, 0.0)


def test_the_mode_is_validated_with_the_legal_set() -> None:
    with pytest.raises(ValidationError, match="'any' or 'alce'"):
        GroundingEvaluator(citations={"mode": "strict"})


@pytest.mark.parametrize(
    ("statements", "reason"),
    [
        ([_statement(1, True, [], [])], "statement 2 has no verdict"),
        ([_statement(1, True, [], [])] * 2, "statement 1 is judged more than once"),
        ([_statement(1, True, [], []), _statement(3, True, [], [])], "there is no statement 3"),
        ([_statement(1, True, [5], []), _statement(2, True, [], [])], "names context 5"),
        ([_statement(1, False, [1], []), _statement(2, True, [], [])], "'entailed' must be true"),
        ([{"statement": 1, "entailed": "perhaps"}], "statements: entailed"),
    ],
)
def test_malformed_alce_replies_are_unscored_with_the_reason(
    statements: list[dict[str, Any]], reason: str
) -> None:
    reply = Completion(choices=[json.dumps({"statements": statements})])
    got = read_statements(reply, [(1, 3), (2,)])
    assert isinstance(got, Unscored) and reason in got.reason
    # given out of order, a context named in words: read, checked and sorted
    out_of_order = [_statement(2, False, [], []), _statement(1, True, ["context 3"], [1])]
    ok = read_statements(Completion(choices=[json.dumps({"statements": out_of_order})]),
                         [(1, 3), (2,)])  # fmt: skip
    assert not isinstance(ok, Unscored)
    assert [(v.statement, v.alone, v.without) for v in ok] == [(1, (3,), (1,)), (2, (), ())]


_ranks = st.lists(st.integers(0, 4), max_size=3, unique=True).map(tuple)
_statements = st.builds(
    Statement,
    cited=_ranks,
    entailed=st.booleans(),
    alone=_ranks.map(lambda r: tuple(x for x in r if x)),
    without=_ranks.map(lambda r: tuple(x for x in r if x)),
)


@given(st.lists(_statements, min_size=1, max_size=6))
def test_alce_scores_are_shares_and_an_uncited_sentence_never_helps(
    statements: list[Statement],
) -> None:
    recall, precision = alce_citations(statements, require_citations=True)
    assert recall is not None and 0 <= recall <= 1
    assert precision is None or 0 <= precision <= 1
    more, same = alce_citations([*statements, Statement(())], require_citations=True)
    assert more is not None and more <= recall and same == precision
