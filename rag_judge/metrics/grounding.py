"""Claim-level grounding, as pure functions: split an answer into sentence claims (the stub
judge's and the fallback's method), and score claims with verdicts and supporting contexts
against the retrieval ranking and the answer's citations.

A claim's verdict is ``supported``, ``contradicted`` or ``unsupported``; ``support`` names the
ranks (1-based) of the retrieved contexts that entail it and ``cited`` the ranks its citation
markers point at. Per answer:

- ``claim_support`` = supported / claims, ``claim_contradiction`` = contradicted / claims;
- ``support_rank`` = the best rank at which a context supporting any claim was retrieved (None
  when no claim is supported), which ties grounding to the retrieval metrics;
- ``context_utilisation`` = share of the retrieved contexts that support at least one claim;
- with citations (ALCE-style): ``citation_recall`` = claims one of whose cited contexts
  supports them / claims; ``citation_precision`` = citations pointing at a context that
  supports their claim / citations; ``misattributed`` = supported claims whose support comes
  only from contexts they do not cite.

An answer with no claims has no ratios (None), never a silent 0 or 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["Claim", "Grounding", "grounding", "split_claims"]

Verdict = Literal["supported", "contradicted", "unsupported"]

# A sentence ends at . ! ? (and closing quotes or brackets after it) followed by whitespace and
# a capital, a digit or an opening quote, or at the end; not after a known abbreviation, a
# single capital (an initial) or inside a number (3.5).
_ABBREVIATIONS = {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "inc", "ltd", "no"}
_END = re.compile(r"""[.!?]+["'”’)\]]*(?=\s+["'“‘(\[]?[A-Z0-9]|\s*$)""")


def split_claims(text: str) -> list[str]:
    """The sentences of ``text``, stripped, in order; blank text has none. Newlines separate
    claims too (list items, one claim per line)."""
    claims: list[str] = []
    for block in re.split(r"\n\s*", text):
        start = 0
        for match in _END.finditer(block):
            word = block[start : match.start()].rsplit(maxsplit=1)[-1:] or [""]
            last = word[0].lower().rstrip(".")
            if last in _ABBREVIATIONS or re.fullmatch(r"[A-Za-z]", last):
                continue
            claims.append(block[start : match.end()].strip())
            start = match.end()
        claims.append(block[start:].strip())
    return [c for c in claims if c]


@dataclass(frozen=True)
class Claim:
    text: str
    verdict: Verdict
    support: tuple[int, ...] = ()  # 1-based ranks of the contexts that entail the claim
    cited: tuple[int, ...] = ()  # 1-based ranks its citation markers point at


@dataclass(frozen=True)
class Grounding:
    claims: int
    claim_support: float | None
    claim_contradiction: float | None
    support_rank: int | None
    context_utilisation: float | None
    citation_recall: float | None = None
    citation_precision: float | None = None
    misattributed: int = 0
    citations: int = 0


def grounding(claims: Sequence[Claim], retrieved: int) -> Grounding:
    """The per-answer grounding metrics of ``claims`` over ``retrieved`` contexts."""
    n = len(claims)
    supported = [c for c in claims if c.verdict == "supported"]
    contradicted = sum(c.verdict == "contradicted" for c in claims)
    ranks = {r for c in supported for r in c.support if 1 <= r <= retrieved}
    citations = sum(len(c.cited) for c in claims)
    out = Grounding(
        claims=n,
        claim_support=len(supported) / n if n else None,
        claim_contradiction=contradicted / n if n else None,
        support_rank=min(ranks) if ranks else None,
        context_utilisation=len(ranks) / retrieved if retrieved else None,
        citations=citations,
    )
    if not citations:
        return out
    recalled = sum(c.verdict == "supported" and bool(set(c.cited) & set(c.support)) for c in claims)
    precise = sum(sum(r in c.support for r in c.cited) for c in claims if c.verdict == "supported")
    misattributed = [
        i
        for i, c in enumerate(claims)
        if c.verdict == "supported" and c.support and not set(c.cited) & set(c.support)
    ]
    return replace(
        out,
        citation_recall=recalled / n,
        citation_precision=precise / citations,
        misattributed=len(misattributed),
    )
