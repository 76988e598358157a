"""What the ``openai`` client reads from a reply: a chat completion's JSON as a ``Completion``,
the tokens served from OpenAI's prompt cache, and the facts behind an SDK exception (a refused
connection, an unmapped aiohttp error, the server's own explanation). Secrets are redacted from
every message built here."""

from __future__ import annotations

import sys
from typing import Any, Protocol

from rag_judge.llm.base import Completion, LLMError
from rag_judge.llm.http import server_text

__all__ = ["cached_tokens"]


class _Client(Protocol):
    base_url: str | None

    def _key(self) -> str: ...


def _aiohttp_error(exc: BaseException) -> bool:
    """An aiohttp error the SDK's aiohttp bridge lets through unmapped (a malformed HTTP
    reply, say): a connection problem like the ones it does map."""
    aiohttp = sys.modules.get("aiohttp")
    return aiohttp is not None and isinstance(exc, aiohttp.ClientError)


def _refusal(exc: BaseException) -> OSError | None:
    """The refused or failed connection behind ``exc``, if any. The SDK's aiohttp transport
    reports every aiohttp connection error as a connect *timeout*, so a refused connection
    would otherwise read as "no reply within 60 s"."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def _explain(exc: Any, key: str) -> str:
    """The server's own words in an APIStatusError: its parsed body (the SDK hands over the
    ``error`` member of a JSON object that has one, else the whole JSON or the raw text), else
    the body as received; "" when it says nothing (the SDK's message would be "Error code: N")."""
    text = server_text(exc.body, key)
    if not text:
        try:
            text = server_text(exc.response.text, key)
        except Exception:  # a body never read (the stream was closed first)
            return ""
    return text


def cached_tokens(usage: Any) -> int:
    """The prompt tokens a chat completion's ``usage`` says came from OpenAI's prompt cache
    (``prompt_tokens_details.cached_tokens``); 0 when a server does not say."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return 0
    return int(value)


def _completion(data: Any, structured: bool | None, client: _Client) -> Completion | LLMError:
    """A chat-completion JSON body as a Completion; a body of another shape is an error."""
    try:
        raw_choices = data["choices"]
        if not raw_choices:
            return LLMError("the server returned no choices")
        choices = [
            c["message"].get("content") or c["message"].get("refusal") or "" for c in raw_choices
        ]
        token_logprobs = None  # None, not [], when the server returned none (asked or not)
        first = raw_choices[0].get("logprobs") or {}
        if first.get("content"):
            token_logprobs = []
            for item in first["content"]:
                alternatives = {item["token"]: item["logprob"]}
                alternatives.update(
                    {a["token"]: a["logprob"] for a in item.get("top_logprobs") or []}
                )
                token_logprobs.append(alternatives)
        usage = data.get("usage") or {}
        finish = raw_choices[0].get("finish_reason")
        return Completion(
            choices=choices,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_prompt_tokens=cached_tokens(usage),
            token_logprobs=token_logprobs,
            extra={"response_model": data.get("model")},
            finish_reason=None if finish is None else str(finish),
            structured_output=structured,
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(data, dict) and "choices" not in data:  # an error answered with a 2xx
            where = client.base_url or "api.openai.com"
            said = server_text(data, client._key()) or "an empty object"
            return LLMError(f"{where}: the reply has no choices: {said}")
        return LLMError(f"malformed chat completion from the server ({type(exc).__name__}: {exc})")
