"""A deterministic conversational support agent over the agent demo's knowledge base, to show
what a conversational target is (``conversation:`` in a config).

It is called once per turn with the conversation so far, a list of ``{"role", "content"}``
messages ending with the user's, and returns the turn: one retrieval step (keyword overlap
with the user's message, topped up with the previous user message's words when the message is
short, as a follow-up is) and, as the answer, the top chunk's closest sentence. A message that
names an organization (``org_4821``) first gets an ``account_lookup`` tool call for the first
one it names, and the answer opens with the account's plan. Use it as

    target: ../examples/support_agent.py:chat
    conversation: {mode: replay}          # or {mode: simulate} with goals
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent.parent / "configs" / "data" / "agent_demo.jsonl"
TOP_K = 3
_STOPWORD_TEXT = (
    "a about also an and are as at be by can do does for from how i if in is it me my of on or "
    "our so that the there this to us we what when where which who why will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


@functools.lru_cache(maxsize=1)
def corpus() -> dict[str, str]:
    """Doc id -> text of every context the agent demo's samples retrieved (the first wins)."""
    docs: dict[str, str] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        steps = [s for t in sample.get("turns", []) for s in t.get("steps", [])]
        for ctx in [c for s in steps for c in s.get("contexts", [])] + sample.get("contexts", []):
            docs.setdefault(ctx["id"], ctx["text"])
    return docs


def retrieve(query: str, k: int = TOP_K) -> list[dict[str, Any]]:
    """The k chunks sharing the most keywords with the query (ties: shorter, then smaller id)."""
    asked = _words(query)
    scored = []
    for doc_id, text in corpus().items():
        shared = len(asked & _words(text))
        if shared:
            scored.append((-shared, len(text), doc_id, shared / len(asked)))
    scored.sort()
    return [{"id": d, "text": corpus()[d], "score": s} for _, _, d, s in scored[:k]]


# The accounts the lookup tool knows.
ACCOUNTS = {
    "org_1100": {"plan": "Starter", "seats": 4},
    "org_2200": {"plan": "Team", "seats": 18},
    "org_4821": {"plan": "Team", "seats": 25, "changed": "upgraded from Starter on 12 March"},
}


def account_lookup(org: str) -> dict[str, Any]:
    """The tool: an organization's account, or an error record."""
    return {"org": org, **ACCOUNTS.get(org, {"error": "no such organization"})}


def chat(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The conversational target: the next assistant turn for the conversation so far."""
    asked = [m["content"] for m in messages if m["role"] == "user"]
    query = asked[-1]
    if len(_words(query)) < 4 and len(asked) > 1:  # a short follow-up leans on the last question
        query = f"{asked[-2]} {query}"
    steps: list[dict[str, Any]] = []
    opening = ""
    orgs = re.findall(r"\borg_\d+\b", asked[-1])
    if orgs:  # the first organization named, as a hurried agent reads it
        account = account_lookup(orgs[0])
        steps.append({"tool": "account_lookup", "arguments": {"org": orgs[0]}, "result": account})
        opening = f"{orgs[0]} is on the {account.get('plan', 'unknown')} plan. "
    contexts = retrieve(query)
    steps.append({"query": query, "contexts": contexts})
    if not contexts:
        return {"answer": opening + "I could not find anything about that.", "steps": steps}
    words = _words(query)
    sentences = re.split(r"(?<=[.!?])\s+", contexts[0]["text"])
    best = max(sentences, key=lambda s: len(words & _words(s)))  # first of the best on ties
    return {"answer": opening + best, "steps": steps}
