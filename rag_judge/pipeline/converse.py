"""How the pipeline calls its target: once per question, or, with ``conversation:``, a turn at
a time through whole conversations (``rag_judge.data.dialogue``), with the simulated user that
``mode: simulate`` needs opened for the run and closed after it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from types import TracebackType

from rag_judge.config import ConversationConfig
from rag_judge.data.dialogue import drive_target_sync
from rag_judge.data.sample import Sample
from rag_judge.data.target import Target, TargetRun, run_target_sync
from rag_judge.judge.simulated_user import LLMUser
from rag_judge.report.model import Usage

__all__ = ["Driver"]


class Driver:
    """Calls ``target`` on chunks of samples as ``config`` says (None: one call per question).
    A context manager: the simulated user's engine lives inside the block."""

    def __init__(self, config: ConversationConfig | None, target: Target) -> None:
        self.config = config
        self.target = target
        self.user: LLMUser | None = None

    def __enter__(self) -> Driver:
        if self.config is not None and self.config.mode == "simulate":
            self.user = LLMUser.from_config(self.config.user, self.config.cache)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.user is not None:
            self.user.close()
            self.user = None

    def usage(self) -> Usage:
        """What the simulated user's calls cost so far (nothing without one)."""
        return self.user.engine.usage.model_copy() if self.user is not None else Usage()

    def options(self) -> dict[str, str]:
        """The signature options of ``latency_s`` that say how the target was driven; none
        without ``conversation:``, so such a run's signature is as before."""
        cfg = self.config
        if cfg is None:
            return {}
        out = {
            "conversation": cfg.mode,
            "max_turns": str(cfg.max_turns),
            "stop": _signed_pattern(cfg.stop),
            "input": cfg.input,
        }
        if self.user is not None:
            out["user"] = self.user.name
        return out | {"latency": "turns-summed"}

    def run(
        self, samples: Sequence[Sample], *, concurrency: int, timeout: float | None
    ) -> TargetRun:
        if self.config is None:
            return run_target_sync(self.target, samples, concurrency=concurrency, timeout=timeout)
        return drive_target_sync(
            self.target,
            samples,
            self.config,
            user=self.user,
            concurrency=concurrency,
            timeout=timeout,
        )


def _signed_pattern(stop: str | None) -> str:
    """The stop pattern as a signature option: as written, or, when it holds a character that
    the signature's text reserves (``|``, a bracket), its hash, so that the signature still
    parses."""
    if stop is None:
        return "none"
    if not any(c in stop for c in "|[]"):
        return stop
    return "sha256-" + hashlib.sha256(stop.encode()).hexdigest()[:12]
