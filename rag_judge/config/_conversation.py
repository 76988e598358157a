"""``conversation:``, how a conversational target is driven: the data layer's ``Drive``
settings and, for ``mode: simulate``, the simulated user's model (``user``, a judge client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from rag_judge.data.dialogue import Drive
from rag_judge.judge.settings import local_cache
from rag_judge.llm.cache import CacheOption
from rag_judge.llm.providers import ClientConfig

__all__ = ["ConversationConfig"]


class ConversationConfig(Drive):
    """``mode`` (``replay`` or ``simulate``), ``max_turns``, ``stop`` (a regular expression
    searched in each answer), ``input`` (``messages`` or ``turns``) and, for ``simulate``, the
    ``user``'s model (a client, as a judge's; default the stub user) and its ``cache`` (a
    SQLite file of its replies, as a judge's; ``default`` the judge cache every config shares;
    None, the default: none), so that a rerun meets the same user."""

    user: ClientConfig = Field(default_factory=ClientConfig)
    cache: CacheOption = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _user_simulates(self) -> ConversationConfig:
        for key, what in (("user", "model"), ("cache", "cache")):
            if key in self.model_fields_set and self.mode != "simulate":
                raise ValueError(
                    f"'{key}' is the simulated user's {what}: mode {self.mode!r} has none "
                    f"(set mode: simulate, or leave '{key}' out)"
                )
        return self

    @staticmethod
    def resolve_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """The cache file named in a config is relative to its folder, as a judge's."""
        local_cache(raw, base)
        return raw
