"""The openai client against servers that do not do what was asked (issue #10, client side):
the server's own explanation in every error, what the server actually returned recorded on the
Completion, and every HTTP request it saw counted. Through the real SDK and ``JudgeEngine``
against the fake server on 127.0.0.1; time is a fake clock, nothing really waits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.cache import SqliteCache, _decode
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.http import count_request, counted_requests, server_text
from rag_judge.llm.providers.openai import OpenAIClient
from tests.fake_openai_server import (
    TRUNCATED,
    FakeOpenAIServer,
    Reply,
    chat,
    error,
    fastapi_error,
    malformed,
    ollama_error,
    text_error,
    truncated,
)
from tests.llm import FakeClock
from tests.llm.test_openai import KEY, KEY_ENV, SCHEMA, req


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture(autouse=True, params=["aiohttp", "httpx"])
def http(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once per HTTP layer under the SDK (they hand the error body over differently)."""
    init = OpenAIClient.__init__

    def with_layer(self: OpenAIClient, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        self.http = str(request.param)

    monkeypatch.setattr(OpenAIClient, "__init__", with_layer)
    return str(request.param)


def engine_for(
    srv: FakeOpenAIServer, *, model: str = "fake-judge", **kw: Any
) -> tuple[JudgeEngine, FakeClock]:
    client = OpenAIClient(model, base_url=srv.base_url, api_key_env=KEY_ENV, timeout=5.0)
    clock = FakeClock()
    return JudgeEngine(client, clock=clock, sleep=clock.sleep, **kw), clock


def one(srv: FakeOpenAIServer, request: CompletionRequest, **kw: Any) -> Completion | LLMError:
    engine, _ = engine_for(srv, **kw)
    (result,) = asyncio.run(engine.run([request]))
    return result


# ---- 1. the server's explanation --------------------------------------------------------------

VALIDATION = [
    {"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}},
    {"type": "float_parsing", "loc": ["body", "temperature"], "msg": "Input should be a number"},
]
EXPLAINED = {
    "openai": (error(400, "The model 'gpt-9' does not exist"), "The model 'gpt-9' does not exist"),
    "fastapi": (
        fastapi_error(400, "Server is pinned to 'smollm2'"),
        "Server is pinned to 'smollm2'",
    ),
    "fastapi_validation": (
        fastapi_error(422, VALIDATION),
        "body.messages: Field required; body.temperature: Input should be a number",
    ),
    "ollama": (
        ollama_error(404, 'model "llama9" not found, try pulling it first'),
        'model "llama9" not found, try pulling it first',
    ),
    "vllm": (
        Reply(
            status=400,
            body={
                "object": "error",
                "message": "max_tokens is too large",
                "type": "BadRequestError",
                "param": "max_tokens",
                "code": 400,
            },
        ),
        "max_tokens is too large",
    ),
    "nested": (
        Reply(status=400, body={"error": {"error": {"message": "deep down", "code": 7}}}),
        "deep down",
    ),
    "plain_text": (
        text_error(400, "Bad Request:\n  unknown field 'seed'\n"),
        "Bad Request: unknown field 'seed'",
    ),
    "html": (
        malformed(
            b"<html><head><title>400</title><style>p {x: 1}</style></head>"
            b"<body><h1>400 Bad Request</h1><hr>nginx</body></html>",
            status=400,
        ),
        "400 400 Bad Request nginx",
    ),
    "unknown_shape": (
        Reply(status=400, body={"code": 17, "hint": "none"}),
        '{"code":17,"hint":"none"}',
    ),
    "empty": (malformed(b"", status=400), "no explanation in the reply"),
}


@pytest.mark.parametrize("shape", list(EXPLAINED))
def test_the_servers_own_explanation_is_the_error(shape: str) -> None:
    reply, said = EXPLAINED[shape]
    with FakeOpenAIServer([reply]) as srv:
        result = one(srv, req())
    assert isinstance(result, LLMError) and result.status == reply.status
    assert str(result) == f"HTTP {reply.status} from {srv.base_url}: {said}"
    assert "Error code" not in str(result) and srv.received == 1


@pytest.mark.parametrize(
    "reply",
    [
        error(401, f"Incorrect API key provided: {KEY}. " + "x" * 2000),
        fastapi_error(403, f"key {KEY} is not allowed here; " + "y" * 2000),
        ollama_error(400, f"Authorization: Bearer {KEY} rejected " + "z" * 2000),
        text_error(400, f"refused {KEY} " + "w" * 2000),
    ],
    ids=["openai", "fastapi", "ollama", "text"],
)
def test_an_explanation_is_cut_short_and_a_key_in_it_redacted(reply: Reply) -> None:
    with FakeOpenAIServer([reply]) as srv:
        result = one(srv, req())
    assert isinstance(result, LLMError)
    text = str(result)
    assert KEY not in text and "***" in text and "sk-ragj" not in text.replace("sk-ragj***", "")
    explanation = text.split(": ", 1)[1]
    assert len(explanation) == 300 and explanation.endswith("…")


def test_server_text_reads_any_shape() -> None:
    assert server_text({"message": "bad", "param": "response_format"}) == (
        "bad (param: response_format)"
    )
    assert server_text({"message": "bad response_format", "param": "response_format"}) == (
        "bad response_format"
    )
    assert server_text({"detail": {"error": {"msg": "inner"}}}) == "inner"
    assert server_text([{"message": "a"}, "b", None, {"detail": ""}]) == "a; b"
    assert server_text(b"  raw\nbytes ") == "raw bytes"
    assert server_text(None) == server_text("") == server_text({}) == server_text([]) == ""
    assert server_text(404) == "404"
    deep: Any = "bottom"
    for _ in range(10):
        deep = {"wrapper": deep}
    assert server_text(deep).startswith('{"wrapper":')  # shown as JSON, no endless descent
    assert server_text("a" * 300) == "a" * 300
    assert server_text("a" * 301) == "a" * 299 + "…"
    assert server_text(f"token {KEY}", KEY) == "token ***"
    assert server_text("Bearer abc.def") == "Bearer ***"


# ---- 2. what the server did -------------------------------------------------------------------


def test_finish_reason_and_structured_output_are_recorded() -> None:
    plain = "The answer is grounded. Score: 4"
    script = [chat('{"reason": "ok", "score": 5}'), chat(plain), truncated()]
    with FakeOpenAIServer(script) as srv:
        engine, _ = engine_for(srv, concurrency=1)
        asked, not_asked, cut = asyncio.run(
            engine.run([req("a", json_schema=SCHEMA), req("b"), req("c", json_schema=SCHEMA)])
        )
    assert isinstance(asked, Completion) and isinstance(not_asked, Completion)
    assert (asked.finish_reason, asked.structured_output) == ("stop", True)
    assert (not_asked.finish_reason, not_asked.structured_output) == ("stop", None)
    assert isinstance(cut, Completion) and cut.text == TRUNCATED
    assert (cut.finish_reason, cut.structured_output) == ("length", True)
    assert [("response_format" in b) for b in srv.requests] == [True, False, True]


def test_a_server_that_ignores_response_format_answers_plain_text() -> None:
    # The request carried the format (structured_output True); the reply is what came back.
    with FakeOpenAIServer(["Score: 4, it is grounded."], ignores={"response_format"}) as srv:
        result = one(srv, req(json_schema=SCHEMA))
    assert isinstance(result, Completion) and result.text == "Score: 4, it is grounded."
    assert result.structured_output is True and srv.received == 1


def test_fewer_choices_than_asked_are_recorded_as_received() -> None:
    with FakeOpenAIServer([Reply(content="only one", choices=2)]) as srv:
        scripted = one(srv, req(n=3))
    with FakeOpenAIServer(ignores={"n"}) as srv:
        ignored = one(srv, req(n=5))
    assert srv.requests[0]["n"] == 5  # asked for
    assert isinstance(scripted, Completion) and scripted.choices == ["only one", "only one"]
    assert isinstance(ignored, Completion) and len(ignored.choices) == 1


def test_no_logprobs_from_the_server_is_none_not_an_empty_list() -> None:
    with FakeOpenAIServer(ignores={"logprobs"}) as srv:
        ignored = one(srv, req(top_logprobs=3))
    with FakeOpenAIServer([Reply(content="4", logprobs=False)]) as srv:
        scripted = one(srv, req(top_logprobs=3))
    with FakeOpenAIServer(["4"]) as srv:
        honoured = one(srv, req(top_logprobs=3))
    assert srv.requests[0]["logprobs"] is True
    assert isinstance(ignored, Completion) and ignored.token_logprobs is None
    assert isinstance(scripted, Completion) and scripted.token_logprobs is None
    assert isinstance(honoured, Completion) and honoured.token_logprobs == [
        {"4": -0.25, "4~1": -1.25, "4~2": -2.25}
    ]


def test_a_2xx_error_body_says_what_the_server_said() -> None:
    body = json.dumps({"error": "model 'smollm2' is still loading"}).encode()
    with FakeOpenAIServer([malformed(body, status=200)]) as srv:
        result = one(srv, req())
    assert isinstance(result, LLMError)
    assert (
        str(result) == f"{srv.base_url}: the reply has no choices: model 'smollm2' is still loading"
    )


# ---- 3. structured-output fallback and the count of requests ----------------------------------

REFUSALS = {
    "openai": error(
        400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported"
    ),
    "vllm_guided": error(400, "xgrammar does not support this JSON schema"),
    "llama_cpp": error(400, "Failed to parse grammar"),
    "ollama": ollama_error(400, "invalid format: expected a JSON schema"),
    "fastapi_422": fastapi_error(
        422,
        [
            {
                "type": "extra_forbidden",
                "loc": ["body", "response_format"],
                "msg": "Extra inputs are not permitted",
            }
        ],
    ),
    "plain_text": text_error(400, "Structured output is not available on this server"),
}


@pytest.mark.parametrize("shape", list(REFUSALS))
def test_a_refused_response_format_is_resent_without_it(shape: str) -> None:
    with FakeOpenAIServer(reject_response_format=REFUSALS[shape]) as srv:
        engine, _ = engine_for(srv)
        (result,) = asyncio.run(engine.run([req(json_schema=SCHEMA)]))
    assert isinstance(result, Completion) and result.structured_output is False
    assert [("response_format" in b) for b in srv.requests] == [True, False]
    assert isinstance(engine.client, OpenAIClient) and engine.client.structured_output is False
    usage = engine.usage
    assert (usage.requests, usage.retries, usage.failures) == (1, 1, 0)
    assert usage.requests + usage.retries == srv.received == 2
    assert result.attempts == 1  # one attempt of the engine's, which took two requests


@pytest.mark.parametrize(
    "server",
    [
        {"pinned_model": "smollm2"},  # FastAPI: {"detail": "Server is pinned to 'smollm2'"}
        {"script": [error(400, "This model's maximum context length is 8192 tokens")]},
        {"script": [malformed(b"", status=400)]},  # no explanation: nothing says it is the format
    ],
    ids=["wrong_model", "context_length", "no_explanation"],
)
def test_a_400_about_anything_else_is_not_resent(server: dict[str, Any]) -> None:
    options = dict(server)
    with FakeOpenAIServer(options.pop("script", None), **options) as srv:
        engine, clock = engine_for(srv)
        (result,) = asyncio.run(engine.run([req(json_schema=SCHEMA)]))
    assert isinstance(result, LLMError) and result.status == 400 and not result.retryable
    if "pinned_model" in server:
        assert str(result) == f"HTTP 400 from {srv.base_url}: Server is pinned to 'smollm2'"
    assert srv.received == 1 and "response_format" in srv.requests[0]
    assert isinstance(engine.client, OpenAIClient) and engine.client.structured_output is True
    usage = engine.usage
    assert (usage.requests, usage.retries, usage.failures) == (1, 0, 1)
    assert clock.sleeps == []


def test_usage_counts_every_request_the_server_saw() -> None:
    # 40 judgments at concurrency 8 against a server without structured output that also fails
    # some calls once (503) and answers some truncated: every request it saw is in the usage.
    refusal = fastapi_error(400, "response_format is not supported by this server")
    failed_once: set[str] = set()

    def script(body: dict[str, Any]) -> Reply | str:
        text = str(body["messages"][1]["content"])
        if text.startswith("flaky") and text not in failed_once:
            failed_once.add(text)
            return error(503, "overloaded")
        return truncated() if text.startswith("cut") else '{"reason": "fine", "score": 4}'

    prompts = [f"{kind}{i}" for i in range(10) for kind in ("good", "flaky", "cut", "good")]
    requests = [req(p, json_schema=SCHEMA) for p in prompts]
    with FakeOpenAIServer(script, reject_response_format=refusal) as srv:
        engine, _ = engine_for(srv, concurrency=8)
        results = asyncio.run(engine.run(requests))
    assert all(isinstance(r, Completion) for r in results)
    usage = engine.usage
    resent = sum("response_format" in b for b in srv.requests)  # each refused once, then resent
    # Refused, then resent: the requests that left before the client learnt to stop asking.
    # That is the first wave of 8 plus any that a fast 503 freed a slot for meanwhile, so the
    # exact number depends on timing; what must hold is that it learnt (not all 30 refused).
    assert 1 <= resent < len(set(prompts))
    assert usage.requests + usage.cache_hits == len(requests)
    assert usage.requests == len(set(prompts)) == 30
    assert usage.retries == resent + 10  # the resends and the retries after a 503
    assert usage.requests + usage.retries == srv.received
    assert [r.finish_reason for r in results].count("length") == 10  # type: ignore[union-attr]


def test_a_resend_is_charged_to_the_request_rate_limit() -> None:
    # rpm 60: a call a second. The first call's two requests leave the second call a second
    # longer to wait than one request would (the clock is fake: nothing really waits).
    with FakeOpenAIServer(reject_response_format=True) as srv:
        engine, clock = engine_for(srv, concurrency=1, rpm=60)
        asyncio.run(engine.run([req("a", json_schema=SCHEMA), req("b", json_schema=SCHEMA)]))
    assert srv.received == 3
    assert sum(clock.sleeps) == pytest.approx(2.0)


async def _counts() -> list[int]:
    async def later() -> None:
        await asyncio.sleep(0)
        count_request()

    async def call(requests: int) -> int:
        with counted_requests() as sent:
            for _ in range(requests):
                count_request()
                await asyncio.sleep(0)
            await asyncio.ensure_future(later())  # a task started within counts too
        return sent[0]

    return list(await asyncio.gather(call(1), call(2), call(3)))


def test_concurrent_calls_keep_separate_request_counts() -> None:
    assert asyncio.run(_counts()) == [2, 3, 4]
    count_request()  # nobody counting: a no-op


# ---- the cache ----------------------------------------------------------------------------


def test_the_cache_round_trips_finish_reason_and_structured_output(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    requests = [req("cut", json_schema=SCHEMA), req("plain"), req("asked", json_schema=SCHEMA)]

    def script(body: dict[str, Any]) -> Reply | str:
        return truncated() if "cut" in str(body["messages"]) else '{"reason": "r", "score": 2}'

    with FakeOpenAIServer(script) as srv:
        engine, _ = engine_for(srv, concurrency=1, cache=path)
        client = engine.client
        assert isinstance(client, OpenAIClient)
        with engine:
            client.structured_output = False  # as after a refusal: sent without the format
            first = asyncio.run(engine.run(requests[:2]))
            client.structured_output = True
            first += asyncio.run(engine.run(requests[2:]))
        engine2, _ = engine_for(srv, cache=path)
        with engine2:
            again = asyncio.run(engine2.run(requests))
        assert srv.received == 3  # the second run came from the cache
    seen = [(r.finish_reason, r.structured_output, r.cached) for r in again]  # type: ignore[union-attr]
    assert seen == [("length", False, True), ("stop", None, True), ("stop", True, True)]
    assert [(r.finish_reason, r.structured_output) for r in first] == [  # type: ignore[union-attr]
        (f, s) for f, s, _ in seen
    ]


def test_old_cache_rows_decode_the_new_fields_as_unknown(tmp_path: Path) -> None:
    old = _decode(json.dumps({"choices": ["x"], "extra": {}}))
    assert (old.finish_reason, old.structured_output) == (None, None)
    # Rows the openai client wrote before kept its finish_reason in extra: still read.
    legacy = {"choices": ["x"], "extra": {"finish_reason": "length", "structured_output": True}}
    older = _decode(json.dumps(legacy))
    assert (older.finish_reason, older.structured_output) == ("length", None)
    with SqliteCache(tmp_path / "c.sqlite") as cache:
        cache.put("k", Completion(["y"], finish_reason="stop", structured_output=False))
        got = cache.get("k")
    assert got is not None and (got.finish_reason, got.structured_output) == ("stop", False)
