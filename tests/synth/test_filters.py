"""The synth filters on crafted items, each one that must be rejected and one that must be kept;
and the stub's own items, among which every filter finds both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rag_judge.judge.settings import Judge
from rag_judge.llm.base import CompletionRequest
from rag_judge.llm.providers.stub import StubClient
from rag_judge.llm.providers.stub_synth import synth_stub
from rag_judge.synth.asks import ClosedBook, Kind, SynthAsk
from rag_judge.synth.corpus import Chunk
from rag_judge.synth.filters import (
    FilterVerdict,
    closed_book,
    leaks_answer,
    near_duplicates,
    seed_needed,
    token_f1,
    unanswerable_holds,
)

ANSWER = "The Sydney Harbour Bridge opened in 1932."


def test_near_duplicates_point_at_the_first_kept_question() -> None:
    questions = [
        "When did the Sydney Harbour Bridge open?",
        "When did Sydney Harbour Bridge open?",  # 95 against the first
        "When did Sydney Harbour Bridge open first?",  # 88 against the first: kept
        "What is the SLA of the Team plan?",
        "what is the SLA of the team plan",  # case and punctuation aside, the fourth
    ]
    assert near_duplicates(questions) == [None, 0, None, None, 3]
    assert near_duplicates([]) == []
    # A repeat of a rejected question alone is kept: the third is 92 against the second
    # (rejected), so at 90 it stays.
    assert near_duplicates(questions[:3], threshold=90) == [None, 0, None]


def test_the_duplicate_threshold_decides() -> None:
    # Questions that differ in the one word they ask about are not duplicates: a set ratio
    # would score these 90 (the words of one nearly all in the other), the sorted ratio 77.
    entities = ["What is the SLA of the Team plan?", "What is the SLA of the Enterprise plan?"]
    assert near_duplicates(entities) == [None, None]
    assert near_duplicates(entities, threshold=75) == [None, 0]
    far = ["What year did the bridge open?", "Who designed the bridge?"]
    assert near_duplicates(far) == [None, None]
    assert near_duplicates(far, threshold=50) == [None, 0]


def test_a_question_that_quotes_its_answer_leaks() -> None:
    blank = "Which value fills the blank: The Sydney Harbour Bridge opened in ___?"
    verdict = leaks_answer(blank, ANSWER)
    assert verdict == FilterVerdict(
        name="leak", passed=False,
        detail="the question quotes the answer: 'sydney harbour bridge opened'",
    )  # fmt: skip
    # Stopwords do not break a run: "opened in the year 1932" is opened, year, 1932.
    assert not leaks_answer(
        "Was it opened in the year 1932 by Sydney?", "Opened in the year 1932 by Sydney."
    ).passed


def test_a_question_that_does_not_quote_its_answer_is_kept() -> None:
    # "open" is not "opened": three words in a run, not four.
    assert leaks_answer("When did the Sydney Harbour Bridge open?", ANSWER).passed
    # The same words in another order are no quotation.
    assert leaks_answer("How are 1932, bridge, harbour, opened and sydney related?", ANSWER).passed
    blank = "Which value fills the blank: The Sydney Harbour Bridge opened in ___?"
    assert leaks_answer(blank, ANSWER, min_words=5).passed
    # An answer shorter than the run cannot leak: a comparison names its options.
    assert leaks_answer(
        "Which is longer, the Golden Gate or the Harbour Bridge?", "The Golden Gate"
    ).passed


def test_token_f1_is_squad_s() -> None:
    assert token_f1("the Sydney Harbour Bridge", "Sydney Harbour Bridge!") == 1.0
    # 5 common tokens of 5 guessed and 6 true (the article dropped): P 1, R 5/6.
    assert token_f1("1932 bridge harbour opened sydney", ANSWER) == pytest.approx(10 / 11)
    assert token_f1("", ANSWER) == token_f1("Paris", ANSWER) == 0.0


def test_a_question_answerable_without_the_corpus_is_rejected() -> None:
    closed = ClosedBook(answer="sydney harbour bridge opened 1932")
    verdict = closed_book("When did the bridge open?", ANSWER, closed, threshold=0.6)
    assert not verdict.passed and verdict.name == "closed_book"
    assert verdict.detail.startswith("answerable without the corpus: closed-book answer's token F1")
    # At the threshold it is rejected: agreeing means F1 >= threshold.
    # One token of two in common either way: F1 exactly 0.5.
    guess = ClosedBook(answer="Sydney closed")
    assert not closed_book("Q?", "Sydney opened", guess, threshold=0.5).passed
    assert closed_book("Q?", "Sydney opened", guess, threshold=0.51).passed


def test_a_question_the_judge_cannot_answer_closed_book_is_kept() -> None:
    declined = closed_book("When did the bridge open?", ANSWER, ClosedBook(answer=None))
    assert declined == FilterVerdict(
        name="closed_book", passed=True, detail="the judge cannot answer it without the documents"
    )
    wrong = closed_book("When did the bridge open?", ANSWER, ClosedBook(answer="In 1850."))
    # "in" is common to both: P 1/2, R 1/6.
    assert wrong.passed and wrong.detail.endswith("0.25 < 0.6")


def test_every_seed_chunk_must_be_graded_two_or_more() -> None:
    assert seed_needed([3, 2]).passed
    rejected = seed_needed([3, 1])
    assert not rejected.passed and rejected.detail == "seed chunk 2 graded 1 < 2"
    assert seed_needed([3, 1], min_grade=1).passed
    assert not seed_needed([]).passed


def test_an_unanswerable_question_the_pool_answers_is_rejected() -> None:
    assert unanswerable_holds([0, 1, 1, 0]).passed
    rejected = unanswerable_holds([0, 2, 1, 3])
    assert not rejected.passed and rejected.detail.startswith("2 of 4 pool chunks graded > 1")
    assert unanswerable_holds([0, 2], max_grade=2).passed
    assert unanswerable_holds([]).passed


# The stub's items through the filters: each filter keeps some and rejects some.
BRIDGE = (
    "The Sydney Harbour Bridge opened in 1932. It carries rail, vehicle and pedestrian "
    "traffic. Locals call it the Coathanger."
)
GATE = "The Golden Gate Bridge opened in 1937 in San Francisco. Its main span is 1,280 metres long."


def chunk(text: str, doc: str) -> Chunk:
    return Chunk(id=f"{doc}#0", doc_id=doc, start=0, end=len(text), text=text)


def test_the_stub_s_items_meet_every_filter_both_ways() -> None:
    ask = SynthAsk(Judge(cache=None).open(StubClient()))
    a, b = chunk(BRIDGE, "a"), chunk(GATE, "b")

    def stub(request: CompletionRequest) -> dict[str, Any]:
        found = json.loads(synth_stub(request))
        assert isinstance(found, dict)
        return found

    def grade(question: str, c: Chunk) -> int:
        return int(stub(ask.grade_request(question, c))["grade"])

    plan: list[tuple[Kind, list[Chunk]]] = [("factual", [a]), ("multi_hop", [a, b]),
                                            ("unanswerable", [b])]  # fmt: skip
    verdicts: dict[str, set[bool]] = {}
    questions = []
    for seed in range(12):
        for kind, seeds in plan:
            item = stub(ask.question_request(kind, seeds, seed))
            question, answer = item["question"], item["answer"]
            questions.append(question)
            grades = [grade(question, c) for c in seeds]
            if answer is None:
                # The pool: the seed and a neighbour.
                found = [unanswerable_holds([*grades, grade(question, a)])]
            else:
                book = ClosedBook(answer=stub(ask.closed_book_request(question))["answer"])
                found = [leaks_answer(question, answer), seed_needed(grades),
                         closed_book(question, answer, book)]  # fmt: skip
            for v in found:
                verdicts.setdefault(v.name, set()).add(v.passed)
    verdicts["duplicate"] = {twin is None for twin in near_duplicates(questions)}
    names = ("leak", "seed_needed", "closed_book", "unanswerable", "duplicate")
    assert verdicts == {name: {True, False} for name in names}
