"""A scripted OpenAI-compatible server on 127.0.0.1 for tests and benchmarks.

    with FakeOpenAIServer([chat('{"score": 4}'), error(429, headers={"Retry-After": "2"})]) as srv:
        client = OpenAIClient("fake-model", base_url=srv.base_url)
        ...
        srv.requests  # the JSON bodies received, in arrival order

It implements ``POST /v1/chat/completions`` on an ephemeral port, with asyncio on a background
thread (so 64+ concurrent keep-alive connections cost nothing). Each request takes the next
scripted ``Reply`` (a list), or whatever ``script(body)`` returns (a function); a plain string is
a 200 reply with that text. ``received`` counts the requests that arrived (every one, refused or
not), to compare with what a client's usage says. Options: ``latency`` seconds added to every
reply, ``rpm_limit`` (a token bucket of one second's worth of requests, answered with 429 and
counted in ``rate_limited`` when exceeded), ``reject_response_format`` (400 to any request asking
for structured output, as servers without it do; ``True`` for OpenAI's error shape, or the
``Reply`` to send), ``pinned_model`` (400 with FastAPI's ``{"detail": ...}`` to a request for
another model, as a server serving one model does), ``ignores`` (request parameters the server
acts as if absent, as many compatible servers do: ``"response_format"``, ``"logprobs"`` (and
``top_logprobs``), ``"n"``). ``GET /v1/stats`` returns the counts.

Replies beyond a plain text: ``error`` (OpenAI's ``{"error": {"message": ...}}``),
``fastapi_error`` (``{"detail": ...}``), ``ollama_error`` (``{"error": "..."}``), ``text_error``
(a plain-text body), ``malformed`` (not JSON), ``hang``, ``truncated`` (``finish_reason``
"length", the text cut before its end), and ``Reply(..., choices=k, logprobs=False)`` for a
server that returns fewer choices than asked or no logprobs.

Run as a script it serves in its own process (for benchmarks: no GIL shared with the client),
prints its base URL, and stops when stdin closes:
``python tests/fake_openai_server.py --latency 0.1 --rpm-limit 600``. It answers keep-alive
HTTP/1.1 with a listen backlog of 4096 and TCP_NODELAY (asyncio's default), so that it, not the
client, is never what sets the pace below its CPU limit; ``--port P --reuse-port`` starts
another process on the same port (SO_REUSEPORT), for loads one process cannot serve.

The Batch API, as OpenAI serves it: ``POST /v1/files`` (a multipart upload),
``GET /v1/files/{id}/content``, ``POST /v1/batches`` and ``GET /v1/batches/{id}``. Each created
batch takes the next ``BatchPlan`` of ``batches`` (then ``BatchPlan()``): "in_progress" for
``polls`` retrievals, then its ``outcome``. A completed or expired batch runs its lines through
the same script as chat requests: a 200 reply goes to the output file, an error reply to the
error file (a per-line error). ``batch_lines`` holds the line bodies run, ``batches_created``
counts the creations and ``calls`` lists every HTTP request as "METHOD path".
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

if __package__:
    from tests.fake_batch_api import BatchPlan, BatchRoutes, read_chunked
else:  # run as a script (benchmarks): its folder is on the path, not the repo's
    from fake_batch_api import BatchPlan, BatchRoutes, read_chunked  # type: ignore[no-redef]

__all__ = [
    "BatchPlan",
    "FakeOpenAIServer",
    "Reply",
    "chat",
    "error",
    "fastapi_error",
    "hang",
    "malformed",
    "ollama_error",
    "text_error",
    "truncated",
]


@dataclass
class Reply:
    """One scripted answer: ``content`` as the assistant message (status 200), or ``status`` with
    ``body`` as the error payload; ``headers`` added; sent after ``delay`` seconds."""

    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0
    raw: bytes | None = None  # sent verbatim as the body (malformed JSON, an HTML error page)
    content_type: str = "application/json"
    finish_reason: str = "stop"
    choices: int | None = None  # how many choices to return (None: the request's n)
    logprobs: bool = True  # logprobs when the request asks (False: a server that ignores it)


def chat(content: str, *, delay: float = 0.0) -> Reply:
    return Reply(content=content, delay=delay)


def error(
    status: int, message: str = "scripted error", *, headers: dict[str, str] | None = None
) -> Reply:
    body = {"error": {"message": message, "type": "scripted", "code": str(status)}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def fastapi_error(status: int, detail: Any) -> Reply:
    """FastAPI's error body: ``{"detail": "..."}``, or a list of validation errors."""
    return Reply(status=status, body={"detail": detail})


def ollama_error(status: int, message: str) -> Reply:
    """Ollama's (and TGI's) error body: ``{"error": "..."}``, the message a plain string."""
    return Reply(status=status, body={"error": message})


def text_error(status: int, text: str) -> Reply:
    """An error whose body is plain text, not JSON (a proxy, a bare HTTP server)."""
    return Reply(status=status, raw=text.encode(), content_type="text/plain; charset=utf-8")


TRUNCATED = '{"reason": "The answer is grounded", "score": 4'


def truncated(content: str = TRUNCATED) -> Reply:
    """A reply cut short by max_tokens: ``finish_reason`` "length", the JSON never closed."""
    return Reply(content=content, finish_reason="length")


CUT_OFF = b'{"choices": [{"message": {"content": "cut o'


def malformed(raw: bytes = CUT_OFF, status: int = 200) -> Reply:
    """A reply whose body is not JSON (by default: a completion cut off mid-string)."""
    return Reply(status=status, raw=raw)


def hang(seconds: float = 30.0) -> Reply:
    """A reply that comes only after ``seconds`` (longer than any client timeout in tests)."""
    return Reply(content="too late", delay=seconds)


Script = Sequence["Reply | str"] | Callable[[dict[str, Any]], "Reply | str"] | None


class FakeOpenAIServer(BatchRoutes):
    def __init__(
        self,
        script: Script = None,
        *,
        latency: float = 0.0,
        rpm_limit: float | None = None,
        reject_response_format: bool | Reply = False,
        pinned_model: str | None = None,
        ignores: Collection[str] = (),
        default: Reply | str = '{"reason": "default reply", "score": 3}',
        batches: Sequence[BatchPlan] = (),
        port: int = 0,
        reuse_port: bool = False,
    ) -> None:
        self._script = script if callable(script) or script is None else list(script)
        self._position = 0
        self.latency = latency
        self.reject_response_format = reject_response_format
        self.pinned_model = pinned_model
        unknown = set(ignores) - {"response_format", "logprobs", "n"}
        if unknown:
            raise ValueError(f"cannot ignore {sorted(unknown)}: response_format, logprobs, n")
        self.ignores = frozenset(ignores)
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.rate_limited = 0
        self.arrivals: list[float] = []  # time.monotonic() of each request's arrival
        self.calls: list[str] = []  # every HTTP request, as "METHOD path"
        self.files: dict[str, bytes] = {}
        self.batch_state: dict[str, dict[str, Any]] = {}
        self.batch_lines: list[dict[str, Any]] = []
        self._plans = list(batches)
        self._batch_plan: dict[str, BatchPlan] = {}
        self._polled: dict[str, int] = {}
        self._rate = rpm_limit / 60.0 if rpm_limit else None
        self._bucket = max(1.0, self._rate or 0.0)
        self._capacity = self._bucket
        self._stamp = time.monotonic()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = port
        self._reuse_port = reuse_port  # several server processes on one port (benchmarks)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def received(self) -> int:
        """Chat-completion requests that arrived, whatever the answer."""
        return len(self.requests)

    @property
    def batches_created(self) -> int:
        return len(self.batch_state)

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            # A backlog well above any client's concurrency; asyncio sets TCP_NODELAY itself.
            asyncio.start_server(
                self._serve, "127.0.0.1", self.port, backlog=4096, reuse_port=self._reuse_port
            ),
            self._loop,
        )
        self._server = started.result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    # ---- HTTP ----------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    raw = await reader.readline()
                    if raw in (b"\r\n", b"\n", b""):
                        break
                    name, value = raw.decode("latin-1").split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    data = await read_chunked(reader)
                else:
                    size = int(headers.get("content-length", "0"))
                    data = await reader.readexactly(size) if size else b""
                status, extra, payload = await self._answer(method, path, headers, data)
                blob = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                extra = {"Content-Type": "application/json", **extra}
                head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(blob)}"]
                head += [f"{k}: {v}" for k, v in extra.items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + blob)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    def _next(self, body: dict[str, Any]) -> Reply:
        if callable(self._script):
            reply = self._script(body)
        elif self._script is not None and self._position < len(self._script):
            reply = self._script[self._position]
            self._position += 1
        else:
            reply = self.default
        return chat(reply) if isinstance(reply, str) else reply

    def _take_token(self) -> bool:
        if self._rate is None:
            return True
        now = time.monotonic()
        self._bucket = min(self._capacity, self._bucket + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._bucket >= 1.0:
            self._bucket -= 1.0
            return True
        return False

    async def _answer(
        self, method: str, path: str, headers: dict[str, str], data: bytes
    ) -> tuple[int, dict[str, str], Any]:
        self.calls.append(f"{method} {path}")
        if "/v1/files" in path or "/v1/batches" in path:
            return self._batch_api(method, path.split("?")[0], headers, data)
        if method == "GET" and path.endswith("/stats"):
            arrivals = self.arrivals or [0.0]
            return (
                200,
                {},
                {
                    "requests": len(self.requests),
                    "rate_limited": self.rate_limited,
                    "first_arrival": arrivals[0],
                    "last_arrival": arrivals[-1],
                },
            )
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, {}, {"error": {"message": f"no route {method} {path}"}}
        body = json.loads(data or b"{}")
        self.requests.append(body)
        self.headers.append(headers)
        self.arrivals.append(time.monotonic())
        if not self._take_token():
            self.rate_limited += 1
            return 429, {"Retry-After": "1"}, {"error": {"message": "rate limit exceeded"}}
        if self.pinned_model is not None and body.get("model") != self.pinned_model:
            return 400, {}, {"detail": f"Server is pinned to {self.pinned_model!r}"}
        seen = {k: v for k, v in body.items() if not self._ignored(k)}
        refusal = self.reject_response_format
        if refusal is not False and "response_format" in seen:
            if isinstance(refusal, Reply):
                return self._send(refusal)
            return 400, {}, {"error": {"message": "response_format is not supported"}}
        reply = self._next(body)
        if reply.delay or self.latency:
            await asyncio.sleep(reply.delay + self.latency)
        return self._send(reply, seen)

    def _ignored(self, name: str) -> bool:
        return name in self.ignores or (name == "top_logprobs" and "logprobs" in self.ignores)

    def _send(
        self, reply: Reply, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        headers = {**reply.headers, "Content-Type": reply.content_type}
        if reply.raw is not None:
            return reply.status, headers, reply.raw
        if reply.status != 200 or body is None:
            return reply.status, headers, reply.body
        return 200, headers, _completion(body, reply, len(self.requests))


def _completion(body: dict[str, Any], reply: Reply, serial: int) -> dict[str, Any]:
    content = reply.content
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    logprobs = None
    if body.get("logprobs") and reply.logprobs:
        top = int(body.get("top_logprobs") or 1)
        tokens = content.split() or [""]
        logprobs = {
            "content": [
                {
                    "token": t,
                    "logprob": -0.25,
                    "bytes": None,
                    "top_logprobs": [
                        {"token": t if k == 0 else f"{t}~{k}", "logprob": -0.25 - k, "bytes": None}
                        for k in range(top)
                    ],
                }
                for t in tokens
            ]
        }
    choice = {"message": {"role": "assistant", "content": content}}
    count = reply.choices if reply.choices is not None else int(body.get("n") or 1)
    return {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {"index": i, **choice, "logprobs": logprobs, "finish_reason": reply.finish_reason}
            for i in range(count)
        ],
        "usage": {
            "prompt_tokens": prompt // 4 + 1,
            "completion_tokens": len(content) // 4 + 1,
            "total_tokens": prompt // 4 + len(content) // 4 + 2,
        },
    }


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--rpm-limit", type=float, default=None)
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    parser.add_argument("--reuse-port", action="store_true", help="share the port (SO_REUSEPORT)")
    args = parser.parse_args()
    reply = '{"reason": "The answer is supported by context 1.", "score": 4}'
    with FakeOpenAIServer(
        latency=args.latency,
        rpm_limit=args.rpm_limit,
        default=reply,
        port=args.port,
        reuse_port=args.reuse_port,
    ) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin


if __name__ == "__main__":
    main()
