"""A progress display for judge runs: tqdm when installed, else one rewritten stderr line."""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """Counts done / cached / retried / failed; does nothing at all when ``enabled`` is False."""

    def __init__(self, total: int, *, enabled: bool, stream: TextIO | None = None) -> None:
        self.total = total
        self.enabled = enabled
        self.done = self.cached = self.retried = self.failed = 0
        self._stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._last = 0.0
        if enabled:
            try:
                tqdm: Any = importlib.import_module("tqdm").tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc="judge", unit="call", file=self._stream)

    def _counts(self) -> dict[str, int]:
        return {"cached": self.cached, "retried": self.retried, "failed": self.failed}

    def update(self, *, done: int = 0, cached: int = 0, retried: int = 0, failed: int = 0) -> None:
        self.done += done
        self.cached += cached
        self.retried += retried
        self.failed += failed
        if not self.enabled:
            return
        if self._bar is not None:
            if done:
                self._bar.update(done)
            self._bar.set_postfix(self._counts(), refresh=False)
            return
        now = time.monotonic()
        if now - self._last >= 0.5 or self.done == self.total:
            self._last = now
            counts = " ".join(f"{k} {v}" for k, v in self._counts().items())
            self._stream.write(f"\rjudge {self.done}/{self.total} | {counts}")
            self._stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix(self._counts())
            self._bar.close()
        else:
            self._stream.write("\n")
            self._stream.flush()
