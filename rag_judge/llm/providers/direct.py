"""The openai client's ``direct`` transport: chat completions over aiohttp, without the SDK.

The SDK spends about a millisecond of CPU per call building and unpacking its request and
response objects through three layers (openai, httpx2, the transport). Against a fast local
server (vLLM, llama.cpp) at hundreds of calls per second, that CPU, all on the event loop's
one core, becomes the limit. This transport sends the same POST with one aiohttp session per
event loop and hands back the parsed JSON (about a fifth of the CPU). A status >= 400 comes
back as ``HTTPStatusFailure``; a timeout, a refused connection or an unreadable body as the
exception aiohttp, the OS or ``json`` raised: the client maps all of them to ``LLMError``
exactly as it maps the SDK's errors.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["OPENAI_BASE_URL", "DirectSession", "HTTPStatusFailure", "env_proxy"]

OPENAI_BASE_URL = "https://api.openai.com/v1"


class HTTPStatusFailure(Exception):
    """A reply with status >= 400: its status, its headers and the SDK-style message
    (``Error code: 429 - {...}``, the body as parsed JSON where it is JSON)."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        text = body.decode("utf-8", "replace").strip()
        try:
            shown: Any = json.loads(text)
        except ValueError:
            shown = text
        super().__init__(f"Error code: {status} - {shown}")
        self.status = status
        self.message = str(self)
        self.headers = {k.lower(): v for k, v in headers.items()}  # names are case-blind


def env_proxy(url: str) -> str | None:
    """The proxy the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) names for ``url``."""
    parts = urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


class DirectSession:
    """One aiohttp session (one connection pool) bound to the running event loop."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        import aiohttp

        self._base = base_url.rstrip("/")
        self._proxy = env_proxy(self._base)
        self._session = aiohttp.ClientSession(
            headers=dict(headers),
            timeout=aiohttp.ClientTimeout(total=timeout),
            # No cap beyond the engine's own concurrency limit. trust_env stays off: it would
            # look up proxies and .netrc on a worker thread for every request (two thread hops
            # and GIL contention per call); the proxy is looked up once, above, instead.
            connector=aiohttp.TCPConnector(limit=0, ssl=tls if tls is not None else True),
        )

    async def post_json(self, path: str, body: bytes) -> Any:
        """POST ``body`` (JSON bytes) to ``path`` under the base URL; the reply's parsed JSON."""
        url = self._base + path
        async with self._session.post(url, data=body, proxy=self._proxy) as response:
            raw = await response.read()
            if response.status >= 400:
                raise HTTPStatusFailure(response.status, raw, response.headers)
        return json.loads(raw)

    def is_closed(self) -> bool:
        return bool(self._session.closed)

    async def close(self) -> None:
        await self._session.close()
