"""Which items to ask for: how many of each kind, in which order, and their seed chunks,
stratified over documents. Pure and seeded: one seed gives one plan. docs/synth.md, "The
plan", says the rules."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rag_judge.synth.asks import KINDS, SEEDS, Kind
from rag_judge.synth.corpus import Chunk
from rag_judge.synth.pool import BM25Pool

__all__ = ["Planned", "kind_counts", "plan_items"]

# Each item's request seed: the run's seed and the item's place, so that two items never
# share one and a run's items do not change when ``questions`` grows.
_SEED_STRIDE = 1_000_003


@dataclass(frozen=True)
class Planned:
    """One item to ask for: its place in the plan, its kind, its seed chunks (indices into the
    corpus's chunks) and its request seed."""

    index: int
    kind: Kind
    seeds: tuple[int, ...]
    seed: int


def kind_counts(total: int, mix: Mapping[Kind, float]) -> dict[Kind, int]:
    """``total`` split over the kinds by their shares, by the largest remainder (ties in the
    order of ``KINDS``): the counts add up to ``total``."""
    weight = sum(mix.values())
    exact = {k: total * mix.get(k, 0.0) / weight for k in KINDS}
    counts = {k: math.floor(v) for k, v in exact.items()}
    left = total - sum(counts.values())
    by_remainder = sorted(KINDS, key=lambda k: (-(exact[k] - counts[k]), KINDS.index(k)))
    for k in by_remainder[:left]:
        counts[k] += 1
    return {k: n for k, n in counts.items() if n}


def plan_items(
    chunks: Sequence[Chunk], total: int, mix: Mapping[Kind, float], seed: int, pool: BM25Pool
) -> list[Planned]:
    """``total`` items: the kinds' counts in a seeded shuffled order, each with its seeds."""
    rng = np.random.default_rng(seed)
    counts = kind_counts(total, mix)
    kinds = [k for k in KINDS for _ in range(counts.get(k, 0))]
    order = [kinds[i] for i in rng.permutation(len(kinds))]
    draw = _Stratified(chunks, rng)
    out = []
    for index, kind in enumerate(order):
        first = draw.next()
        seeds = [first]
        if SEEDS[kind] > 1:
            partner = _partner(kind, first, chunks, pool, draw)
            if partner == first:  # a one-chunk corpus: a two-chunk question cannot be asked
                kind = "factual"
            else:
                seeds.append(partner)
        out.append(Planned(index, kind, tuple(seeds), seed * _SEED_STRIDE + index))
    return out


class _Stratified:
    """Seed chunks stratified over documents: the documents in a seeded order, one chunk of
    each in turn, each document's chunks in a seeded order; a document whose chunks are all
    used is passed over, and once every chunk is used the draw starts again."""

    def __init__(self, chunks: Sequence[Chunk], rng: np.random.Generator) -> None:
        docs: dict[str, list[int]] = {}
        for i, c in enumerate(chunks):
            docs.setdefault(c.doc_id, []).append(i)
        names = sorted(docs)
        self.docs = [docs[names[i]] for i in rng.permutation(len(names))]
        self.rng = rng
        self.queues: list[list[int]] = []
        self.turn = 0
        self._refill()

    def _refill(self) -> None:
        self.queues = [[d[i] for i in self.rng.permutation(len(d))] for d in self.docs]

    def next(self) -> int:
        if not any(self.queues):
            self._refill()
        while not self.queues[self.turn % len(self.queues)]:
            self.turn += 1
        queue = self.queues[self.turn % len(self.queues)]
        self.turn += 1
        return queue.pop(0)


def _partner(
    kind: Kind, first: int, chunks: Sequence[Chunk], pool: BM25Pool, draw: _Stratified
) -> int:
    """The second seed: the first seed's closest BM25 neighbour (for a comparison, in another
    document), so that the two chunks share a subject; the next stratified draw when there is
    none."""
    for index, _ in pool.search(chunks[first].text, len(chunks)):
        if index == first:
            continue
        if kind == "comparison" and chunks[index].doc_id == chunks[first].doc_id:
            continue
        return index
    other = draw.next()
    return other if other != first else draw.next()
