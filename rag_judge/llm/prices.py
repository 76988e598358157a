"""What a judge model's tokens cost: the price table shipped with rag-judge, a user's own, and
the arithmetic that turns token counts into dollars.

The table (``prices.yaml`` beside this module) lists, per provider and model, the price of a
prompt token, of a prompt token the provider served from its prompt cache, and of a completion
token, per 1,000,000 tokens, with the Batch API's factor. It carries its date and source, since
prices change. A user's table of the same shape replaces it: a client's ``price_table: path``,
else the ``RAG_JUDGE_PRICES`` environment variable. A client's own ``*_price_per_1k`` keys win
over any table. docs/prices.md has a worked example.
"""

from __future__ import annotations

import datetime
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rag_judge.data.yaml_file import line_of, read_yaml
from rag_judge.errors import ConfigError, format_loc

__all__ = [
    "PRICES_ENV",
    "SHIPPED_TABLE",
    "Price",
    "PriceTable",
    "cost",
    "load_table",
    "price_for",
    "table_path",
]

PRICES_ENV = "RAG_JUDGE_PRICES"
SHIPPED_TABLE = Path(__file__).with_name("prices.yaml")
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # gpt-4o-mini-2024-07-18: a dated snapshot


class Price(BaseModel):
    """Dollars per ``per`` tokens. ``cached_input`` None: a cached prompt token costs as much
    as any other (a provider without a prompt-cache discount). ``batch`` multiplies every price
    for a request sent through the provider's Batch API (OpenAI's: 0.5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)
    batch: float = Field(default=1.0, gt=0, le=1)
    per: int = Field(default=1_000_000, gt=0)

    @classmethod
    def per_1k(cls, prompt: float | None, completion: float | None) -> Price:
        """A client's own ``prompt_price_per_1k`` / ``completion_price_per_1k`` (a missing one
        is free). Kept per 1,000 tokens so the cost is computed as it always was."""
        return cls(input=prompt or 0.0, output=completion or 0.0, per=1000)


class PriceTable(BaseModel):
    """A price table file: its date and source, and a ``Price`` per provider and model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(ge=1)
    date: str
    source: str
    providers: dict[str, dict[str, Price]]

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, value: Any) -> Any:
        # YAML reads an unquoted 2025-08-07 as a date.
        return value.isoformat() if isinstance(value, datetime.date) else value

    def price_for(self, provider: str, model: str) -> Price | None:
        """The price of ``model`` at ``provider``; a dated snapshot (``gpt-4o-2024-08-06``) not
        listed on its own takes its family's price. None when the table has neither."""
        models = self.providers.get(provider, {})
        return models.get(model) or models.get(_SNAPSHOT.sub("", model))


class _UsageLike(Protocol):
    prompt_tokens: int
    completion_tokens: int


def load_table(path: str | Path) -> PriceTable:
    """The table at ``path``; a problem is a ConfigError naming ``file:line: field``."""
    path = Path(path)
    data, root = read_yaml(path, "a price table", "no such price table file")
    try:
        return PriceTable.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            line = line_of(root, loc)
            where = f"{path}:{line}" if line else str(path)
            problems.append(f"{where}: {format_loc(loc) or 'the table'}: {error['msg']}")
        raise ConfigError("\n".join(problems)) from None


@functools.lru_cache(maxsize=8)
def _cached_table(path: str, mtime: float) -> PriceTable:
    return load_table(path)


def table_path(table: str | Path | None = None) -> Path:
    """The table in force: ``table`` if given, else ``$RAG_JUDGE_PRICES``, else the shipped."""
    chosen = table or os.environ.get(PRICES_ENV)
    return Path(chosen).expanduser() if chosen else SHIPPED_TABLE


def price_for(provider: str, model: str, *, table: str | Path | None = None) -> Price | None:
    """``model``'s price at ``provider`` in the table in force (see ``table_path``); a file is
    read once per change."""
    path = table_path(table)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = -1.0  # load_table then says what is wrong with it
    return _cached_table(str(path), mtime).price_for(provider, model)


def cost(usage: _UsageLike | Mapping[str, Any], price: Price, *, batch: bool = False) -> float:
    """Dollars for ``usage``'s tokens at ``price``: its ``cached_prompt_tokens`` (0 if it has
    none) at the cached price, the rest of its prompt tokens at the input price, its completion
    tokens at the output price; everything times ``price.batch`` when ``batch``."""
    if isinstance(usage, Mapping):
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        cached = usage.get("cached_prompt_tokens") or 0
    else:
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        cached = getattr(usage, "cached_prompt_tokens", 0) or 0
    cached = min(cached, prompt)  # a server cannot have cached more than it was sent
    cached_price = price.input if price.cached_input is None else price.cached_input
    total = (prompt - cached) * price.input + cached * cached_price + completion * price.output
    if batch:
        total *= price.batch
    return total / price.per
