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
- with citations, ``any`` mode (per claim, looser than ALCE): ``citation_recall`` = claims
  one of whose cited contexts supports them on its own / claims; ``citation_precision`` =
  citations pointing at a context that supports their claim / citations;
  ``misattributed`` = supported claims whose support comes only from contexts they do not
  cite. A cited rank of 0 is a citation that points at no retrieved context: it counts, and
  supports nothing.

:func:`alce_citations` is ALCE's definition (Gao et al. 2023), per answer *sentence*
(``Statement``): recalled when it cites, every marker names a retrieved context, and the cited
contexts *jointly* entail it; a citation is precise when its statement is recalled and the
citation is not irrelevant (irrelevant: it alone does not entail the statement and the other
citations entail it without it).

An answer with no claims has no ratios (None), never a silent 0 or 1.

The splitter lives in :mod:`rag_judge.text` (the stub judge uses it too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from rag_judge.text import split_claims

__all__ = [
    "Claim",
    "Grounding",
    "Statement",
    "Verdict",
    "alce_citations",
    "grounding",
    "split_claims",
]

Verdict = Literal["supported", "contradicted", "unsupported"]


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


def grounding(
    claims: Sequence[Claim], retrieved: int, *, require_citations: bool = False
) -> Grounding:
    """The per-answer grounding metrics of ``claims`` over ``retrieved`` contexts. An answer
    without a citation has no citation metrics, unless ``require_citations``: then its recall
    is 0 (ALCE: an uncited claim is not recalled), every supported claim is misattributed,
    and precision stays None (no citation to be precise)."""
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
    if not citations and not require_citations:
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
        citation_recall=recalled / n if n else None,
        citation_precision=precise / citations if citations else None,
        misattributed=len(misattributed),
    )


@dataclass(frozen=True)
class Statement:
    """One answer sentence in ALCE's citation check: the ranks its markers point at (0: a
    marker naming nothing retrieved), whether the cited contexts jointly entail it (None: not
    asked, as for a sentence without markers or with a marker naming nothing), and the cited
    ranks that entail it ``alone`` and those ``without`` which the other cited contexts still
    entail it (asked only of a sentence with two citations or more)."""

    cited: tuple[int, ...] = ()
    entailed: bool | None = None
    alone: tuple[int, ...] = ()
    without: tuple[int, ...] = ()

    @property
    def checkable(self) -> bool:
        """Whether the judge is asked about it: it cites, and only retrieved contexts."""
        return bool(self.cited) and 0 not in self.cited


def alce_citations(
    statements: Sequence[Statement], *, require_citations: bool = False
) -> tuple[float | None, float | None]:
    """ALCE's citation recall and precision of one answer's ``statements`` (its sentences).

    Recall = statements that cite, name only retrieved contexts and are jointly entailed by
    them / statements. Precision = precise citations / citations of the statements whose
    markers all name retrieved contexts (ALCE's code leaves the citations of a statement with
    an out-of-range marker out of both counts); a recalled statement's only citation is
    precise, and of several, each one that is not irrelevant. An answer without a citation has
    neither (None, None), unless ``require_citations``: recall 0 (no statement is recalled),
    precision None (no citation to be precise)."""
    if not any(s.cited for s in statements) and not require_citations:
        return None, None
    n = len(statements)
    checked = [s for s in statements if s.checkable]
    recalled = sum(bool(s.entailed) for s in checked)
    total = sum(len(s.cited) for s in checked)
    precise = 0
    for s in checked:
        if not s.entailed:
            continue
        if len(s.cited) == 1:
            precise += 1
            continue
        irrelevant = [r for r in s.cited if r not in s.alone and r in s.without]
        precise += len(s.cited) - len(irrelevant)
    return (recalled / n if n else None), (precise / total if total else None)
