"""Names of a package imported on first use (PEP 562), so that importing the package costs
nothing: ``rag-judge retrieval`` never pays for pydantic, the judge or the report."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str], space: dict[str, Any]
) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``homes`` maps each name to the module it
    lives in; a resolved name is stored in ``space`` (the package's globals), so later
    lookups skip the function."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        space[name] = value
        return value

    return __getattr__
