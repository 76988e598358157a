"""What ``rag-judge synth`` would ask, spending nothing (``--dry-run``).

The question requests are rendered exactly. A grade or closed-book request shows a question the
judge has not written yet: each is estimated with a stand-in of its seed chunk's first words,
and a pool as deep as the config's (seeds, BM25 neighbours of the seed text, dense ones), so
the grade count is an upper bound of what the run asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_judge.llm.base import LLMClient
from rag_judge.synth.asks import SynthAsk
from rag_judge.synth.corpus import read_corpus
from rag_judge.synth.plan import plan_items
from rag_judge.synth.pool import BM25Pool
from rag_judge.synth.settings import SynthConfig

__all__ = ["StageEstimate", "estimate"]

_STAND_IN_WORDS = 15  # a question's length, about


@dataclass(frozen=True)
class StageEstimate:
    """One stage's requests: how many are not cached, how many are, their tokens and cost;
    ``exact`` when the requests themselves were rendered, else estimated."""

    stage: str
    requests: int
    cache_hits: int
    prompt_tokens_estimate: int
    completion_tokens_max: int
    cost_estimate: float | None
    exact: bool


def estimate(
    corpus: str | Path, config: SynthConfig, *, client: LLMClient | None = None
) -> list[StageEstimate]:
    """The questions, grades and closed-book requests of a run of ``config`` on ``corpus``."""
    chunks = read_corpus(Path(corpus), config.chunking).chunks
    pool = BM25Pool(chunks)
    planned = plan_items(chunks, config.planned(), config.kinds, config.seed, pool)
    session = config.judge.open(client)
    ask = SynthAsk(session)
    questions = [
        ask.question_request(p.kind, [chunks[i] for i in p.seeds], p.seed) for p in planned
    ]
    grades, books = [], []
    depth = config.pool_depth + (config.dense_depth if config.dense else 0)
    for p in planned:
        first = chunks[p.seeds[0]]
        stand_in = " ".join(first.text.split()[:_STAND_IN_WORDS]) + "?"
        turns = 2 if p.kind == "conversational" else 1
        graded = list(p.seeds) + [i for i, _ in pool.search(first.text, depth + len(p.seeds))]
        graded = list(dict.fromkeys(graded))[: depth + len(p.seeds)]
        grades += [ask.grade_request(stand_in, chunks[i]) for i in graded] * turns
        if p.kind != "unanswerable":
            books.append(ask.closed_book_request(stand_in))
    out = []
    for stage, requests, exact in (
        ("questions", questions, True),
        ("grades", grades, False),
        ("closed book", books, False),
    ):
        found: dict[str, Any] = session.estimate(requests)
        out.append(
            StageEstimate(
                stage=stage,
                requests=int(found["requests"]),
                cache_hits=int(found["cache_hits"]),
                prompt_tokens_estimate=int(found["prompt_tokens_estimate"]),
                completion_tokens_max=int(found["completion_tokens_max"]),
                cost_estimate=found.get("cost_estimate"),
                exact=exact,
            )
        )
    return out
