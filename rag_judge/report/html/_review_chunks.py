"""The data of the review mode's chunk grades: people grade the top-k chunks of each query 0-3,
for the retrieval metrics computed from judge grades (``relevance_from``) and corrected by PPI++
(``analysis/retrieval_ppi.py``, docs/judge-estimates.md).

The mode is offered when the report's config has a retrieval evaluator with ``relevance_from``
whose metrics have a cut-off, and some sample the page holds has the judge's grade on every
retrieved chunk. k is the deepest cut-off of the corrected metrics, found as
``retrieval_ppi.corrected_metrics`` finds them (the layers keep ``report`` from importing
``analysis``; a test checks the two agree).

The queue is a seeded random order, drawn here and not in the page: the ids of the report's
samples with judge grades, in report order, shuffled by ``random.Random(seed).shuffle`` with
the run's seed. Every prefix of a random permutation is a random subset, so grading the first m
gives PPI its random slice. A page that holds only some samples queues those, in that order.

The human grades the run read (a label line's ``relevance``, or the dataset's ``metadata``
column) are not in report.json, only the metrics they gave. The page is pre-filled from the
label file or dataset the config names, when it can still be read there; else it starts empty.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rag_judge.data.jsonl import json_lines, read_text
from rag_judge.data.readers import load_dataset
from rag_judge.data.sample import Sample
from rag_judge.errors import RagJudgeError
from rag_judge.report.model import Report, SampleResult

if TYPE_CHECKING:
    from rag_judge.evaluators.retrieval import RetrievalEvaluator

__all__ = ["CHUNK_CHARS", "MODE", "chunk_depth", "chunk_json", "chunk_note", "chunk_review"]

MODE = "#chunks"  # the rubric selector's value for the mode: no rubric name has a "#"
CHUNK_CHARS = 4_000  # a chunk's text is cut there (the page stays light; people read it)
_KEY = "relevance"  # the label file's reserved key (analysis/relevance_labels.py)
_GRADES = (0, 1, 2, 3)


def _judge_graded(report: Report) -> list[RetrievalEvaluator]:
    """The config's retrieval evaluators graded by a judge; none when it cannot be read."""
    # Imported here: rag_judge.llm imports the report package, and the evaluators import llm.
    from rag_judge.evaluators.retrieval import RetrievalEvaluator

    out = []
    for spec in report.config.get("evaluators") or ():
        if not isinstance(spec, dict) or spec.get("type") != "retrieval":
            continue
        if spec.get("relevance_from") is None:
            continue
        try:
            out.append(RetrievalEvaluator.model_validate(spec))
        except (ValidationError, RagJudgeError):
            continue  # a report written by another version: no chunk mode rather than a crash
    return out


def chunk_depth(evaluators: Iterable[RetrievalEvaluator]) -> int | None:
    """The deepest cut-off of the metrics a top-k grading corrects (those with a cut-off, less
    judged@k, counts and geometric means), or None when no metric has one."""
    from rag_judge.metrics.retrieval import is_count, is_geometric, parse_metric

    ks = []
    for ev in evaluators:
        for name in ev.metric_names():
            spec = parse_metric(name.removeprefix(ev.name_prefix))
            if spec.k is None or spec.family == "judged" or is_count(spec) or is_geometric(spec):
                continue
            ks.append(int(spec.k))
    return max(ks) if ks else None


def _judge_grades(result: SampleResult, rubric: str) -> list[int] | None:
    """The judge's 0-3 grade of each of the sample's ranked chunks, or None when the sample
    is graded by its own judgments or the judge did not grade every chunk."""
    from rag_judge.judge.relevance import graded_by_judge

    sample = result.sample
    if sample is None or sample.has_judgments():
        return None
    graded = graded_by_judge(sample, result.judgments.get(rubric))
    return None if graded is None else [int(g) for g in graded.ranked]


def chunk_review(report: Report, indices: Sequence[int]) -> dict[str, object] | None:
    """The chunk mode's data for the samples at ``indices`` (those the page holds), or None
    when the report offers no chunk grading."""
    evaluators = _judge_graded(report)
    depth = chunk_depth(evaluators)
    if depth is None:
        return None
    rubric = str(evaluators[0].relevance_from)
    eligible: list[str] = []
    for result in report.samples:
        if _judge_grades(result, rubric) is not None:
            eligible.append(result.id)
    items: list[dict[str, object]] = []
    at: dict[str, int] = {}
    for i in indices:
        result = report.samples[i]
        grades = _judge_grades(result, rubric)
        if grades is None or result.sample is None or result.id in at:
            continue
        at[result.id] = len(items)
        items.append(_item(result.id, result.sample, grades[:depth]))
    if not items:
        return None
    seed = _seed(report)
    order = list(eligible)
    random.Random(seed).shuffle(order)
    prefill = _prefill(report, items)
    return {
        "mode": MODE,
        "rubric": rubric,
        "k": depth,
        "seed": seed,
        "items": items,
        "queue": [at[sid] for sid in order if sid in at],
        "labels": {sid: {_KEY: grades} for sid, grades in prefill.items()},
        "total": len(eligible),
    }


def chunk_note(data: Mapping[str, object]) -> str:
    """The page's one line on the chunk queue: how it was drawn and why grade from the top."""
    queue, total = data["queue"], data["total"]
    assert isinstance(queue, list) and isinstance(total, int)
    held = "" if len(queue) == total else f" (the {len(queue):,} of {total:,} this page holds)"
    return (
        f"Chunk grades: the queue is the samples with the judge's chunk grades{held} in a "
        f"seeded random order (random.Random({data['seed']}).shuffle of their ids, the run's "
        f"seed), so the first m graded are a random slice for the corrected retrieval metrics; "
        f"grade from the top, every one of the top {data['k']} chunks of each. Keys: j or ↓ "
        "next chunk, k or ↑ previous, 0–3 grade it (then on to the next), Backspace clears, "
        "n or → next query, b or ← back."
    )


def chunk_json(data: Mapping[str, object]) -> str:
    """The data as JSON safe inside a ``<script type=application/json>`` block."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c")


def _item(sid: str, sample: Sample, judge: list[int]) -> dict[str, object]:
    chunks = [
        {"id": ctx.id, "text": _cut(ctx.text), "judge": g}
        for ctx, g in zip(sample.contexts, judge, strict=False)
    ]
    ids = [c["id"] for c in chunks]
    # The export grades by context id only when every chunk has one, each its own.
    by_id = all(isinstance(c, str) for c in ids) and len(set(ids)) == len(ids)
    return {
        "id": sid,
        "question": _cut(sample.question or ""),
        "answer": _cut(sample.answer or ""),
        "chunks": chunks,
        "by_id": by_id,
    }


def _cut(text: str) -> str:
    return text if len(text) <= CHUNK_CHARS else text[: CHUNK_CHARS - 1] + "…"


def _seed(report: Report) -> int:
    seed = report.config.get("seed", 0)  # ExperimentConfig's default
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _prefill(report: Report, items: Sequence[Mapping[str, Any]]) -> dict[str, list[int | None]]:
    """The human grades the run read, by rank over each item's top-k chunks (None where a
    chunk has none); empty when the labels cannot be read any more."""
    try:
        found = _read_grades(report)
    except (OSError, RagJudgeError, ValueError):
        return {}  # the run reported a bad file; a page written elsewhere starts empty
    out: dict[str, list[int | None]] = {}
    for item in items:
        value = found.get(str(item["id"]))
        ids = [c["id"] for c in item["chunks"]]
        if isinstance(value, list):
            grades = [_grade(v) for v in value[: len(ids)]]
            grades += [None] * (len(ids) - len(grades))
        elif isinstance(value, dict):
            grades = [_grade(value.get(c)) if isinstance(c, str) else None for c in ids]
        else:
            continue
        if any(g is not None for g in grades):
            out[str(item["id"])] = grades
    return out


def _read_grades(report: Report) -> dict[str, Any]:
    """Each sample's ``relevance`` value in the labels the config names."""
    spec = report.config.get("labels")
    if not isinstance(spec, dict):
        return {}
    path, column = spec.get("path"), spec.get("column")
    if column is not None:  # the dataset's metadata column (the report's samples, or a file)
        if path is None:
            rows = {r.id: r.sample.metadata for r in report.samples if r.sample is not None}
        else:
            rows = {s.id: s.metadata for s in load_dataset(path)}
        return {sid: m[column][_KEY] for sid, m in rows.items() if _has(m.get(column))}
    if path is None or Path(path).suffix.lower() == ".csv":
        return {}  # a CSV label file cannot hold chunk grades
    out = {}
    for _, obj in json_lines(read_text(Path(path)).splitlines()):
        if isinstance(obj, dict) and _KEY in obj and "id" in obj:
            out[str(obj["id"])] = obj[_KEY]
    return out


def _has(row: object) -> bool:
    return isinstance(row, dict) and row.get(_KEY) is not None


def _grade(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() and int(value) in _GRADES else None
