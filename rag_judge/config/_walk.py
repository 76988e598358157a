"""A config with a change applied to its parts (a model's fields, a list's items), rebuilt
only where something changed: the stub switch of ``rag_judge.testing`` and the sequential
run's cache both rewrite clients and caches this way, without naming evaluator types."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

__all__ = ["replaced"]


def replaced(value: Any, change: Callable[[Any], Any]) -> Any:
    """``value`` with ``change`` applied to it, else to each part of it (the fields of a
    model, the items of a list or tuple); the same object when nothing changed."""
    new = change(value)
    if new is not value:
        return new
    if isinstance(value, tuple | list):
        items = [replaced(v, change) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if not isinstance(value, BaseModel):
        return value
    updates = {}
    for name in type(value).model_fields:
        old = getattr(value, name)
        part = replaced(old, change)
        if part is not old:
            updates[name] = part
    # No validation again: the copy differs only in the parts changed, each valid alone.
    return value.model_copy(update=updates) if updates else value
