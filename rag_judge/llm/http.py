"""Provider-neutral HTTP helpers: secret redaction, Retry-After parsing, the server's own
explanation of an error from its reply body, a count of the HTTP requests a call sent, and
whether a failed request ever reached a server."""

from __future__ import annotations

import contextvars
import email.utils
import json
import math
import re
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = [
    "count_request",
    "counted_requests",
    "never_connected",
    "parse_retry_after",
    "redact",
    "server_text",
]


_SECRETS = re.compile(r"(\bsk-[A-Za-z0-9_\-]{4})[A-Za-z0-9_\-*]+|(Bearer\s+)\S+")


def redact(text: str, secret: str | None = None) -> str:
    """``text`` with ``secret`` and anything shaped like an API key or bearer token masked."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return _SECRETS.sub(lambda m: (m.group(1) or m.group(2)) + "***", text)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, else ``Retry-After`` as seconds or
    as an HTTP date (relative to ``now``, a Unix time). None when absent or unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) else None
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        when = email.utils.mktime_tz(parsed)
    except (TypeError, ValueError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


# ---- the server's explanation of an error ------------------------------------------------

SERVER_TEXT_LIMIT = 300
# Where servers put their explanation, most specific first: OpenAI, vLLM and llama.cpp
# ({"error": {"message": ...}} or {"message": ...}), FastAPI ({"detail": "..."} or a list of
# validation errors with "loc" and "msg"), Ollama and TGI ({"error": "..."}), OAuth-style
# ({"error_description": ...}), and the rest.
_TEXT_KEYS = ("message", "detail", "error", "msg", "error_description", "description", "reason",
              "title", "errors")  # fmt: skip
_MARKUP = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.IGNORECASE | re.DOTALL)
_SCAN = 20_000  # characters of a body read at most (an HTML error page can be large)


def server_text(body: object, secret: str | None = None, limit: int = SERVER_TEXT_LIMIT) -> str:
    """The server's own explanation in an error reply ``body`` (parsed JSON of any shape, or raw
    text), as one line: at most ``limit`` characters ("…" when cut), ``secret`` and anything
    key-shaped redacted. "" when the body explains nothing."""
    text = " ".join(_explanation(body, 0)[:_SCAN].split())
    text = redact(text, secret)
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def _explanation(body: object, depth: int) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes | bytearray):
        body = bytes(body[:_SCAN]).decode("utf-8", "replace")
    if isinstance(body, str):
        if body.lstrip().startswith("<"):  # an HTML error page from a proxy or gateway
            return _MARKUP.sub(" ", body[:_SCAN])
        return body
    if isinstance(body, bool | int | float):
        return str(body)
    if depth >= 6:  # nested deeper than any server's error: show it as it is
        return _compact(body)
    if isinstance(body, Mapping):
        if "msg" in body and "loc" in body:  # one FastAPI/pydantic validation error
            where = body["loc"]
            place = ".".join(map(str, where)) if isinstance(where, list | tuple) else str(where)
            return f"{place}: {_explanation(body['msg'], depth + 1)}"
        for key in _TEXT_KEYS:
            text = _explanation(body.get(key), depth + 1)
            if text.strip():
                param = body.get("param")  # OpenAI names the offending parameter here
                if key == "message" and isinstance(param, str) and param and param not in text:
                    text = f"{text} (param: {param})"
                return text
        if not body or any(key in body for key in _TEXT_KEYS):  # explains, but says nothing
            return ""
        return _compact(body)  # a shape of its own: show it as it is
    if isinstance(body, list | tuple):
        parts = (_explanation(item, depth + 1) for item in body[:20])
        return "; ".join(p for p in parts if p.strip())
    return str(body)


def _compact(body: object) -> str:
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(body)


# ---- HTTP requests per call --------------------------------------------------------------

_SENT: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "rag_judge_http_requests", default=None
)


def count_request() -> None:
    """Note one HTTP request about to be sent, for whoever is counting (``counted_requests``).
    A client that may send more than one request per call (a resend in another form) calls this
    before each; the engine then counts every request a server saw."""
    sent = _SENT.get()
    if sent is not None:
        sent[0] += 1


@contextmanager
def counted_requests() -> Iterator[list[int]]:
    """``[n]``: the ``count_request`` calls made within this block, by the coroutines it awaits
    and the tasks they start (a context variable, so concurrent calls keep separate counts)."""
    sent = [0]
    token = _SENT.set(sent)
    try:
        yield sent
    finally:
        _SENT.reset(token)


# ---- whether a failed request reached a server ------------------------------------------


def never_connected(exc: BaseException) -> bool:
    """Whether ``exc`` failed before any connection was made (refused, host not found, the
    connect step timed out), so that no server saw the request. A connection that broke after
    it was made (reset, server disconnected) may have delivered it, and counts as seen."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and all(cause is not c for c in chain):
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    before: list[type[BaseException]] = [ConnectionRefusedError, socket.gaierror]
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        before.append(aiohttp.ClientConnectorError)
        if hasattr(aiohttp, "ConnectionTimeoutError"):  # aiohttp >= 3.10: the connect step
            before.append(aiohttp.ConnectionTimeoutError)
    # httpx's ConnectTimeout means the connect step, except from the SDK's aiohttp bridge,
    # which reports every aiohttp connection error as one: there the aiohttp error decides.
    bridged = aiohttp is not None and any(isinstance(c, aiohttp.ClientError) for c in chain)
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None:
            before.append(module.ConnectError)
            if not bridged:
                before.append(module.ConnectTimeout)
    return any(isinstance(c, tuple(before)) for c in chain)
