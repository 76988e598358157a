"""Relevance labels mapped onto retrieved chunks, at chunk or document level.

A sample's ``qrels`` label whole documents or character spans of them; its contexts say which
document and which characters each chunk holds. Labels are mapped at run time, so re-chunking
an index does not make them stale:

* **chunk level**: a chunk earns a label when it overlaps the label's span by the rule's
  ``min_chars`` characters and by ``min_share`` of the shorter of the two (a document label
  covers the whole document, so every chunk of it overlaps). Each label is one judged unit and
  is credited once, to the highest-ranked chunk that earns it: a chunk's grade is the best
  grade among the labels it newly earns, and a chunk repeating labels already credited (or
  overlapping none) is judged non-relevant. A chunk that newly earns several labels is one
  ranked item with that best grade (precision, MRR, nDCG's gain), and every label it earns
  counts as found (``Graded.extra``): recall is labels earned / labels, so a ranking that
  finds every label has recall 1 however the spans fall into chunks. Both stay within
  [0, 1]: the ideal ranking is the labels' grades, one per rank, and taking the best grade
  (not the sum) keeps a chunk's gain within what the ideal gives its label.
* **document level**: the ranking is each document at its first occurrence (trec_eval's view
  of a run); a document's grade is its best label.

A chunk counts as judged (``judged@k``) when its document carries any label. Samples without
``qrels`` keep their own judgments (``relevance`` by context id, or a context's ``relevance``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rag_judge.data.sample import Context, Qrel, Sample

__all__ = ["LEVELS", "Graded", "OverlapRule", "graded"]

Level = Literal["chunk", "document"]
LEVELS: tuple[Level, ...] = ("chunk", "document")


class OverlapRule(BaseModel):
    """When a chunk earns a span's label: at least ``min_chars`` characters in common and at
    least ``min_share`` of the shorter of the two (0 = any share)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_chars: int = Field(default=1, ge=1)
    min_share: float = Field(default=0.0, ge=0.0, le=1.0)

    def render(self) -> str:
        """The rule as a signature writes it: ``overlap>=1c`` or ``overlap>=20c&0.5``."""
        share = f"&{self.min_share:g}" if self.min_share else ""
        return f"overlap>={self.min_chars}c{share}"

    def earns(self, ctx: Context, label: Qrel) -> bool:
        if ctx.doc_id != label.doc_id:
            return False
        if label.start is None or label.end is None:
            return True  # a document label covers every chunk of the document
        if ctx.start is None or ctx.end is None:
            return False  # a chunk of unknown extent cannot be placed in the span
        common = min(ctx.end, label.end) - max(ctx.start, label.start)
        shorter = min(ctx.end - ctx.start, label.end - label.start)
        return common >= self.min_chars and common >= self.min_share * shorter


@dataclass(frozen=True)
class Graded:
    """One query as the retrieval kernels read it: the ranked grades, whether each ranked item
    carries a judgment, and every judged grade (the ideal ranking's material)."""

    ranked: list[float]
    known: list[bool]
    ideal: list[float]
    # (rank index, grade) of each label a chunk earns beyond the one whose grade it carries
    extra: list[tuple[int, float]] = field(default_factory=list)


def graded(sample: Sample, level: Level = "chunk", rule: OverlapRule | None = None) -> Graded:
    """The sample's ranking graded at ``level``; ``rule`` maps span labels onto chunks."""
    if sample.qrels is not None:
        if level == "document":
            return _documents(sample.contexts, _best_by_doc(sample.qrels))
        return _chunks(sample.contexts, sample.qrels, rule or OverlapRule())
    if level == "document":
        return _documents(sample.contexts, _own_by_doc(sample))
    table = sample.relevance or {}
    known = [
        c.relevance is not None or (c.id is not None and c.id in table) for c in sample.contexts
    ]
    return Graded(sample.ranked_grades(), known, sample.ideal_grades())


def _chunks(contexts: Sequence[Context], qrels: Sequence[Qrel], rule: OverlapRule) -> Graded:
    labelled = {q.doc_id for q in qrels}
    credited: set[int] = set()
    ranked: list[float] = []
    known: list[bool] = []
    extra: list[tuple[int, float]] = []
    ideal = [q.relevance for q in qrels]
    for rank, ctx in enumerate(contexts):
        earned = [i for i, q in enumerate(qrels) if i not in credited and rule.earns(ctx, q)]
        positive = sorted(qrels[i].relevance for i in earned if qrels[i].relevance > 0)
        credited.update(i for i in earned if qrels[i].relevance > 0)
        is_known = ctx.doc_id in labelled
        ranked.append(positive[-1] if positive else 0.0)
        extra += [(rank, grade) for grade in positive[:-1]]  # found too, beside the best
        known.append(is_known)
        if is_known and not positive:
            ideal.append(0.0)  # judged non-relevant by its document's labels (bpref counts it)
    return Graded(ranked, known, ideal, extra)


def _best_by_doc(qrels: Sequence[Qrel]) -> dict[str, float]:
    best: dict[str, float] = {}
    for q in qrels:
        best[q.doc_id] = max(best.get(q.doc_id, q.relevance), q.relevance)
    return best


def _own_by_doc(sample: Sample) -> dict[str, float]:
    """Document grades from a sample without qrels: its ``relevance`` table (keyed by document
    id) and, for documents it does not name, the best grade their chunks carry."""
    table = dict(sample.relevance or {})
    own: dict[str, float] = {}
    for ctx in sample.contexts:
        doc = _doc_of(ctx)
        if ctx.relevance is not None and doc is not None and doc not in table:
            own[doc] = max(own.get(doc, ctx.relevance), ctx.relevance)
    return table | own


def _doc_of(ctx: Context) -> str | None:
    return ctx.doc_id if ctx.doc_id is not None else ctx.id


def _documents(contexts: Sequence[Context], grades: dict[str, float]) -> Graded:
    seen: set[str] = set()
    ranked: list[float] = []
    known: list[bool] = []
    for ctx in contexts:
        doc = _doc_of(ctx)
        if doc is None:
            ranked.append(0.0)  # no document to place it in: an unjudged item of its own
            known.append(False)
            continue
        if doc in seen:
            continue  # trec_eval's view: a document counts at its first occurrence
        seen.add(doc)
        ranked.append(grades.get(doc, 0.0))
        known.append(doc in grades)
    return Graded(ranked, known, list(grades.values()))
