"""Conversations: turns of retrieval and tool-call steps, read the same from every layout (the
rag-judge JSONL, ragas' MultiTurnSample, DeepEval's ConversationalTestCase; JSONL, CSV,
Parquet), single-turn samples serialized as before, errors naming file:line, turn and step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.data.conversation import ExpectedTools, RetrievalStep, ToolStep, Turn
from rag_judge.data.jsonl import read_jsonl, write_jsonl
from rag_judge.data.readers import load_dataset
from rag_judge.data.sample import Sample
from rag_judge.data.stream import open_source
from rag_judge.data.target import run_target_sync

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# One conversation, by hand: turn 0 retrieves once; turn 1 retrieves twice (two hops) and
# calls a tool. The goal and the expected tool call are the conversation's.
HOP0 = ["The Pacific is the largest ocean.", "The Atlantic is the second largest."]
HOP1 = ["The Pacific's deepest point is the Mariana Trench."]
HOP2 = ["The Challenger Deep is 10,994 m deep."]
CALC = {"expression": "10994 / 1000"}
GOAL = "Learn which ocean is largest and how deep it gets."
OWN = {
    "id": "c1",
    "turns": [
        {
            "question": "Which ocean is the largest?",
            "steps": [{"contexts": HOP0}],
            "answer": "The Pacific.",
        },
        {
            "question": "How deep does it get, in km?",
            "steps": [
                {"contexts": HOP1},
                {"type": "retrieval", "contexts": HOP2},
                {"tool": "calculator", "arguments": CALC, "result": "10.994"},
            ],
            "answer": "About 11 km.",
        },
    ],
    "goal": GOAL,
    "expected_tools": [{"calls": [{"tool": "calculator", "arguments": CALC}], "order": "strict"}],
}
RAGAS = {
    "id": "c1",
    "user_input": [
        {"type": "human", "content": "Which ocean is the largest?"},
        {"type": "ai", "content": "The Pacific.", "metadata": {"retrieved_contexts": HOP0}},
        {"type": "human", "content": "How deep does it get, in km?"},
        {"type": "ai", "content": "", "metadata": {"retrieved_contexts": HOP1}},
        {
            "type": "ai",
            "content": "",
            "metadata": {"retrieved_contexts": HOP2},
            "tool_calls": [{"name": "calculator", "args": CALC}],
        },
        {"type": "tool", "content": "10.994"},
        {"type": "ai", "content": "About 11 km."},
    ],
    "reference": GOAL,
    "reference_tool_calls": [{"name": "calculator", "args": CALC}],
}
DEEPEVAL = {
    "id": "c1",
    "turns": [
        {"role": "user", "content": "Which ocean is the largest?"},
        {"role": "assistant", "content": "The Pacific.", "retrieval_context": HOP0},
        {"role": "user", "content": "How deep does it get, in km?"},
        {"role": "assistant", "content": "", "retrieval_context": HOP1},
        {
            "role": "assistant",
            "content": "About 11 km.",
            "retrieval_context": HOP2,
            "tools_called": [{"name": "calculator", "input_parameters": CALC, "output": "10.994"}],
        },
    ],
    "expected_outcome": GOAL,
}


def expected() -> Sample:
    hop = RetrievalStep
    turns = (
        Turn(
            question="Which ocean is the largest?",
            steps=(hop.model_validate({"contexts": HOP0}),),
            answer="The Pacific.",
        ),
        Turn(
            question="How deep does it get, in km?",
            steps=(
                hop.model_validate({"contexts": HOP1}),
                hop.model_validate({"contexts": HOP2}),
                ToolStep(tool="calculator", arguments=CALC, result="10.994"),
            ),
            answer="About 11 km.",
        ),
    )
    tools = ExpectedTools.model_validate({"calls": [{"tool": "calculator", "arguments": CALC}]})
    return Sample(id="c1", turns=turns, goal=GOAL, expected_tools=(tools,))


def write_lines(path: Path, *rows: Any) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("row", "layout"), [(OWN, "rag-judge"), (RAGAS, "ragas"), (DEEPEVAL, "deepeval")]
)
def test_every_layout_and_format_reads_the_same_conversation(
    tmp_path: Path, row: dict[str, Any], layout: str
) -> None:
    want = expected()
    if layout == "deepeval":  # DeepEval's conversations carry no expected tool calls
        want = want.model_copy(update={"expected_tools": None})
    paths = [write_lines(tmp_path / "d.jsonl", row)]
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "d.parquet")
    paths.append(tmp_path / "d.parquet")
    if layout == "rag-judge":  # a CSV cell is text: the turns are JSON
        cells = {k: v if isinstance(v, str) else json.dumps(v) for k, v in row.items()}
        pd.DataFrame([cells]).to_csv(tmp_path / "d.csv", index=False)
        paths.append(tmp_path / "d.csv")
    for path in paths:
        (got,) = load_dataset(path).samples
        assert got == want, path.name
        (forced,) = load_dataset(path, layout=layout).samples
        assert forced == want


def test_helpers_the_metric_layers_read() -> None:
    sample = expected()
    first, second = sample.conversation_turns()
    assert sample.is_conversation() and len(second.steps) == 3
    assert [s.contexts[0].text for s in second.retrieval_steps()] == [HOP1[0], HOP2[0]]
    assert [(c.tool, c.arguments, c.result) for c in second.tool_calls()] == [
        ("calculator", CALC, "10.994")
    ]
    assert first.tool_calls() == () and len(first.retrieval_steps()) == 1
    whole = sample.expected_tools_for(None)
    assert whole is not None and whole.order == "strict" and whole.calls[0].tool == "calculator"
    assert sample.expected_tools_for(1) is None


def test_a_single_turn_sample_is_one_turn_of_one_retrieval_step() -> None:
    single = Sample.model_validate(SINGLE)
    (turn,) = single.conversation_turns()
    (step,) = turn.steps
    assert not single.is_conversation() and turn.question == single.question
    assert isinstance(step, RetrievalStep) and step.query is None
    assert step.contexts == single.contexts and turn.answer == single.answer
    assert (turn.references, turn.relevance, turn.qrels) == (
        single.references,
        single.relevance,
        single.qrels,
    )
    # A single-turn sample's expected tools without a turn are its one turn's.
    tools = single.model_copy(update={"expected_tools": (ExpectedTools(calls=()),)})
    assert tools.expected_tools_for(0) is tools.expected_tools_for(None) is not None


SINGLE = {
    "id": "q1",
    "question": "Which ocean is the largest?",
    "contexts": [
        {"id": "d3", "text": "The Pacific is the largest.", "score": 0.5},
        "plain",
        {"doc_id": "h", "start": 0, "end": 4, "text": "abcd"},
    ],
    "answer": "The Pacific.",
    "references": "The Pacific Ocean is the largest.",
    "relevance": {"d3": 3},
    "qrels": [{"doc_id": "h", "relevance": 2, "start": 0, "end": 9}],
    "answerable": True,
    "metadata": {"k": [1]},
}


def test_single_turn_samples_serialize_as_before() -> None:
    # Dumped by the code before conversations existed: new fields are absent when unset.
    assert Sample.model_validate(SINGLE).model_dump_json() == (
        '{"id":"q1","question":"Which ocean is the largest?","contexts":[{"id":"d3","text":'
        '"The Pacific is the largest.","score":0.5,"relevance":null},{"id":null,"text":"plain",'
        '"score":null,"relevance":null},{"id":null,"text":"abcd","score":null,"relevance":null,'
        '"doc_id":"h","start":0,"end":4}],"answer":"The Pacific.","references":["The Pacific '
        'Ocean is the largest."],"relevance":{"d3":3.0},"qrels":[{"doc_id":"h","relevance":2.0,'
        '"start":0,"end":9}],"answerable":true,"metadata":{"k":[1]}}'
    )
    assert Sample(id="x").model_dump_json() == (
        '{"id":"x","question":null,"contexts":[],"answer":null,"references":[],'
        '"relevance":null,"answerable":null,"metadata":{}}'
    )


def test_a_conversation_writes_and_streams_back(tmp_path: Path) -> None:
    write_jsonl([expected(), Sample.model_validate(SINGLE)], tmp_path / "w.jsonl")
    back = read_jsonl(tmp_path / "w.jsonl").samples
    assert back == (expected(), Sample.model_validate(SINGLE))
    assert list(open_source(tmp_path / "w.jsonl")) == list(back)
    assert Sample.model_validate_json(expected().model_dump_json()) == expected()


def test_deepeval_keeps_its_context_and_retrieved_sources_in_the_sample(tmp_path: Path) -> None:
    row = {
        "scenario": "A sailor plans a route.",
        "user_description": "a sailor",
        "turns": [
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "q", "metadata": {"channel": "chat"}},
            {
                "role": "assistant",
                "content": "a",
                "retrieval_context": [{"context": "Charts say so.", "source": "charts.pdf"}],
            },
        ],
    }
    (sample,) = load_dataset(write_lines(tmp_path / "d.jsonl", row)).samples
    greeting, turn = sample.conversation_turns()
    assert sample.id == "row-1" and sample.goal is None
    assert sample.metadata == {
        "scenario": "A sailor plans a route.",
        "user_description": "a sailor",
    }
    assert (greeting.question, greeting.answer, greeting.steps) == (None, "Hello!", ())
    assert turn.metadata == {"channel": "chat"}
    (context,) = turn.retrieval_steps()[0].contexts
    assert (context.text, context.doc_id) == ("Charts say so.", "charts.pdf")


def test_ragas_keeps_rubrics_topics_and_the_synthesizers_columns(tmp_path: Path) -> None:
    row = {
        **RAGAS,
        "reference_topics": ["oceans"],
        "rubrics": {"score1": "wrong ocean"},
        "persona_name": "a sailor",
    }
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "r.parquet")
    (sample,) = load_dataset(tmp_path / "r.parquet").samples
    assert sample.metadata == {
        "rubrics": {"score1": "wrong ocean"},
        "reference_topics": ["oceans"],
        "persona_name": "a sailor",
    }
    assert sample.turns == expected().turns


# ---- the target may return steps or turns -----------------------------------------------------


def returning(value: Any) -> Callable[[str], Any]:
    return lambda question: value


def test_a_target_returns_steps_or_turns() -> None:
    sample = Sample(id="s", question="q", references=("ref",), relevance={"d1": 1.0})
    steps = [{"query": "q", "contexts": [{"id": "d1", "text": "t"}]}, {"tool": "f", "result": 2}]
    for value in (
        {"answer": "a", "steps": steps},
        {"turns": [{"steps": steps, "answer": "a"}]},
        {"turns": [Turn.model_validate({"steps": steps, "answer": "a"})]},
    ):
        run = run_target_sync(returning(value), [sample])
        assert run.errors == [None]
        (turn,) = run.samples[0].conversation_turns()
        assert run.samples[0].question is None and run.samples[0].references == ()
        assert (turn.question, turn.answer, turn.references) == ("q", "a", ("ref",))
        assert turn.relevance == {"d1": 1.0} and [type(s) for s in turn.steps] == [
            RetrievalStep,
            ToolStep,
        ]
    bad = {
        "turns": [{"steps": [{"tool": ""}]}],
        "answer": "a",
    }
    run = run_target_sync(lambda q: bad, [sample])
    assert run.errors[0] is not None and "'turns' beside 'answer'" in run.errors[0]
    run = run_target_sync(lambda q: {"turns": [{"steps": [{"tool": ""}]}]}, [sample])
    assert run.errors == [
        "target returned invalid output: 'turns[0].steps[0].tool': must not be empty"
    ]
    conversation = expected()
    run = run_target_sync(lambda q: ("a", []), [conversation])
    assert run.errors == ["the sample is a conversation: a target is called with one question"]


# ---- dump -> parse is the identity ------------------------------------------------------------

text = st.text(max_size=8)


def nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3)


json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | text, nested, max_leaves=6
)
context = st.fixed_dictionaries(
    {"text": text},
    optional={"score": st.floats(-1, 1), "relevance": st.integers(0, 3)},
)
retrieval = st.fixed_dictionaries(
    {"contexts": st.lists(context, max_size=3)}, optional={"query": st.none() | text}
)
tool = st.fixed_dictionaries(
    {"tool": text.filter(bool)},
    optional={"arguments": st.dictionaries(text, json_value, max_size=3), "result": json_value},
)
turn = st.fixed_dictionaries(
    {"steps": st.lists(retrieval | tool, max_size=4)},
    optional={
        "question": text,
        "answer": st.none() | text,
        "references": st.lists(text, max_size=2),
        "relevance": st.dictionaries(text, st.integers(0, 3), max_size=3),
        "qrels": st.lists(
            st.fixed_dictionaries({"doc_id": text.filter(bool), "relevance": st.integers(0, 3)}),
            max_size=2,
        ),
    },
)
call = text.filter(bool) | st.fixed_dictionaries(
    {"tool": text.filter(bool)}, optional={"arguments": st.dictionaries(text, json_value)}
)
policy = st.sampled_from(["strict", "in_order", "unordered", "subset", "superset"])


@st.composite
def conversation(draw: st.DrawFn) -> dict[str, Any]:
    turns = draw(st.lists(turn, min_size=1, max_size=3))
    which = draw(st.lists(st.none() | st.integers(0, len(turns) - 1), unique=True, max_size=2))
    if len(turns) == 1:
        which = which[:1]  # the whole of a one-turn conversation is its turn 0
    expected = [{"turn": w, "calls": draw(st.lists(call, max_size=3)), "order": draw(policy)}
                for w in which]  # fmt: skip
    return {"id": "c", "turns": turns, "expected_tools": expected or None,
            "goal": draw(st.none() | text), "metadata": {"k": draw(json_value)}}  # fmt: skip


@given(conversation())
@settings(max_examples=150, deadline=None)
def test_dump_then_parse_is_the_identity(row: dict[str, Any]) -> None:
    sample = Sample.model_validate(row)
    assert Sample.model_validate_json(sample.model_dump_json()) == sample
    assert Sample.model_validate(sample.model_dump()) == sample
    assert Sample.model_validate_json(sample.model_dump_json(exclude_defaults=True)) == sample
