"""Driving a conversational target: replaying a dataset's user turns, a simulated user (the
stub user), the turn limit and stop rules, failures recorded against their sample."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rag_judge import Pipeline
from rag_judge.config import ConversationConfig, load_config
from rag_judge.data.conversation import Turn
from rag_judge.data.dialogue import Drive, UserBrief, UserTurn, drive_target_sync
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.judge.simulated_user import LLMUser, read_user_reply, stub_user, user_request
from rag_judge.llm import ClientConfig, LLMError, StubClient, make_engine, scripted
from rag_judge.llm.sections import parse_sections
from rag_judge.pipeline.converse import Driver
from tests import REPO

Messages = list[dict[str, str]]


def conversation(sid: str, *questions: str, **fields: Any) -> Sample:
    turns = [
        {"question": q, "answer": f"dataset answer {i}", "references": [f"ref {sid} {i}"]}
        for i, q in enumerate(questions)
    ]
    turns[0]["relevance"] = {"d1": 2}
    return Sample.model_validate({"id": sid, "turns": turns, **fields})


class Scripted:
    """A conversational target that answers 'A<n>: <question>' with one retrieval step, and
    records what it was called with."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[Messages] = []
        self.fail_on = fail_on

    def __call__(self, messages: Messages) -> dict[str, Any]:
        self.calls.append(messages)
        question = messages[-1]["content"]
        if question == self.fail_on:
            raise RuntimeError("index unavailable")
        n = sum(m["role"] == "user" for m in messages)
        contexts = [{"id": f"d{n}", "text": f"doc {n}"}]
        return {"answer": f"A{n}: {question}", "steps": [{"query": question, "contexts": contexts}]}


def test_replay_feeds_the_dataset_questions_and_keeps_each_turn_gold() -> None:
    target = Scripted()
    samples = [conversation("c1", "q1", "q2"), conversation("c2", "p1", "p2", "p3")]
    run = drive_target_sync(target, samples, Drive(mode="replay"), concurrency=1)
    assert run.errors == [None, None]
    assert all(t is not None and t >= 0 for t in run.latency)
    c1, c2 = run.samples
    assert [t.question for t in c1.turns or ()] == ["q1", "q2"]
    assert [t.answer for t in c2.turns or ()] == ["A1: p1", "A2: p2", "A3: p3"]
    # the gold of the dataset's turn i stays with turn i; its answers are the target's
    assert [t.references for t in c2.turns or ()] == [("ref c2 0",), ("ref c2 1",), ("ref c2 2",)]
    assert (c2.turns or ())[0].relevance == {"d1": 2} and (c2.turns or ())[1].relevance is None
    assert (c2.turns or ())[2].steps[0].contexts[0].id == "d3"  # type: ignore[union-attr]
    assert c1.driven is not None and c1.driven.model_dump() == {
        "mode": "replay",
        "turns": 2,
        "max_turns": 6,
        "stopped": "dataset_end",
    }
    # the target saw the conversation so far: the user's turns and its own answers
    assert target.calls[1] == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "A1: q1"},
        {"role": "user", "content": "q2"},
    ]


def test_replay_stops_at_the_turn_limit_and_drops_the_unrun_turns_expected_tools() -> None:
    expected = [{"turn": 0, "calls": ["search"]}, {"turn": 2, "calls": ["mail"]}]
    sample = conversation("c", "q1", "q2", "q3", expected_tools=expected)
    [out] = drive_target_sync(Scripted(), [sample], Drive(max_turns=2)).samples
    assert [t.question for t in out.turns or ()] == ["q1", "q2"]
    assert out.driven is not None and (out.driven.turns, out.driven.stopped) == (2, "max_turns")
    assert [e.turn for e in out.expected_tools or ()] == [0]
    # a limit equal to the dataset's turns: the dataset ran out
    [out] = drive_target_sync(Scripted(), [sample], Drive(max_turns=3)).samples
    assert out.driven is not None and out.driven.stopped == "dataset_end"


def test_a_stop_pattern_ends_the_conversation_after_the_matching_answer() -> None:
    sample = conversation("c", "hello", "goodbye", "more")
    [out] = drive_target_sync(Scripted(), [sample], Drive(stop=r"(?i)GOODBYE")).samples
    assert [t.answer for t in out.turns or ()] == ["A1: hello", "A2: goodbye"]
    assert out.driven is not None and (out.driven.turns, out.driven.stopped) == (2, "stop_pattern")


def test_a_target_failure_mid_conversation_is_recorded_and_the_run_goes_on() -> None:
    samples = [conversation("bad", "q1", "boom", "q3"), conversation("good", "q1")]
    run = drive_target_sync(Scripted(fail_on="boom"), samples, Drive())
    assert run.errors == ["turn 1: RuntimeError: index unavailable", None]
    assert run.latency[0] is None and run.latency[1] is not None
    bad = run.samples[0]
    # the turn asked and not answered is kept, with its gold; the rest never ran
    assert [(t.question, t.answer) for t in bad.turns or ()] == [("q1", "A1: q1"), ("boom", None)]
    assert (bad.turns or ())[1].references == ("ref bad 1",)
    assert bad.driven is not None and (bad.driven.turns, bad.driven.stopped) == (1, "error")


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"turns": []}, "turn 0: a conversational target returns one turn per call"),
        (42, "turn 0: target returned int"),
        ({"answer": 3}, "turn 0: target returned an answer of type int"),
        ({"answer": "x", "steps": [{"foo": 1}]}, "turn 0: target returned an invalid turn"),
    ],
)
def test_a_wrong_reply_fails_its_turn(reply: Any, error: str) -> None:
    run = drive_target_sync(lambda _: reply, [conversation("c", "q1", "q2")], Drive())
    assert run.errors[0] is not None and run.errors[0].startswith(error)


def test_a_timed_out_turn_is_recorded() -> None:
    async def slow(messages: Messages) -> str:
        await asyncio.Event().wait()  # never set: only the timeout ends it
        return "never"

    run = drive_target_sync(slow, [conversation("c", "q")], Drive(), timeout=0.01)
    assert run.errors == ["turn 0: timed out after 0.01 s"]


def test_replay_of_a_single_turn_sample_stays_single_turn() -> None:
    sample = Sample(id="s", question="q", references=("r",), relevance={"d1": 1})
    run = drive_target_sync(lambda m: ("an answer", ["ctx"]), [sample], Drive())
    [out] = run.samples
    assert not out.is_conversation() and out.answer == "an answer" and out.references == ("r",)
    assert [c.text for c in out.contexts] == ["ctx"]
    assert out.driven is not None and (out.driven.turns, out.driven.stopped) == (1, "dataset_end")
    # a plain string is an answer; steps make it a conversation, as a plain target's would
    [out] = drive_target_sync(lambda m: "plain", [sample], Drive(stop="plain")).samples
    assert out.answer == "plain" and out.driven and out.driven.stopped == "stop_pattern"
    steps = {"answer": "a", "steps": [{"tool": "calc", "arguments": {"x": 1}}]}
    [out] = drive_target_sync(lambda m: steps, [sample], Drive()).samples
    assert out.is_conversation() and (out.turns or ())[0].references == ("r",)


def test_input_turns_gives_the_target_typed_turns() -> None:
    seen: list[list[Turn]] = []

    def target(turns: list[Turn]) -> Turn:
        seen.append(turns)
        return Turn(answer=f"saw {len(turns)}")

    drive_target_sync(target, [conversation("c", "q1", "q2")], Drive(input="turns"))
    assert [t.question for t in seen[1]] == ["q1", "q2"]
    assert seen[1][0].answer == "saw 1" and seen[1][1].answer is None


# --- the simulated user ----------------------------------------------------------------------


def stub() -> LLMUser:
    return LLMUser.from_config(ClientConfig(provider="stub"))


def echo(messages: Messages) -> str:
    """Repeats the user's message: a goal's words come back at once."""
    return f"Sure: {messages[-1]['content']}"


def test_the_stub_user_reaches_its_goal_before_the_limit() -> None:
    sample = Sample(id="g", goal="rotate the production key")
    with stub() as user:
        run = drive_target_sync(echo, [sample], Drive(mode="simulate", max_turns=5), user=user)
    [out] = run.samples
    assert run.errors == [None]
    # the goal opens the conversation; the echo covers it, so the user is done after turn 0
    assert [t.question for t in out.turns or ()] == ["rotate the production key"]
    assert out.driven is not None and out.driven.model_dump() == {
        "mode": "simulate",
        "turns": 1,
        "max_turns": 5,
        "stopped": "user_done",
    }


def test_the_stub_user_asks_for_what_is_missing_and_hits_the_limit() -> None:
    answers = iter(["The key will rotate.", "Nothing more.", "Still nothing."])
    sample = Sample(id="g", goal="rotate production key", question="Help me.", references=("r",))
    with stub() as user:
        run = drive_target_sync(
            lambda m: next(answers), [sample], Drive(mode="simulate", max_turns=3), user=user
        )
    [out] = run.samples
    turns = out.turns or ()
    # the sample's question opens it, with its gold; then the goal words not yet answered
    assert [t.question for t in turns] == [
        "Help me.",
        "What about production?",
        "What about production?",
    ]
    assert turns[0].references == ("r",) and turns[1].references == ()
    assert out.driven is not None and (out.driven.turns, out.driven.stopped) == (3, "max_turns")


def test_a_simulated_user_failure_and_a_missing_goal_are_recorded() -> None:
    failing = scripted([LLMError("model overloaded")])
    user = LLMUser(make_engine(ClientConfig(max_attempts=1), client=StubClient(failing)))
    samples = [Sample(id="g", goal="x"), Sample(id="nogoal", question="q")]
    with user:
        run = drive_target_sync(echo, samples, Drive(mode="simulate"), user=user)
    assert run.errors == [
        "turn 0: the simulated user failed: LLMError: model overloaded",
        "the sample has no goal: a simulated user needs one",
    ]
    assert run.samples[0].turns is None and run.samples[0].driven is not None
    assert run.samples[0].driven.stopped == "error"


def test_simulate_needs_a_user() -> None:
    with pytest.raises(ConfigError, match="needs a simulated user"):
        drive_target_sync(echo, [], Drive(mode="simulate"))


def test_the_user_request_delimits_the_conversation() -> None:
    brief = UserBrief(
        goal="g <<<END GOAL>>>",
        persona="p",
        scenario=None,
        messages=(("user", "hi"), ("assistant", "hello")),
    )
    request = user_request(brief)
    sections = parse_sections(request.messages[1].content)
    assert list(sections) == ["GOAL", "PERSONA", "USER 1", "ASSISTANT 1"]
    assert sections["GOAL"] == "g ‹‹‹END GOAL›››"  # data cannot close a section
    assert request.json_schema is not None
    # the stub user reads the same sections: with no conversation yet, the goal opens it
    opening = UserBrief(goal="rotate the key", persona=None, scenario=None, messages=())
    assert read_user_reply(str(stub_user()(user_request(opening)))) == UserTurn("rotate the key")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"message": "next?", "done": false}', UserTurn("next?")),
        ('```json\n{"message": "", "done": true}\n```', UserTurn(None, done=True)),
        ("DONE", UserTurn(None, done=True)),
        ("just text", UserTurn("just text")),
    ],
)
def test_read_user_reply(text: str, said: UserTurn) -> None:
    assert read_user_reply(text) == said


def test_read_user_reply_rejects_json_without_the_fields() -> None:
    with pytest.raises(LLMError, match=r"not \{message, done\}"):
        read_user_reply('{"msg": "x"}')


# --- config and pipeline ---------------------------------------------------------------------


def write(tmp_path: Path, conversation: str, target: str = "target: t.py:f\n") -> Path:
    path = tmp_path / "c.yaml"
    text = f"dataset: d.jsonl\n{target}conversation:\n{conversation}evaluators: [{{type: rouge}}]\n"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("conversation", "message"),
    [
        ("  mode: simulte\n", "c.yaml:4: conversation.mode: 'simulte' is not a legal value (did "
         "you mean 'simulate'?); legal values: replay, simulate"),
        ("  max_turns: 0\n", "c.yaml:4: conversation.max_turns:"),
        ("  stop: '('\n", "c.yaml:4: conversation.stop: not a regular expression"),
        ("  usr: {}\n", "c.yaml:4: conversation.usr: unknown key 'usr' (did you mean 'user'?)"),
        ("  user: {provider: stub}\n", "c.yaml:4: conversation: 'user' is the simulated user's "
         "model: mode 'replay' has none"),
        ("  input: text\n", "legal values: messages, turns"),
    ],
)  # fmt: skip
def test_config_errors_name_the_key_and_line(
    tmp_path: Path, conversation: str, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, conversation))
    assert message in str(err.value)


def test_a_conversation_needs_a_target(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"c\.yaml:3: conversation: drives a target"):
        load_config(write(tmp_path, "  mode: replay\n", target=""))


def test_the_pipeline_records_how_each_conversation_was_driven() -> None:
    result = Pipeline.from_yaml(REPO / "configs" / "agent_simulated.yaml").run()
    report = result.report
    stopped = {
        r.id: r.sample.driven.stopped for r in report.samples if r.sample and r.sample.driven
    }
    assert stopped == {
        "g01-key-rotation": "user_done",
        "g02-sla-credits": "user_done",
        "g03-invoice-review": "stop_pattern",
        "g04-sla-regions": "max_turns",
    }
    options = report.signatures["latency_s"].options
    assert {k: options[k] for k in ("conversation", "max_turns", "stop", "user", "latency")} == {
        "conversation": "simulate",
        "max_turns": "4",
        "stop": "could not find",
        "user": "stub/stub-user",
        "latency": "turns-summed",
    }
    assert report.config["conversation"]["mode"] == "simulate"
    assert report.summary["latency_s"].n == 4
    assert "turn.answer_relevance" in report.summary


def test_without_conversation_the_config_and_signature_are_as_before() -> None:
    config = load_config(REPO / "configs" / "toy_rag.yaml")
    assert config.conversation is None and "conversation" not in config.model_dump()
    with Driver(None, echo) as driver:
        assert driver.options() == {} and driver.user is None
    assert ConversationConfig().user.provider == "stub"


def test_a_failed_conversation_keeps_no_recorded_answer_or_step() -> None:
    # A plain target cannot answer a conversation, and a simulation needs a goal: either way
    # the dataset's recorded answers and steps are not what the system did.
    recorded = Sample.model_validate(
        {"id": "c", "turns": [{"question": "q", "answer": "recorded", "relevance": {"d1": 1},
                               "steps": [{"contexts": [{"id": "d1", "text": "t"}]}]}]}
    )  # fmt: skip
    with LLMUser.from_config(ClientConfig()) as user:
        run = drive_target_sync(echo, [recorded], Drive(mode="simulate"), user=user)
    (failed,) = run.samples
    (turn,) = failed.conversation_turns()
    assert (turn.question, turn.answer, turn.steps) == ("q", None, ())
    assert turn.relevance == {"d1": 1}  # the gold stays
    assert failed.driven is not None and failed.driven.stopped == "error"
    assert failed.driven.turns == 0


def test_a_stop_pattern_with_a_pipe_signs_as_its_hash() -> None:
    config = ConversationConfig(mode="replay", stop="sorry|cannot")
    with Driver(config, echo) as driver:
        stop = driver.options()["stop"]
    assert stop.startswith("sha256-") and "|" not in stop
    with Driver(ConversationConfig(mode="replay", stop="could not"), echo) as driver:
        assert driver.options()["stop"] == "could not"


def test_the_simulated_user_is_cached_and_its_calls_counted(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"id": "g", "goal": "rotate api keys"}\n')
    lines = [
        "name: sim",
        "dataset: d.jsonl",
        f"target: {REPO / 'examples' / 'support_agent.py'}:chat",
        "conversation: {mode: simulate, max_turns: 2, cache: user.sqlite}",
        "evaluators: [{type: rouge, per: turn}]",
    ]
    (tmp_path / "c.yaml").write_text("\n".join(lines) + "\n")
    first = Pipeline.from_yaml(tmp_path / "c.yaml").run().report
    assert (tmp_path / "user.sqlite").exists()  # relative to the config's folder
    asked = first.usage.requests
    assert asked >= 1 and first.usage.cache_hits == 0
    again = Pipeline.from_yaml(tmp_path / "c.yaml").run().report
    assert (again.usage.requests, again.usage.cache_hits) == (0, asked)
    assert again.samples[0].sample == first.samples[0].sample
    with pytest.raises(ValueError, match="'cache' is the simulated user's cache"):
        ConversationConfig(mode="replay", cache="default")
