"""Pairwise verdicts from a scoring client's distribution (the local model), the stub judges
answering pairwise requests by themselves, and the pairwise command's provider list."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from rag_judge.cli.pairwise import add_parser
from rag_judge.data.jsonl import read_jsonl
from rag_judge.data.sample import Sample
from rag_judge.judge.pairwise import PairwiseJudge
from rag_judge.judge.preference import WINNER_LABELS, WINNER_PREFIX, read_preference
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm import ClientConfig
from rag_judge.llm.base import Completion, CompletionRequest
from rag_judge.llm.providers import PROVIDERS
from rag_judge.llm.providers.stub import StubClient, parse_sections
from tests import REPO

REF = "The Pacific Ocean is the largest ocean on Earth."
A = [
    Sample(id="q1", question="Largest ocean?", answer="The Atlantic.", references=[REF]),
    Sample(id="q2", question="Deepest trench?", answer="Mariana Trench.", references=["Mariana"]),
]
B = [
    Sample(id="q1", question="Largest ocean?", answer="The Pacific Ocean.", references=[REF]),
    Sample(id="q2", question="Deepest trench?", answer="Mariana Trench.", references=["Mariana"]),
]


class Scoring(StubClient):
    """A stub that, like the local client, reads a distribution over the request's labels."""

    scores_labels = True


def test_a_scoring_client_gives_verdicts_from_its_distribution() -> None:
    seen: list[CompletionRequest] = []

    def respond(request: CompletionRequest) -> Completion:
        seen.append(request)
        one, two = (len(parse_sections(request.messages[1].content)[f"ANSWER {n}"]) for n in "12")
        longer = {"1": 0.7, "2": 0.2, "tie": 0.1} if one > two else {"1": 0.2, "2": 0.7, "tie": 0.1}
        probs = {"1": 0.25, "2": 0.25, "tie": 0.5} if one == two else longer
        return Completion(choices=[max(probs, key=lambda k: probs[k])], score_probs=probs)

    scoring = Scoring(respond, model="scoring")
    result = PairwiseJudge(cache=None).compare(A, B, client=scoring)  # every request seen
    assert [p.outcome for p in result.pairs] == ["B", "tie"]
    assert result.win_rate == pytest.approx(0.75) and result.position_consistency == 1.0
    first = seen[0]
    assert first.score_labels == WINNER_LABELS == ("1", "2", "tie")
    assert first.messages[-1].role == "assistant" and first.messages[-1].content == WINNER_PREFIX
    assert first.json_schema is None and first.max_tokens == 1
    verdict = result.pairs[0].verdicts[0]
    assert (verdict.order, verdict.winner, verdict.preferred) == ("AB", "2", "B")
    assert verdict.probs == pytest.approx({"1": 0.2, "2": 0.7, "tie": 0.1})
    assert verdict.reason.startswith("most likely verdict; P(1 0.20, 2 0.70, tie 0.10)")
    assert result.to_dict()["samples"][0]["verdicts"][0]["probs"] == verdict.probs
    assert "|scoring:distribution|" in result.signature.render()


def test_read_preference_prefers_the_distribution_and_falls_back_to_the_text() -> None:
    found = read_preference(Completion(["2"], score_probs={"1": 0.0, "2": 0.0, "tie": 2.0}))
    assert not isinstance(found, Unscored)
    assert (found.winner, found.probs) == ("tie", {"1": 0.0, "2": 0.0, "tie": 1.0})
    text = read_preference(Completion(['{"reason": "r", "winner": "1"}']))
    assert not isinstance(text, Unscored) and (text.winner, text.probs) == ("1", None)
    empty = read_preference(Completion([""], score_probs={"x": 1.0}))  # no mass on the labels
    assert isinstance(empty, Unscored)


def test_the_stub_provider_answers_pairwise_requests_itself() -> None:
    lexical = PairwiseJudge(client=ClientConfig(provider="stub")).compare(A, B)
    assert [p.outcome for p in lexical.pairs] == ["B", "tie"]
    assert lexical.pairs[0].verdicts[0].reason == "word overlap 0% (answer 1) vs 100% (answer 2)"
    assert "|judge:stub/stub-lexical-support|" in lexical.signature.render()
    assert "|scoring:json|" in lexical.signature.render()
    fixed = PairwiseJudge(client=ClientConfig(provider="stub", stub="fixed")).compare(A, B)
    assert [p.outcome for p in fixed.pairs] == ["tie", "tie"]
    assert fixed.pairs[0].verdicts[0].reason == "fixed stub verdict"
    assert not hasattr(PairwiseJudge, "make_client")  # no special case for the stub any more


def test_missing_numbers_print_as_an_en_dash() -> None:
    result = PairwiseJudge().compare(A[:1], [B[0].model_copy(update={"answer": None})])
    table = result.to_table()
    assert "\nwin rate of B over A   –\n" in table and "[–, –]" in table
    assert "\nposition consistency   –\n" in table and "-" not in table.split("signature")[0]


def test_provider_choices_come_from_the_registry() -> None:
    parser = argparse.ArgumentParser(prog="rag-judge")
    add_parser(parser.add_subparsers(dest="command", required=True))
    sub = parser._subparsers._group_actions[0].choices["pairwise"]  # type: ignore[union-attr]
    provider = next(a for a in sub._actions if a.dest == "provider")
    assert list(provider.choices) == sorted(PROVIDERS)


# ---- the real packaged local model ------------------------------------------------------------


def _six_pairs() -> tuple[list[Sample], list[Sample]]:
    """Six demo questions: A answers with its last retrieved passage, B with the dataset's
    answer."""
    demo = list(read_jsonl(REPO / "configs" / "data" / "demo.jsonl"))[:6]
    a = [s.model_copy(update={"answer": s.contexts[-1].text}) for s in demo]
    return a, demo


@pytest.mark.slow
def test_local_model_judges_six_pairs_from_its_distribution() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rag_judge.llm.providers.local import LocalClient

    client = LocalClient()
    client.load()  # converts once per cache folder (~40 s), then loads in about a second
    a, b = _six_pairs()
    judge = PairwiseJudge(client=ClientConfig(provider="local"))
    result = judge.compare(a, b, client=client)
    assert len(result.pairs) == 6 and result.counts["unscored"] == 0
    for pair in result.pairs:
        assert pair.outcome in ("A", "B", "tie")
        for verdict in pair.verdicts:
            assert verdict.probs is not None and set(verdict.probs) == set(WINNER_LABELS)
            assert verdict.winner == max(verdict.probs, key=lambda k: verdict.probs[k])  # type: ignore[index]
            assert verdict.attempts == 1  # a label is always readable: nothing is re-asked
    assert result.win_rate is not None and 0.0 <= result.win_rate <= 1.0
    assert result.usage.completion_tokens <= 12 * 1  # one label token per verdict ("tie" is one)
    json.dumps(result.to_dict())  # the JSON output holds the distributions
