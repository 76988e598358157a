"""Deterministic text rules that the grounding kernels, the grounding evaluator and the stub
judge share (a low layer, so ``llm`` and ``metrics`` can both read them):

- ``split_claims``: an answer's sentences, the stub's and the fallback's claim splitter;
  ``sentence_spans`` where they sit, and ``source_sentences``: which sentence each claim the
  judge wrote came from (a claim carries the citation markers of its source sentence);
- ``Citations``: citation markers (``[1]``, ``[d3]``, ``[1, 3]``) found by a regex and mapped
  to context ranks, by rank number, by context id, or either;
- ``is_abstention``: the rule that calls an answer a refusal to answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ABSTENTION_PHRASES",
    "DEFAULT_CITATION_PATTERN",
    "Citations",
    "claim_sentences",
    "is_abstention",
    "sentence_spans",
    "source_sentences",
    "split_claims",
    "states_something",
]

# A sentence ends at . ! ? (and closing quotes or brackets after it, and citation markers
# right after it: "month.[1]") followed by whitespace and a capital, a digit or an opening
# quote, or at the end; not after a known abbreviation, a single capital (an initial) or
# inside a number (3.5).
_ABBREVIATIONS = {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "inc", "ltd", "no"}
_END = re.compile(r"""[.!?]+["'”’)\]]*(?:\[[^\[\]\n]{1,40}\])*(?=\s+["'“‘(\[]?[A-Z0-9]|\s*$)""")


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


def states_something(sentence: str) -> bool:
    """Whether a sentence can be a claim: two words or more (a bare "Yes." or "Sure!" states
    nothing to check on its own)."""
    return len(re.findall(r"[^\W\d_]+", sentence)) >= 2


def claim_sentences(answer: str) -> list[str]:
    """The answer's sentences that can be claims (``states_something``)."""
    return [c for c in split_claims(answer) if states_something(c)]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where each sentence of ``split_claims(text)`` sits in ``text``: (start, end) offsets."""
    spans: list[tuple[int, int]] = []
    at = 0
    for sentence in split_claims(text):
        # a sentence is a stripped run of ``text``: it is found, at or after the last one
        start = text.find(sentence, at)
        spans.append((start, start + len(sentence)))
        at = start + len(sentence)
    return spans


def source_sentences(claims: Sequence[str], sentences: Sequence[str]) -> list[int | None]:
    """The 0-based index of the sentence each claim came from (None when there are no
    sentences). A judge rewrites claims (pronouns resolved, one sentence split in several), so
    the match is fuzzy: the sentence with the highest ``rapidfuzz.fuzz.partial_ratio`` to the
    claim, both lower-cased with punctuation (and so citation markers' brackets) dropped.
    Ties (a sentence repeated) go to the first tied sentence at or after the previous claim's
    (claims come in the answer's order) that no claim took yet, else the first at or after
    it, else the first."""
    from rapidfuzz import fuzz, utils  # imported when used: text.py is on light import paths

    targets = [utils.default_process(s) for s in sentences]
    out: list[int | None] = []
    previous = 0
    for claim in claims:
        if not targets:
            out.append(None)
            continue
        text = utils.default_process(claim)
        scores = [fuzz.partial_ratio(text, t) for t in targets]
        tied = [i for i, score in enumerate(scores) if score == max(scores)]
        later = [i for i in tied if i >= previous]
        pick = next((i for i in later if i not in out), (later or tied)[0])
        out.append(pick)
        previous = pick
    return out


# Group 1 holds one key or several separated by commas or semicolons: [1], [d3], [1, 3].
DEFAULT_CITATION_PATTERN = r"\[([A-Za-z0-9_.:#-]{1,24}(?:\s*[,;]\s*[A-Za-z0-9_.:#-]{1,24})*)\]"
RefersTo = Literal["auto", "rank", "id"]


@dataclass(frozen=True)
class Citations:
    """Citation markers: ``pattern``'s group 1 (or the whole match without groups) holds the
    keys, separated by commas or semicolons. A key names a context by its 1-based rank
    (``rank``), by its id (``id``), or (``auto``) by id when a context has that id, else by
    rank when it is a number in range. A key that names no retrieved context maps to rank 0:
    a citation pointing at nothing the system retrieved; each distinct such key is its own
    citation (``[1][5][6]`` over two contexts is three citations, two of them to nothing)."""

    pattern: str = DEFAULT_CITATION_PATTERN
    refers_to: RefersTo = "auto"

    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def keys(self, text: str) -> list[str]:
        """Every key of every marker in ``text``, in order."""
        out = []
        for match in self.regex().finditer(text):
            body = match.group(1) if match.re.groups else match.group(0)
            out += [k.strip() for k in re.split(r"[,;]", body or "") if k.strip()]
        return out

    def ranks(self, text: str, ids: Sequence[str | None]) -> tuple[int, ...]:
        """The 1-based context ranks the markers of ``text`` point at, in order of first
        citation: each retrieved context once, and a 0 for each distinct key that names
        nothing retrieved; ``ids`` are the retrieved contexts' ids."""
        by_id = {cid: r for r, cid in enumerate(ids, start=1) if cid is not None}
        out: list[int] = []
        seen: set[int | str] = set()  # ranks cited, and the keys that name nothing
        for key in self.keys(text):
            rank = 0
            if self.refers_to != "rank" and key in by_id:
                rank = by_id[key]
            elif self.refers_to != "id" and key.isdigit() and 1 <= int(key) <= len(ids):
                rank = int(key)
            once: int | str = rank or key
            if once not in seen:
                seen.add(once)
                out.append(rank)
        return tuple(out)

    def strip(self, text: str) -> str:
        """``text`` without its markers (the verifier judges the claim, not its citations)."""
        return re.sub(r"\s+([.,;:!?])", r"\1", self.regex().sub("", text)).strip()


# The answer declines: it says the material does not hold the answer, or that it cannot say.
ABSTENTION_PHRASES = (
    r"i (?:do not|don't|cannot|can't|am unable to) (?:know|answer|say|tell|find|determine)",
    r"(?:cannot|can't|unable to|not able to) (?:be )?(?:answer|determine|find|say|tell)",
    r"(?:no|not enough|insufficient) (?:information|details|data|context|evidence)",
    r"(?:do|does|did) not (?:contain|mention|say|state|specify|include|provide|cover|address)",
    r"(?:is|are) not (?:mentioned|stated|specified|covered|provided|available|given)",
    r"(?:could not|couldn't|did not|didn't) find",
    r"there is no (?:mention|answer|record)",
)
_ABSTAINS = re.compile(r"\b(?:" + "|".join(ABSTENTION_PHRASES) + r")\b", re.IGNORECASE)


def is_abstention(answer: str) -> bool:
    """Whether ``answer`` declines to answer: it is blank, or its first sentence says the
    material does not hold the answer (``ABSTENTION_PHRASES``). An answer that first states a
    fact and then hedges is an answer."""
    claims = split_claims(answer.replace("’", "'"))
    return not claims or _ABSTAINS.search(claims[0]) is not None
