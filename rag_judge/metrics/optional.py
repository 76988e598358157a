"""The libraries a metric imports when it is first used (sacrebleu, nltk's stemmer).

They are dependencies of rag-judge, imported late so that a run without these metrics does not
pay for them. A missing one raises an ImportError that says how to get it back.
"""

from __future__ import annotations

from typing import Any

__all__ = ["require"]

_MISSING_HINT = "it is a dependency of rag-judge: reinstall it (pip install rag-judge)"


def require(module: str) -> Any:
    """``module`` imported (a dotted name), or an ImportError naming it and the fix."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise ImportError(f"{module} is needed for this metric: {_MISSING_HINT}") from exc
