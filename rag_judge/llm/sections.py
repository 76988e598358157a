"""The one grammar of delimited prompt sections, written and read here.

A judge prompt places untrusted text (questions, answers, contexts, references) only inside
sections rendered exactly as ``<<<BEGIN NAME>>>\\n...\\n<<<END NAME>>>``, where NAME is
upper-case letters, digits and spaces, starting with a letter (``QUESTION``, ``CONTEXT 2``,
``ANSWER 1 CONTEXT 3``, ``EXAMPLE 1 ANSWER``). Before that, every run of three or more angle
brackets in the data is rewritten to look-alike guillemets (``‹‹‹``, ``›››``), so no data can
open or close a section: the only ``<<<`` in a prompt is the template's own.

The judge's templates write sections (``rag_judge.judge.prompts`` registers ``section``); the
stub judge and tests read them back with ``parse_sections``. Both live in this module, the
lower layer, so the grammar is written once.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SECTION_NAME", "neutralise", "parse_sections", "section"]

_NAME = r"[A-Z][A-Z0-9 ]{0,63}"
SECTION_NAME = re.compile(_NAME)
# The body ends at the matching END line; the newline before it is the writer's.
_SECTION = re.compile(r"<<<BEGIN (" + _NAME + r")>>>\n(.*?)\n?<<<END \1>>>", re.DOTALL)
_BEGIN = "<<<BEGIN "
_NAME_AFTER_BEGIN = re.compile("(" + _NAME + ")>>>\n")
# '<' and '>' and their full-width and small-form look-alikes.
_OPEN_RUN = re.compile("[<\uff1c\ufe64]{3,}")
_CLOSE_RUN = re.compile("[>\uff1e\ufe65]{3,}")


def neutralise(text: str) -> str:
    """Rewrite every run of 3+ angle brackets so data can never open or close a section."""
    # ASCII text has no look-alikes: a run of three is then "<<<" or ">>>" (the usual case,
    # found at C speed, leaves the text as it is).
    if text.isascii() and "<<<" not in text and ">>>" not in text:
        return text
    text = _OPEN_RUN.sub(lambda m: "\u2039" * len(m.group()), text)
    return _CLOSE_RUN.sub(lambda m: "\u203a" * len(m.group()), text)


def section(name: str, text: Any) -> str:
    """One delimited section: ``name`` from the template, ``text`` from the data (neutralised).
    Raises ValueError for a name outside the grammar."""
    if not isinstance(name, str) or not SECTION_NAME.fullmatch(name):
        raise ValueError(f"section name {name!r} must be upper-case letters, digits and spaces")
    return f"<<<BEGIN {name}>>>\n{neutralise(str(text))}\n<<<END {name}>>>"


def parse_sections(prompt: str) -> dict[str, str]:
    """The sections of a rendered prompt, by name (``ANSWER``, ``CONTEXT 1``, ...): what
    ``_SECTION.findall`` finds, a later section of a name replacing an earlier one."""
    # The same matches as the regular expression, found with str.find: the lazy body made the
    # expression try every end position, the stub judge's largest cost on long prompts.
    out: dict[str, str] = {}
    at = prompt.find(_BEGIN)
    while at >= 0:
        name = _NAME_AFTER_BEGIN.match(prompt, at + len(_BEGIN))
        if name is None:
            at = prompt.find(_BEGIN, at + 1)
            continue
        body = name.end()
        end = prompt.find(f"<<<END {name.group(1)}>>>", body)
        if end < 0:
            at = prompt.find(_BEGIN, at + 1)
            continue
        # The body's last newline is the writer's (``\n?`` before the END line).
        stop = end - 1 if end > body and prompt[end - 1] == "\n" else end
        out[name.group(1)] = prompt[body:stop]
        at = prompt.find(_BEGIN, end + len(name.group(1)) + 10)
    return out
