"""Without a cache, a run tells identical requests apart by their fields rather than by the
SHA-256 cache key: the two must agree on which requests are identical."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers.stub import StubClient, fixed

_SCHEMAS = [None, {"type": "object"}, {"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, {"a": 1.0}]

REQUESTS = st.builds(
    CompletionRequest,
    messages=st.lists(
        st.builds(ChatMessage, st.sampled_from(["system", "user"]), st.sampled_from(["x", "y"])),
        min_size=1,
        max_size=2,
    ).map(tuple),
    temperature=st.sampled_from([0.0, 0.5, 0, -0.0, float("nan")]),
    seed=st.sampled_from([None, 0, 1]),
    max_tokens=st.sampled_from([16, 512]),
    json_schema=st.sampled_from(_SCHEMAS),
    top_logprobs=st.sampled_from([None, 5]),
    n=st.sampled_from([1, 2, True]),
    score_labels=st.sampled_from([None, ("1", "2"), ["1", "2"]]),
)


@given(REQUESTS, REQUESTS)
def test_a_runs_key_and_the_cache_key_agree_on_identical_requests(
    a: CompletionRequest, b: CompletionRequest
) -> None:
    engine = JudgeEngine(StubClient(fixed(3)))
    same_run_key = engine._run_key(a) == engine._run_key(b)
    assert same_run_key == (engine.key(a) == engine.key(b))


def test_with_a_cache_the_runs_key_is_the_cache_key(tmp_path: Path) -> None:
    request = CompletionRequest(messages=(ChatMessage("user", "x"),))
    with JudgeEngine(StubClient(fixed(3)), cache=tmp_path / "c.sqlite") as engine:
        assert engine._run_key(request) == engine.key(request)


def test_requests_that_differ_in_one_field_are_each_sent() -> None:
    base = CompletionRequest(messages=(ChatMessage("user", "x"),), json_schema={"a": 1})
    others = [
        CompletionRequest(messages=(ChatMessage("system", "x"),), json_schema={"a": 1}),
        CompletionRequest(messages=(ChatMessage("user", "x"),), json_schema={"a": 2}),
        CompletionRequest(messages=(ChatMessage("user", "x"),), json_schema={"a": 1}, seed=1),
        CompletionRequest(messages=(ChatMessage("user", "x"),), json_schema={"a": 1}, n=2),
        # JSON, and so the cache key, tells 0 from 0.0
        CompletionRequest(
            messages=(ChatMessage("user", "x"),), json_schema={"a": 1}, temperature=0
        ),
    ]
    client = StubClient(fixed(3))
    engine = JudgeEngine(client)
    asyncio.run(engine.run([base, *others, base]))
    assert client.calls == 6 and engine.usage.cache_hits == 1
