"""Forcing every model client of a config to the offline stub, so that a test needs no key.

The switch is a context variable: the pytest marker turns it on around one test (its
fixtures included), and :func:`stub_judges` does so from plain code. The config rewrite
imports the config models only when it runs, so the plugin costs nothing at collection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_judge.config import ExperimentConfig

__all__ = ["forced", "stub_judges", "with_stub_judges"]

_FORCED: ContextVar[bool] = ContextVar("rag_judge_stub", default=False)


def forced() -> bool:
    """Whether configs evaluated now have their model clients forced to the stub."""
    return _FORCED.get()


@contextlib.contextmanager
def stub_judges(on: bool = True) -> Iterator[None]:
    """Within the block, :func:`rag_judge.testing.evaluate` runs every judge on the stub."""
    token = _FORCED.set(on)
    try:
        yield
    finally:
        _FORCED.reset(token)


def with_stub_judges(config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with every model client on the stub provider: each judge, each juror of a
    jury and a conversation's simulated user. When a client moved, the config's completion
    caches are turned off, so a test writes no cache file. A config whose clients are all on
    the stub is returned as it is (and shares its cached run)."""
    from rag_judge.config import ConversationConfig
    from rag_judge.config._walk import replaced
    from rag_judge.judge.settings import Judge
    from rag_judge.llm.providers import ClientConfig

    def stub(value: Any) -> Any:
        if isinstance(value, ClientConfig) and value.provider != "stub":
            # The stub's own options are kept: a config may ask for a fixed score.
            return ClientConfig(provider="stub", stub=value.stub, stub_score=value.stub_score)
        return value

    def uncached(value: Any) -> Any:
        if isinstance(value, Judge | ConversationConfig) and value.cache is not None:
            return value.model_copy(update={"cache": None})
        return value

    moved: ExperimentConfig = replaced(config, stub)  # a model is rebuilt as its own class
    if moved is config:
        return config
    result: ExperimentConfig = replaced(moved, uncached)
    return result
