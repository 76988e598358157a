"""A small RAG system over the shipped corpus (configs/data/corpus/), to evaluate a test set
that ``rag-judge synth`` wrote from the same corpus.

It cuts each document into paragraphs (not the 800-character windows synth graded: span
labels are mapped onto whatever chunks a system retrieves), ranks them by TF-IDF keyword
overlap with the question, and answers with the best paragraph's closest sentence. Each
context carries its document id and character offsets, so the dataset's span qrels grade it.


"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent.parent / "configs" / "data" / "corpus"
TOP_K = 5
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = (
    "a about an and are as at be by can do does for from how i if in is it its of on or our "
    "so that the their there this to was we what when where which who why will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


@functools.lru_cache(maxsize=1)
def paragraphs() -> list[dict[str, Any]]:
    """Every paragraph of every document, with its document id (the file's path under the
    corpus folder, without its suffix) and its character offsets in the file's text."""
    out = []
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix not in (".md", ".txt"):
            continue
        text = path.read_text(encoding="utf-8")
        doc_id = path.relative_to(CORPUS).with_suffix("").as_posix()
        for m in re.finditer(r"\S(?:.*?\S)?(?=\n\s*\n|\s*\Z)", text, flags=re.S):
            out.append({"id": f"{doc_id}@{m.start()}", "text": m.group(0), "doc_id": doc_id,
                        "start": m.start(), "end": m.end()})  # fmt: skip
    return out


@functools.lru_cache(maxsize=1)
def _idf() -> dict[str, float]:
    docs = [set(_words(p["text"])) for p in paragraphs()]
    counts: dict[str, int] = {}
    for words in docs:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    return {w: math.log(1 + len(docs) / n) for w, n in counts.items()}


def retrieve(question: str, k: int = TOP_K) -> list[dict[str, Any]]:
    """The ``k`` paragraphs whose words weigh most against the question's (ties: corpus
    order), each with its score."""
    asked = set(_words(question))
    idf = _idf()
    scored = []
    for i, p in enumerate(paragraphs()):
        score = sum(idf.get(w, 0.0) for w in asked & set(_words(p["text"])))
        if score > 0:
            scored.append((-score, i))
    scored.sort()
    return [{**paragraphs()[i], "score": round(-s, 6)} for s, i in scored[:k]]


def answer(question: str) -> dict[str, Any]:
    """The target: an answer and the contexts it was drawn from."""
    contexts = retrieve(question)
    if not contexts:
        return {"answer": "I could not find that in the documentation.", "contexts": []}
    asked = set(_words(question))
    sentences = re.split(r"(?<=[.!?])\s+", contexts[0]["text"])
    best = max(sentences, key=lambda s: len(asked & set(_words(s))))
    return {"answer": best, "contexts": contexts}


def chat(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The same system as a conversational target: a follow-up question (short, or the
    second of a conversation) is read with the question before it."""
    asked = [m["content"] for m in messages if m["role"] == "user"]
    question = asked[-1] if len(asked) == 1 else f"{asked[-2]} {asked[-1]}"
    found = answer(question)
    return {"answer": found["answer"], "contexts": found["contexts"]}
