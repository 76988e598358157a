"""The ``openai`` client: the official SDK's AsyncOpenAI against any OpenAI-compatible server.

OpenAI itself, vLLM, Ollama, llama.cpp's server or a LiteLLM proxy: whatever ``base_url`` names.
The key is read from the environment variable the config names (never stored in the config, the
cache, a report, a log line or an error message); a server that needs none gets a placeholder.
The SDK's own retries are off: the engine retries, under its rate limits, and counts it.
The HTTP layer is the SDK's aiohttp client (``openai.DefaultAioHttpClient``) when
``openai[aiohttp]`` is installed (``rag-judge[judge]`` installs it), else its default httpx
client; both take proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``...).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import logging
import os
import re
import ssl
from typing import TYPE_CHECKING, Any

from rag_judge.errors import ConfigError
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.http import count_request, never_connected, parse_retry_after, redact
from rag_judge.llm.providers.openai_replies import _aiohttp_error, _explain, _refusal
from rag_judge.llm.providers.openai_replies import _completion as _completion  # for batch.py
from rag_judge.llm.providers.openai_replies import cached_tokens as cached_tokens

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai._models import FinalRequestOptions

__all__ = ["OpenAIClient", "cached_tokens", "key_problem"]

log = logging.getLogger(__name__)

_POOLS = 8
_RETRYABLE_STATUS = frozenset({408, 409, 429})
# A 400/422 whose explanation says this is about structured output, in the words of OpenAI,
# vLLM (guided decoding, xgrammar/outlines), llama.cpp (grammar), Ollama, LiteLLM and FastAPI
# validation errors (which name the field: "body.response_format: ..."). Anything else (a wrong
# model name, an overlong prompt) is returned as it is, not resent.
_ABOUT_FORMAT = re.compile(
    r"response[_ ]?format|schema|json[_ ]?(object|mode)|structured|guided|grammar|outlines"
    r"|format[_ -]?enforcer",
    re.IGNORECASE,
)


class _StatusError(LLMError):
    """An HTTP error status, keeping the server's own explanation apart from the message."""

    def __init__(self, message: str, *, explanation: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.explanation = explanation

    @property
    def refuses_format(self) -> bool:
        return self.status in (400, 422) and bool(_ABOUT_FORMAT.search(self.explanation))


def _schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    """``response_format`` for a JSON schema, given bare or already as {name, schema, ...}."""
    if "schema" in schema and "name" in schema:
        spec = dict(schema)
    else:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title", "response")))[:64]
        spec = {"name": name or "response", "schema": schema}
        # Strict mode rejects schemas that allow extra keys, so ask for it only where it fits.
        if schema.get("additionalProperties") is False:
            spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


def _tls_context() -> ssl.SSLContext | None:
    """The HTTP library's default TLS context (httpx2 under openai 3.x, httpx before)."""
    for name in ("httpx2", "httpx"):
        try:
            context: ssl.SSLContext = importlib.import_module(name).create_ssl_context()
        except (ImportError, AttributeError):
            continue
        return context
    return None


def key_problem(api_key_env: str, base_url: str | None) -> str | None:
    """Why a client could not authenticate, known before any call: the OpenAI API (no
    ``base_url``, or one at api.openai.com) with the environment variable ``api_key_env`` unset
    or empty; None otherwise (a local server may need no key). Never names the key's value."""
    if base_url is not None and "api.openai.com" not in base_url:
        return None
    if os.environ.get(api_key_env):
        return None
    return (
        f"environment variable {api_key_env} is not set: the OpenAI API needs a key "
        "(or give base_url for a local server that needs none)"
    )


class OpenAIClient:
    """An ``LLMClient`` over ``openai.AsyncOpenAI``.

    ``timeout`` (seconds) bounds each HTTP call. The SDK runs over its ``DefaultAioHttpClient``
    (which its docs recommend for concurrency; about a third less client CPU per call than
    httpx here) when aiohttp is installed, else over its default httpx client.

    With ``structured_output``, a request carrying a
    ``json_schema`` asks for it through ``response_format``; a server that rejects that with a 400
    (or 422) whose explanation is about structured output (``response_format``, a schema, guided
    decoding, a grammar) gets the request again without it, and if that works this client stops
    asking (the verdict parser copes with plain text). Any other 400 is the call's error. Every
    HTTP request is noted with ``count_request``, so the engine's usage counts a resend too.

    A reply says what the server did: ``finish_reason`` (of the first choice),
    ``structured_output`` (whether the request that got it carried a response_format; None when
    the request asked for no schema), ``choices`` as returned (fewer than ``n`` from a server that
    ignores ``n``) and ``token_logprobs`` None when the server returned none. An error status
    keeps the server's own explanation from the body (redacted and cut to 300 characters).
    """

    provider = "openai"
    scores_labels = False
    supports_logprobs = True
    cancellable = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        structured_output: bool = True,
        batch: bool = False,
    ) -> None:
        if not model:
            raise ConfigError("the openai client needs a model name, e.g. model: gpt-4o-mini")
        if timeout <= 0:
            raise ConfigError(f"timeout={timeout!r} is not valid: expected seconds > 0")
        self.model = model
        self.base_url = base_url.rstrip("/") if base_url else None
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.structured_output = structured_output
        self.batch = batch  # the engine sends uncached requests via rag_judge.llm.batch
        # The key is not checked here: building a client calls nothing, and a dry run builds
        # one without a key. ``check_client`` checks it before a run; a call without it fails.
        try:  # imported here, outside any event loop: importing takes a second
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the openai client needs the openai package: pip install 'rag-judge[judge]'"
            ) from exc
        # The SDK's aiohttp layer: DefaultAioHttpClient (openai >= 1.8x) and its httpx bridge,
        # vendored in openai 3.x, a separate package before.
        sdk_aiohttp = (
            importlib.util.find_spec("aiohttp") is not None
            and hasattr(openai, "DefaultAioHttpClient")
            and any(
                importlib.util.find_spec(m)
                for m in ("openai._vendor.httpx_aiohttp", "httpx_aiohttp")
            )
        )
        self.http = "aiohttp" if sdk_aiohttp else "httpx"  # the SDK's HTTP layer
        self._tls: ssl.SSLContext | None = None
        self._sdks: list[AsyncOpenAI] = []
        self._sdk_loop: asyncio.AbstractEventLoop | None = None
        self._closer: asyncio.Task[None] | None = None
        self._turn = 0
        self._templates: dict[int, FinalRequestOptions] = {}  # per SDK client (see _create)

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    def __getstate__(self) -> dict[str, Any]:
        # A copy for a worker process (rag_judge.llm.pool): the settings, not the open SDK
        # clients, their loop or the TLS context, which the copy builds anew on its first call.
        state = dict(self.__dict__)
        state.update(_tls=None, _sdks=[], _sdk_loop=None, _closer=None, _turn=0, _templates={})
        return state

    @property
    def _official(self) -> bool:
        return self.base_url is None or "api.openai.com" in self.base_url

    def _key(self) -> str:
        # Read when needed and handed to the SDK only; a keyless local server gets a placeholder.
        return os.environ.get(self.api_key_env) or "EMPTY"

    def _client(self) -> AsyncOpenAI:
        # An SDK client's connections belong to the loop that opened them, and run_sync may
        # bring a fresh loop per run: so one set of clients per loop. Requests go round-robin
        # over _POOLS clients because httpx's pool scans all its connections on every
        # request: smaller pools saved about a tenth of the client's CPU at 64 concurrent calls.
        loop = asyncio.get_running_loop()
        if not self._sdks or self._sdk_loop is not loop:
            self._sdks = self._open_clients()
            self._sdk_loop = loop
            # Closed when the loop's runner (asyncio.run) cancels its leftover tasks, so a
            # caller who never calls aclose() still leaves no open sessions behind.
            self._closer = loop.create_task(_close_when_cancelled(self._sdks))
        self._turn = (self._turn + 1) % len(self._sdks)
        return self._sdks[self._turn]

    def _open_clients(self) -> list[AsyncOpenAI]:
        import openai

        if self._tls is None:  # building one costs ~40 ms: share it between the pools
            self._tls = _tls_context()
        tls: dict[str, Any] = {"verify": self._tls} if self._tls is not None else {}
        # Given explicitly: the SDK's own wrapper would try to close itself on whatever loop is
        # running when it is collected, which fails for a closed one.
        http = (
            openai.DefaultAioHttpClient
            if self.http == "aiohttp"
            else openai.DefaultAsyncHttpxClient
        )
        sdks = [
            openai.AsyncOpenAI(
                api_key=self._key(),
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
                http_client=http(timeout=self.timeout, **tls),
            )
            for _ in range(_POOLS)
        ]
        self._templates = {id(sdk): t for sdk in sdks if (t := _template(sdk)) is not None}
        return sdks

    def _params(self, request: CompletionRequest, use_format: bool) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        # OpenAI's newer models refuse max_tokens; many compatible servers only know it.
        params["max_completion_tokens" if self._official else "max_tokens"] = request.max_tokens
        if request.seed is not None:
            params["seed"] = request.seed
        if request.n != 1:
            params["n"] = request.n
        if request.top_logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = request.top_logprobs
        if use_format and request.json_schema is not None:
            params["response_format"] = _schema_format(request.json_schema)
        return params

    async def complete(self, request: CompletionRequest) -> Completion:
        problem = key_problem(self.api_key_env, self.base_url)
        if problem:  # not retryable: the environment will not change during the run
            raise LLMError(f"{self.base_url or 'api.openai.com'}: {problem}")
        use_format = self.structured_output and request.json_schema is not None
        outcome = await self._create(request, use_format)
        if use_format and isinstance(outcome, _StatusError) and outcome.refuses_format:
            again = await self._create(request, False)
            if isinstance(again, Completion) and self.structured_output:
                self.structured_output = False
                log.warning(
                    "%s rejected response_format (HTTP %s: %s); asking for plain text from now on",
                    self.base_url or "api.openai.com",
                    outcome.status,
                    outcome.explanation,
                )
            outcome = again
        if isinstance(outcome, LLMError):
            raise outcome  # outside any except block: no SDK exception rides along as context
        return outcome

    async def _create(self, request: CompletionRequest, use_format: bool) -> Completion | LLMError:
        try:
            # The SDK's generic post (its documented route for any endpoint): the same auth,
            # transport and errors as chat.completions.create, minus a re-walk of every message
            # through typed-dict transforms and the construction of the typed response model
            # (``cast_to=object`` hands back the parsed JSON) — together about a third of the
            # client's CPU per call at high concurrency. The few fields used are read below.
            # The body goes as ready JSON bytes (as the SDK would serialise it), which spares
            # the SDK a deep copy of every message on each call.
            body = json.dumps(
                self._params(request, use_format), ensure_ascii=False, separators=(",", ":")
            ).encode("utf-8")
            count_request()
            sdk = self._client()
            # The request's options, as ``post`` would build them, copied from one template
            # made per SDK client: ``post`` builds them afresh, deep-copying their defaults,
            # about a tenth of the client's CPU per call. The URL is absolute, which spares
            # the SDK a merge with its base URL on every call.
            template = self._templates.get(id(sdk))
            if template is None:
                data = await sdk.post("/chat/completions", content=body, cast_to=object)
            else:
                data = await sdk.request(object, template.model_copy(update={"content": body}))
        except Exception as exc:
            return self._error(exc)
        # None: no schema asked for; else whether this request carried the response_format.
        structured = use_format if request.json_schema is not None else None
        return _completion(data, structured, self)

    def _error(self, exc: Exception) -> LLMError:
        import openai

        where = self.base_url or "api.openai.com"
        key = self._key()
        refused = _refusal(exc)
        timed_out = isinstance(exc, openai.APITimeoutError | TimeoutError)
        if timed_out and refused is None:
            return LLMError(
                f"{where}: no reply within {self.timeout:g} s",
                retryable=True,
                connected=not never_connected(exc),
            )
        if isinstance(exc, openai.APIConnectionError) or refused is not None or _aiohttp_error(exc):
            cause = refused or exc.__cause__ or exc
            detail = f" ({redact(str(cause), key)})" if str(cause) else ""
            return LLMError(
                f"{where}: connection failed{detail}",
                retryable=True,
                connected=not never_connected(exc),
            )
        if isinstance(exc, ValueError):  # a 2xx body that is not JSON
            return LLMError(f"{where}: the reply is not JSON ({redact(str(exc), key)})")
        if isinstance(exc, openai.APIStatusError):
            status, headers = exc.status_code, exc.response.headers
            retryable = status in _RETRYABLE_STATUS or status >= 500
            hint = headers.get("x-should-retry")  # the server's own say, as openai-python obeys
            if hint in ("true", "false"):
                retryable = hint == "true"
            explanation = _explain(exc, key)
            return _StatusError(
                f"HTTP {status} from {where}: {explanation or 'no explanation in the reply'}",
                explanation=explanation,
                retryable=retryable,
                retry_after=parse_retry_after(headers),
                status=status,
            )
        return LLMError(f"{where}: {type(exc).__name__}: {redact(str(exc), key)}")

    async def aclose(self) -> None:
        """Close the HTTP connections (of the running loop's clients)."""
        sdks, self._sdks = self._sdks, []
        closer, self._closer = self._closer, None
        if sdks and self._sdk_loop is asyncio.get_running_loop():
            if closer is not None:
                closer.cancel()
            for sdk in sdks:
                await sdk.close()


def _template(sdk: AsyncOpenAI) -> FinalRequestOptions | None:
    """The options of a chat-completion POST on ``sdk``, as its ``post`` builds them, less the
    body; None where this SDK version does not have them where expected (then ``post`` is used)."""
    try:
        from openai._models import FinalRequestOptions

        url = str(sdk.base_url).rstrip("/") + "/chat/completions"
        return FinalRequestOptions.construct(method="post", url=url)
    except Exception:  # pragma: no cover - another SDK layout
        return None


async def _close_when_cancelled(sdks: list[AsyncOpenAI]) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        for sdk in sdks:
            if not sdk.is_closed():
                await sdk.close()
