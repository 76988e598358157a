"""A conversation as plain single-turn samples, one per retrieval step or per turn: ids, gold
and metadata; the union of a turn's steps (first occurrence, by hand and by property); and
the retrieval evaluator on each unit equal to pytrec_eval on that unit's ranking."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval  # a dev dependency: the agreement tests must never skip silently
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.data import Unit, step_samples, turn_samples, unit_of
from rag_judge.data.context import Context
from rag_judge.data.conversation import RetrievalStep
from rag_judge.data.sample import Sample
from rag_judge.data.units import context_union
from rag_judge.evaluators.retrieval import RetrievalEvaluator

# Two turns, three retrievals and a tool call. Turn 1's hops overlap: d2 and d4 come back in
# both, and so does a context without an id (a note), known by its text and graded by its own
# relevance, 0 in the first hop and 1 in the second. The tool call sits between the hops, so the
# second hop is step 2 of its turn.
NOTE = "a note without an id"
CONVERSATION = Sample.model_validate(
    {
        "id": "c1",
        "metadata": {"user": "ann", "topic": "general"},
        "turns": [
            {
                "question": "Which ocean is the largest?",
                "steps": [
                    {
                        "query": "largest ocean",
                        "contexts": [{"id": d, "text": d} for d in ("d1", "d2", "d3", "d9")],
                    }
                ],
                "answer": "The Pacific.",
                "references": "The Pacific Ocean.",
                "relevance": {"d1": 1, "d3": 2, "d5": 1},
                "metadata": {"topic": "oceans"},
            },
            {
                "question": "How deep does it get?",
                "steps": [
                    {
                        "contexts": [
                            {"id": "d4", "text": "d4", "score": 0.9},
                            {"id": "d2", "text": "d2", "score": 0.8},
                            {"id": "d6", "text": "d6", "score": 0.7},
                            {"text": NOTE, "relevance": 0},
                        ]
                    },
                    {"tool": "calculator", "arguments": {"x": "10994/1000"}, "result": "10.994"},
                    {
                        "query": "deepest point Pacific",
                        "contexts": [
                            {"id": "d2", "text": "d2 again", "score": 0.99},
                            {"id": "d7", "text": "d7"},
                            {"text": NOTE, "relevance": 1},
                            {"id": "d4", "text": "d4", "score": 0.1},
                            {"id": "d8", "text": "d8"},
                        ],
                    },
                ],
                "answer": "About 11 km.",
                "references": ["About 11 km.", "10,994 m."],
                "relevance": {"d2": 1, "d4": 3, "d7": 2, "d10": 1},
            },
        ],
        "goal": "Learn about the Pacific.",
    }
)


def _keys(contexts: tuple[Context, ...]) -> list[str]:
    return [c.id if c.id is not None else c.text for c in contexts]


def test_one_sample_per_retrieval_step_with_the_turns_gold() -> None:
    steps = step_samples(CONVERSATION)
    assert [s.id for s in steps] == ["c1#t0.s0", "c1#t1.s0", "c1#t1.s2"]  # s1 is the tool call
    # The step's query, else the turn's question (the first hop of turn 1 recorded none).
    assert [s.question for s in steps] == [
        "largest ocean",
        "How deep does it get?",
        "deepest point Pacific",
    ]
    assert [_keys(s.contexts) for s in steps] == [
        ["d1", "d2", "d3", "d9"],
        ["d4", "d2", "d6", NOTE],
        ["d2", "d7", NOTE, "d4", "d8"],
    ]
    turns = CONVERSATION.conversation_turns()
    for sample, t in zip(steps, (0, 1, 1), strict=True):
        assert sample.relevance == turns[t].relevance
        assert sample.references == turns[t].references
        assert sample.answer is None  # the answer is the turn's, not a step's
        assert not sample.is_conversation() and sample.goal is None
    assert [unit_of(s) for s in steps] == [Unit("c1", 0, 0), Unit("c1", 1, 0), Unit("c1", 1, 2)]
    # The conversation's metadata, then the turn's, then the unit's record.
    assert steps[0].metadata == {
        "user": "ann",
        "topic": "oceans",
        "unit": {"conversation": "c1", "turn": 0, "step": 0},
    }
    assert steps[1].metadata["topic"] == "general"


def test_one_sample_per_turn_over_the_union_of_its_steps() -> None:
    turns = turn_samples(CONVERSATION)
    assert [s.id for s in turns] == ["c1#t0", "c1#t1"]
    assert [s.question for s in turns] == ["Which ocean is the largest?", "How deep does it get?"]
    assert [s.answer for s in turns] == ["The Pacific.", "About 11 km."]
    assert turns[1].references == ("About 11 km.", "10,994 m.")
    assert turns[1].relevance == {"d2": 1, "d4": 3, "d7": 2, "d10": 1}
    assert [unit_of(s) for s in turns] == [Unit("c1", 0, None), Unit("c1", 1, None)]
    # By hand: hop 1 gives d4 d2 d6 note; hop 2 adds d7 and d8; its d2, note and d4 are
    # duplicates and are dropped.
    assert _keys(turns[0].contexts) == ["d1", "d2", "d3", "d9"]
    assert _keys(turns[1].contexts) == ["d4", "d2", "d6", NOTE, "d7", "d8"]
    # The first occurrence wins, with its own text, score and grade.
    d2 = turns[1].contexts[1]
    assert (d2.text, d2.score) == ("d2", 0.8)
    assert turns[1].contexts[0].score == 0.9
    assert turns[1].contexts[3].relevance == 0


def test_a_single_turn_sample_is_its_own_unit_at_both_levels() -> None:
    single = Sample.model_validate(
        {
            "id": "q7",
            "question": "Why?",
            "contexts": ["x", {"id": "d1", "text": "y"}],
            "answer": "Because.",
            "relevance": {"d1": 1},
            "answerable": True,
            "metadata": {"unit": "kg"},  # a user's own key of that name is not a unit record
        }
    )
    assert step_samples(single) == [single] and step_samples(single)[0] is single
    assert turn_samples(single) == [single] and turn_samples(single)[0] is single
    assert unit_of(single) == Unit("q7", 0, None)


def test_a_turn_without_retrieval_has_no_step_and_no_contexts() -> None:
    conv = Sample.model_validate(
        {
            "id": "c2",
            "turns": [
                {"question": "Hi", "answer": "Hello."},
                {"question": "Add", "steps": [{"tool": "calc", "result": 2}], "answer": "2"},
            ],
        }
    )
    assert step_samples(conv) == []
    assert [(s.id, s.contexts) for s in turn_samples(conv)] == [("c2#t0", ()), ("c2#t1", ())]


# Every cut-off metric named, each against its trec_eval measure.
OURS_TO_TREC = {
    "ndcg@3": "ndcg_cut_3",
    "ndcg@10": "ndcg_cut_10",
    "recall@3": "recall_3",
    "recall@10": "recall_10",
    "precision@5": "P_5",
    "map": "map",
    "mrr": "recip_rank",
}
TREC_MEASURES = {"ndcg_cut.3,10", "recall.3,10", "P.5", "map", "recip_rank"}


def trec_eval(sample: Sample) -> dict[str, float]:
    """pytrec_eval on the sample's ranking: descending scores in rank order. A context's own
    grade wins over the table; a context without an id is named by its text."""
    ranking = _keys(sample.contexts)
    run = {"q": {doc: float(len(ranking) - r) for r, doc in enumerate(ranking)}}
    own = {k: c.relevance for k, c in zip(ranking, sample.contexts) if c.relevance is not None}
    qrels = {"q": {doc: int(g) for doc, g in ({**(sample.relevance or {}), **own}).items()}}
    return pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)["q"]


def assert_equal_to_trec_eval(units: list[Sample]) -> None:
    got = RetrievalEvaluator(metrics=list(OURS_TO_TREC)).evaluate(units).scores
    for i, unit in enumerate(units):
        expected = trec_eval(unit)
        for ours, theirs in OURS_TO_TREC.items():
            assert got[ours][i] == pytest.approx(expected[theirs], abs=1e-12), (unit.id, ours)


def test_each_step_scores_as_trec_eval_on_that_steps_ranking() -> None:
    steps = step_samples(CONVERSATION)
    assert_equal_to_trec_eval(steps)
    # The two hops of turn 1 share their gold but not their ranking, so their numbers differ.
    scores = RetrievalEvaluator(metrics=["ndcg@3"]).evaluate(steps).scores["ndcg@3"]
    assert scores[1] != scores[2]


def test_each_turn_scores_as_trec_eval_on_the_union_ranking() -> None:
    assert_equal_to_trec_eval(turn_samples(CONVERSATION))


def random_conversation(seed: int) -> Sample:
    """Turns of 1-4 hops drawn from a small pool of documents, so hops overlap."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(12)]
    turns = []
    for _ in range(int(rng.integers(1, 4))):
        judged = rng.choice(docs, size=int(rng.integers(1, 8)), replace=False)
        steps = [
            {"contexts": [{"id": str(d)} for d in rng.choice(docs, size=n, replace=False)]}
            for n in rng.integers(1, 9, size=int(rng.integers(1, 5)))
        ]
        relevance = {str(d): int(g) for d, g in zip(judged, rng.integers(0, 4, len(judged)))}
        turns.append({"question": "q", "steps": steps, "relevance": relevance})
    return Sample.model_validate({"id": f"r{seed}", "turns": turns})


@pytest.mark.parametrize("seed", range(6))
def test_random_steps_and_unions_score_as_trec_eval(seed: int) -> None:
    conversation = random_conversation(seed)
    assert_equal_to_trec_eval(step_samples(conversation))
    assert_equal_to_trec_eval(turn_samples(conversation))


# Contexts drawn from a few ids and a few id-less texts, so duplicates across steps are common.
# Within one step ids are unique (the data model requires it); id-less texts may repeat.
_CONTEXT = st.one_of(
    st.builds(Context, id=st.sampled_from(["d1", "d2", "d3", "d4", "d5"]), score=st.floats(0, 1)),
    st.builds(Context, text=st.sampled_from(["x", "y", "d1"]), score=st.floats(0, 1)),
)
_STEP = st.lists(_CONTEXT, max_size=6, unique_by=lambda c: c.id or object()).map(
    lambda cs: RetrievalStep(contexts=tuple(cs))
)


def _key(ctx: Context) -> tuple[str, str]:
    return ("id", ctx.id) if ctx.id is not None else ("text", ctx.text)


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, max_size=5))
def test_union_is_first_occurrence_without_duplicates(steps: list[RetrievalStep]) -> None:
    union = context_union(tuple(steps))
    flat = [c for step in steps for c in step.contexts]
    keys = [_key(c) for c in flat]
    # Every context of the union is in some step; every step's context is in the union once.
    # An id and a text are different keys: the text "d1" is not the id "d1".
    assert all(any(c in step.contexts for step in steps) for c in union)
    assert sorted({*keys}) == sorted(_key(c) for c in union)
    assert len({_key(c) for c in union}) == len(union)
    # Each is its first occurrence (score and all), in the order of first occurrence.
    firsts = [keys.index(_key(c)) for c in union]
    assert firsts == sorted(firsts)
    assert all(c == flat[i] for c, i in zip(union, firsts, strict=True))
    # As a turn's sample it validates: no doc id twice in its ranking.
    turn = Sample.model_validate({"id": "c", "turns": [{"steps": steps}]})
    assert turn_samples(turn)[0].contexts == union
