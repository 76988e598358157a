"""The shipped ``_sections.j2`` macros as Python, for the templates that import it: the same
text for the arguments the shipped templates pass (strings, and context records of a rank and a
text), each macro's own Jinja code for any other call.

Only the packaged file, unchanged, is replaced: its SHA-256 is pinned here, so an edited copy
(in a user's prompt folder or the package) renders through Jinja. A test renders every shipped
rubric both ways and compares the text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from rag_judge.llm.sections import section

__all__ = ["FAST_MACROS", "SECTIONS", "SECTIONS_SHA256", "FastSections", "replaces"]

SECTIONS = "_sections.j2"
SECTIONS_SHA256 = "139a32b6345ae25faf353de9b01a901dd369ac3b102493d69778bb89a9a9ad9f"
Macro = Callable[..., Any]
FAST_MACROS = frozenset(
    ("question_section", "answer_section", "context_sections", "reference_sections")
)


def replaces(source: str) -> bool:
    """Whether ``source`` is the shipped ``_sections.j2`` these functions stand for."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest() == SECTIONS_SHA256


def _context(c: object) -> bool:
    return type(c) is dict and type(c.get("rank")) is int and type(c.get("text")) is str


class FastSections:
    """An imported ``_sections.j2`` (``s``): its four macros, each falling back to the Jinja
    macro (``module``'s) for a call the Python does not stand for."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def question_section(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == 1 and type(args[0]) is str:
            return section("QUESTION", args[0])
        return self._module.question_section(*args, **kwargs)

    def answer_section(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == 1 and type(args[0]) is str:
            return section("ANSWER", args[0])
        return self._module.answer_section(*args, **kwargs)

    def context_sections(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == 1 and type(args[0]) is list and all(map(_context, args[0])):
            return "\n\n".join(section(f"CONTEXT {c['rank']}", c["text"]) for c in args[0])
        return self._module.context_sections(*args, **kwargs)

    def reference_sections(self, *args: Any, **kwargs: Any) -> Any:
        texts = args[0] if len(args) == 1 else None
        if not kwargs and type(texts) is list and all(type(r) is str for r in texts):
            return "\n\n".join(section(f"REFERENCE {i}", r) for i, r in enumerate(texts, 1))
        return self._module.reference_sections(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Anything else the module holds, as Jinja has it; a name it lacks is an
        # AttributeError, which the sandbox turns into an undefined value as for the module.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._module, name)
