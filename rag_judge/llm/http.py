"""Provider-neutral HTTP helpers: secret redaction and Retry-After parsing."""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping

__all__ = ["parse_retry_after", "redact"]


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
