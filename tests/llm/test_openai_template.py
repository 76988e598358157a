"""The openai client sends each chat completion with options copied from a template made once
per SDK client (``sdk.request``), not built afresh by ``sdk.post``: the server must see the
same request either way (URL, body, headers), the caller the same completion, and the key must
stay out of the template."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest
from rag_judge.llm.providers.openai import OpenAIClient
from tests.fake_openai_server import FakeOpenAIServer

KEY = "sk-ragjudge-TEMPLATEKEY-0a1b2c3d4e5f"
KEY_ENV = "RAG_JUDGE_TEST_TEMPLATE_KEY"
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
# Headers that differ between any two requests, whichever way they are sent.
VARYING = {"content-length", "idempotency-key"}


def requests() -> list[CompletionRequest]:
    messages = (ChatMessage("system", "You judge."), ChatMessage("user", "Grade: ünïcode ✓"))
    return [
        CompletionRequest(messages=messages),
        CompletionRequest(messages=messages, json_schema=SCHEMA, seed=7),
        CompletionRequest(messages=messages, n=2, top_logprobs=3, temperature=0.5),
    ]


def send(url: str, templated: bool) -> list[Completion]:
    async def go() -> list[Completion]:
        client = OpenAIClient("fake-judge", base_url=url, api_key_env=KEY_ENV)
        out = []
        for request in requests():
            if not templated:
                client._client()  # opens the SDK clients (and their templates) ...
                client._templates.clear()  # ... which this side then goes without
            out.append(await client.complete(request))
            assert bool(client._templates) == templated
            assert all(KEY not in repr(t) for t in client._templates.values())
        await client.aclose()
        return out

    return asyncio.run(go())


@pytest.mark.parametrize("http", ["aiohttp", "httpx"])
def test_the_template_sends_what_post_sends(http: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    init = OpenAIClient.__init__

    def with_layer(self: OpenAIClient, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        self.http = http

    monkeypatch.setattr(OpenAIClient, "__init__", with_layer)
    with FakeOpenAIServer(lambda body: '{"score": 3}') as server:
        fast = send(server.base_url, templated=True)
        slow = send(server.base_url, templated=False)
        n = len(requests())
        assert server.requests[:n] == server.requests[n:]
        for a, b in zip(server.headers[:n], server.headers[n:], strict=True):
            assert {k: v for k, v in a.items() if k not in VARYING} == {
                k: v for k, v in b.items() if k not in VARYING
            }
        assert server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert fast == slow
