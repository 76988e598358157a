"""A test set from a corpus: plan the items, ask the judge for each question, build and grade
each question's pool, filter, and write the dataset and its manifest.

Every call goes through one judge engine (its rate limits, re-asks and cache), so a run that
was killed resumes from the cache without asking again, and a stub judge makes it
deterministic. docs/synth.md says the rules.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_judge import _progress as progress
from rag_judge._async import run_sync
from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.errors import DataError
from rag_judge.judge.settings import JudgeSession
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import LLMClient, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.report.model import Usage
from rag_judge.synth.asks import ClosedBook, Generated, Grade, SynthAsk
from rag_judge.synth.corpus import Chunk, Corpus, read_corpus
from rag_judge.synth.filters import (
    FilterVerdict,
    closed_book,
    leaks_answer,
    near_duplicates,
    seed_needed,
    unanswerable_holds,
)
from rag_judge.synth.plan import Planned, kind_counts, plan_items
from rag_judge.synth.pool import BM25Pool
from rag_judge.synth.settings import SynthConfig

__all__ = ["Synthesis", "TurnItem", "synthesise"]


@dataclass
class TurnItem:
    """One question of an item (a conversational item has two): its reference answer (None:
    unanswerable), its pool (chunk indices: seeds, BM25, dense) and each pool chunk's grade
    (None: the grade never came)."""

    question: str
    answer: str | None
    pool: list[int] = field(default_factory=list)
    grades: list[int | None] = field(default_factory=list)


@dataclass
class Item:
    """A planned item and what came of it."""

    planned: Planned
    turns: list[TurnItem] = field(default_factory=list)
    failure: str | None = None  # why no question came
    verdicts: list[FilterVerdict] = field(default_factory=list)

    @property
    def kept(self) -> bool:
        return self.failure is None and all(v.passed for v in self.verdicts)


@dataclass
class Synthesis:
    """A finished run: the items in plan order, the samples written, the usage."""

    corpus: Corpus
    items: list[Item]
    samples: list[Sample]
    usage: Usage
    judge: str
    prompts: dict[str, str]


def synthesise(
    corpus: str | Path, config: SynthConfig, *, client: LLMClient | None = None
) -> Synthesis:
    """The test set ``config`` asks for, from the corpus at ``corpus``."""
    read = read_corpus(Path(corpus), config.chunking)
    chunks = read.chunks
    if not chunks:
        raise DataError(f"{corpus}: the corpus holds no text to ask questions about")
    pool = BM25Pool(chunks)
    dense = _dense(chunks, config)
    planned = plan_items(chunks, config.planned(), config.kinds, config.seed, pool)
    session = config.judge.open(client)
    ask = SynthAsk(session)
    with session.engine() as engine:
        items = run_sync(_run(ask, engine, chunks, planned, pool, dense, config))
        usage = engine.usage.model_copy()
    kept = _chosen(items, config)
    samples = [_sample(n, item, chunks, config, session, ask) for n, item in enumerate(kept)]
    return Synthesis(read, items, samples, usage, session.name.text, ask.prompt_hashes())


def _chosen(items: Sequence[Item], config: SynthConfig) -> list[Item]:
    """The items written: of those that passed every filter, each kind's share of
    ``questions`` first (in plan order), then any others to make up the number."""
    passed = [item for item in items if item.kept]
    quota = kind_counts(config.questions, config.kinds)
    chosen: list[Item] = []
    for item in passed:
        if quota.get(item.planned.kind, 0) > 0:
            quota[item.planned.kind] -= 1
            chosen.append(item)
    spare = [item for item in passed if item not in chosen]
    chosen += spare[: max(0, config.questions - len(chosen))]
    return sorted(chosen, key=lambda item: item.planned.index)


async def _run(
    ask: SynthAsk,
    engine: JudgeEngine,
    chunks: Sequence[Chunk],
    planned: Sequence[Planned],
    pool: BM25Pool,
    dense: Any,
    config: SynthConfig,
) -> list[Item]:
    items = [Item(p) for p in planned]
    with progress.step("synth: questions"):
        jobs = [(p.kind, [chunks[i] for i in p.seeds], p.seed) for p in planned]
        for item, found in zip(items, await ask.ask_questions(engine, jobs), strict=True):
            _take_question(item, found)
    asked = [(item, turn) for item in items for turn in item.turns]
    for item, turn in asked:
        turn.pool = _pool_of(turn.question, item.planned.seeds, pool, dense, config)
    with progress.step("synth: grades"):
        pairs = [(turn.question, chunks[i]) for _, turn in asked for i in turn.pool]
        grades = iter(await ask.ask_grades(engine, pairs))
        for _, turn in asked:
            turn.grades = [_grade(next(grades)) for _ in turn.pool]
    answerable = [i for i in items if i.failure is None and i.planned.kind != "unanswerable"]
    with progress.step("synth: closed book"):
        closed = await ask.ask_closed_book(engine, [i.turns[0].question for i in answerable])
    books = dict(zip((id(i) for i in answerable), closed, strict=True))
    _filter(items, books, config)
    return items


def _take_question(item: Item, found: Generated | Unscored | LLMError) -> None:
    if isinstance(found, Unscored):
        item.failure = f"question: unscored: {found.reason}"
    elif isinstance(found, LLMError):
        item.failure = f"question: judge call failed: {found}"
    else:
        item.turns.append(TurnItem(found.question, found.answer))
        if found.follow_up is not None:
            item.turns.append(TurnItem(found.follow_up.question, found.follow_up.answer))
        elif item.planned.kind == "conversational":
            item.failure = "question: a conversational item came without its follow-up"


def _pool_of(
    question: str, seeds: Sequence[int], pool: BM25Pool, dense: Any, config: SynthConfig
) -> list[int]:
    """The chunks graded for ``question``: its seeds, then its BM25 neighbours, then its dense
    ones, each chunk once, in that order."""
    found = list(seeds)
    found += [i for i, _ in pool.search(question, config.pool_depth)]
    if dense is not None:
        found += [i for i, _ in dense.search(question, config.dense_depth)]
    return list(dict.fromkeys(found))


def _grade(found: Grade | Unscored | LLMError) -> int | None:
    return found.grade if isinstance(found, Grade) else None


def _filter(items: list[Item], books: dict[int, Any], config: SynthConfig) -> None:
    """Each generated item's filter verdicts, in order: duplicate, leak, closed book, seed
    needed (answerable kinds), or the pool answers it (unanswerable)."""
    f = config.filters
    generated = [i for i in items if i.failure is None]
    duplicates = near_duplicates([i.turns[0].question for i in generated], f.duplicate)
    for item, twin in zip(generated, duplicates, strict=True):
        detail = "" if twin is None else f"nearly repeats item {generated[twin].planned.index}"
        item.verdicts.append(FilterVerdict(name="duplicate", passed=twin is None, detail=detail))
        first = item.turns[0]
        if item.planned.kind == "unanswerable":
            graded = [g for g in first.grades if g is not None]
            if not graded:  # no grade came: nothing shows the corpus leaves it unanswered
                detail = "no chunk of its pool was graded"
                item.verdicts.append(
                    FilterVerdict(name="unanswerable", passed=False, detail=detail)
                )
                continue
            item.verdicts.append(unanswerable_holds(graded, f.unanswerable_grade - 1))
            continue
        for turn in item.turns:
            item.verdicts.append(leaks_answer(turn.question, turn.answer or "", f.leak_words))
        book = books.get(id(item))
        item.verdicts.append(_closed_book(first, book, f.closed_book))
        seeds = len(item.planned.seeds)
        item.verdicts.append(_seed_needed(first.grades[:seeds], f.seed_grade))


def _closed_book(turn: TurnItem, book: Any, threshold: float) -> FilterVerdict:
    if isinstance(book, ClosedBook):
        return closed_book(turn.question, turn.answer or "", book, threshold)
    why = book.reason if isinstance(book, Unscored) else f"judge call failed: {book}"
    return FilterVerdict(name="closed_book", passed=False, detail=f"no closed-book answer: {why}")


def _seed_needed(grades: Sequence[int | None], min_grade: int) -> FilterVerdict:
    if any(g is None for g in grades):
        return FilterVerdict(name="seed_needed", passed=False, detail="a seed chunk has no grade")
    return seed_needed([g for g in grades if g is not None], min_grade)


def _sample(
    n: int, item: Item, chunks: Sequence[Chunk], config: SynthConfig, session: JudgeSession,
    ask: SynthAsk,
) -> Sample:  # fmt: skip
    """An item as a dataset sample: a question with its reference and span-level qrels (a
    conversational item: two turns), its answerability, and its provenance."""
    p = item.planned
    provenance = {
        "kind": p.kind,
        "seeds": [chunks[i].id for i in p.seeds],
        "request_seed": p.seed,
        "pool_depth": config.pool_depth,
        "dense_depth": config.dense_depth if config.dense else 0,
        "judge": session.name.text,
        "prompts": ask.prompt_hashes(),
        "filters": [v.model_dump() for v in item.verdicts],
        "plan_index": p.index,
    }
    turns = [_gold(turn, chunks) for turn in item.turns]
    data: dict[str, Any] = {
        "id": f"synth-{n + 1:04d}",
        "answerable": p.kind != "unanswerable",
        "metadata": {"synth": provenance},
    }
    if len(turns) > 1:
        data["turns"] = turns
    else:
        data.update(turns[0])
    return Sample.model_validate(data)


def _gold(turn: TurnItem, chunks: Sequence[Chunk]) -> dict[str, Any]:
    """A question with its reference answer and its graded pool as span qrels; a chunk whose
    grade never came is left unjudged."""
    qrels = [
        {"doc_id": chunks[i].doc_id, "start": chunks[i].start, "end": chunks[i].end,
         "relevance": grade}
        for i, grade in zip(turn.pool, turn.grades, strict=True)
        if grade is not None
    ]  # fmt: skip
    return {
        "question": turn.question,
        "references": [] if turn.answer is None else [turn.answer],
        "qrels": qrels,
    }


def _dense(chunks: Sequence[Chunk], config: SynthConfig) -> Any:
    if not config.dense:
        return None
    from rag_judge.synth.pool import DensePool

    return DensePool(chunks)


def write_dataset(samples: Sequence[Sample], path: Path) -> None:
    """The samples as JSON Lines, one per line, as a rag-judge dataset."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [s.model_dump_json(exclude_defaults=True) for s in samples]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def manifest(run: Synthesis, config: SynthConfig, corpus: str | Path) -> dict[str, Any]:
    """What ``run`` did, for ``synth.json``: per kind how many were planned, generated, kept
    and written; each filter's rejections; the grades; the pool; the cost."""
    kinds: dict[str, dict[str, int]] = {}
    written = {s.metadata["synth"]["plan_index"] for s in run.samples}
    for item in run.items:
        row = kinds.setdefault(item.planned.kind, dict.fromkeys(
            ("planned", "generated", "kept", "written"), 0))  # fmt: skip
        row["planned"] += 1
        row["generated"] += item.failure is None
        row["kept"] += item.kept
        row["written"] += item.planned.index in written
    filters: dict[str, dict[str, Any]] = {}
    for item in run.items:
        for v in item.verdicts:
            row2 = filters.setdefault(v.name, {"checked": 0, "rejected": 0})
            row2["checked"] += 1
            row2["rejected"] += not v.passed
    for row2 in filters.values():
        row2["rate"] = round(row2["rejected"] / row2["checked"], 4) if row2["checked"] else None
    grades = {str(g): 0 for g in range(4)} | {"ungraded": 0}
    sizes = []
    for item in run.items:
        for turn in item.turns:
            sizes.append(len(turn.pool))
            for g in turn.grades:
                grades["ungraded" if g is None else str(g)] += 1
    return {
        "rag_judge_version": __version__,
        "corpus": {
            "path": str(corpus),
            "documents": run.corpus.documents,
            "chunks": len(run.corpus.chunks),
            "skipped_empty": run.corpus.skipped,
            "pre_chunked": run.corpus.pre_chunked,
        },
        "config": config.model_dump(mode="json"),
        "judge": run.judge,
        "prompts": run.prompts,
        "questions": {
            "asked": config.questions,
            "planned": len(run.items),
            "written": len(run.samples),
        },
        "kinds": kinds,
        "failed": sum(1 for i in run.items if i.failure is not None),
        "filters": filters,
        "grades": grades,
        "pool": {
            "questions": len(sizes),
            "mean_size": round(sum(sizes) / len(sizes), 4) if sizes else None,
        },
        "usage": run.usage.model_dump(mode="json"),
    }


def write_manifest(data: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
