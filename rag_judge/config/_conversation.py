"""``conversation:``, how a conversational target is driven: the data layer's ``Drive``
settings and, for ``mode: simulate``, the simulated user's model (``user``, a judge client)."""

from __future__ import annotations

from pydantic import Field, model_validator

from rag_judge.data.dialogue import Drive
from rag_judge.llm.providers import ClientConfig

__all__ = ["ConversationConfig"]


class ConversationConfig(Drive):
    """``mode`` (``replay`` or ``simulate``), ``max_turns``, ``stop`` (a regular expression
    searched in each answer), ``input`` (``messages`` or ``turns``) and, for ``simulate``, the
    ``user``'s model (a client, as a judge's; default the stub user)."""

    user: ClientConfig = Field(default_factory=ClientConfig)

    @model_validator(mode="after")
    def _user_simulates(self) -> ConversationConfig:
        if "user" in self.model_fields_set and self.mode != "simulate":
            raise ValueError(
                f"'user' is the simulated user's model: mode {self.mode!r} has none "
                "(set mode: simulate, or leave 'user' out)"
            )
        return self
