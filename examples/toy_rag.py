"""A deterministic toy RAG system over the demo corpus, to show what a rag-judge target is.

Retrieval ranks every chunk found in configs/data/demo.jsonl by keyword overlap with the
question; the answer is the best-matching sentence of the top chunk. Use it as

    target: ../examples/toy_rag.py:answer      # in a config next to configs/demo.yaml

or from Python (``aanswer`` is the same system as a coroutine)::

    from rag_judge.data.target import resolve_target, run_target_sync
    run_target_sync(resolve_target("examples/toy_rag.py:aanswer"), samples)
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.jsonl"
TOP_K = 4
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "my",
        "of",
        "on",
        "or",
        "the",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    }
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


@functools.lru_cache(maxsize=1)
def corpus() -> dict[str, str]:
    """Doc id -> text of every context in the demo dataset (the first text wins)."""
    docs: dict[str, str] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            for ctx in json.loads(line).get("contexts", []):
                docs.setdefault(ctx["id"], ctx["text"])
    return docs


def retrieve(question: str, k: int = TOP_K) -> list[dict[str, Any]]:
    """The k chunks sharing the most keywords with the question, score = shared / asked;
    ties go to the shorter chunk, then the smaller doc id, so the ranking is deterministic."""
    asked = _words(question)
    scored = []
    for doc_id, text in corpus().items():
        shared = len(asked & _words(text))
        if shared:
            scored.append((-shared, len(text), doc_id, shared / len(asked)))
    scored.sort()
    return [{"id": d, "text": corpus()[d], "score": s} for _, _, d, s in scored[:k]]


def answer(question: str) -> dict[str, Any]:
    """The target: the ranked contexts and, as the answer, the top chunk's closest sentence."""
    contexts = retrieve(question)
    if not contexts:
        return {"answer": "I don't know.", "contexts": []}
    asked = _words(question)
    sentences = re.split(r"(?<=[.!?])\s+", contexts[0]["text"])
    best = max(sentences, key=lambda s: len(asked & _words(s)))  # first of the best on ties
    return {"answer": best, "contexts": contexts}


async def aanswer(question: str) -> dict[str, Any]:
    """The same target as a coroutine, as an async RAG service would expose it."""
    await asyncio.sleep(0)  # yield to the loop, as a network call would
    return answer(question)
