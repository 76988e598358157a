"""Two conversations run through the pipeline, for the tests of the report per level: values
computed by the run, not typed by hand. Their texts hold hostile markup, so the tests can check
that every renderer shows it as text."""

from __future__ import annotations

from typing import Any

from rag_judge import Pipeline
from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.report.model import Report

HOSTILE_ID = "c2<img src=x onerror=alert(1)>"
HOSTILE_Q = "What is </script><img src=x onerror=alert(2)> here?"
HOSTILE_ARG = "<img src=x onerror=alert(3)>"


def _hop(query: str, *ids: str) -> dict[str, Any]:
    return {"query": query, "contexts": [{"id": d, "text": f"text of {d}"} for d in ids]}


# c1: turn 0 has two hops; the first ranks d1 second (ndcg 0.63), the second finds it first.
# Turn 1 calls calc(x=1) where calc(x=2) was expected, then retrieves d5 second.
# c2: one turn whose one hop finds nothing relevant; its question and a tool argument and its id
# are hostile.
C1 = Sample.model_validate(
    {
        "id": "c1",
        "turns": [
            {"question": "first question",
             "steps": [_hop("q-a", "d2", "d1"), _hop("q-b", "d1", "d3")],
             "answer": "first answer", "relevance": {"d1": 1}},
            {"question": "second question",
             "steps": [{"tool": "calc", "arguments": {"x": 1}, "result": 7},
                       _hop("q-c", "d4", "d5")],
             "answer": "second answer", "relevance": {"d5": 1}},
        ],
        "expected_tools": [{"turn": 1, "calls": [{"tool": "calc", "arguments": {"x": 2}}]}],
    }
)  # fmt: skip
C2 = Sample.model_validate(
    {"id": HOSTILE_ID, "turns": [
        {"question": HOSTILE_Q,
         "steps": [{"tool": "lookup", "arguments": {"who": HOSTILE_ARG}}, _hop("q-d", "d7", "d6")],
         "answer": "an answer", "relevance": {"d8": 1}}]}
)  # fmt: skip
PLAIN = Sample.model_validate(
    {"id": "p", "question": "plain question", "contexts": [{"id": "x", "text": "x"}],
     "answer": "a", "relevance": {"x": 1}}
)  # fmt: skip

THRESHOLDS = {"turn.mrr": ">= 0.75", "step.ndcg@10": ">= 0.9"}


def config(**extra: Any) -> ExperimentConfig:
    evaluators = [
        {"type": "tools", "metrics": ["tool_recall"]},
        {"type": "retrieval", "metrics": ["ndcg@10", "mrr"], "per": "turn", "judged": False},
        {"type": "retrieval", "metrics": ["ndcg@10"], "per": "step", "judged": False},
    ]
    return ExperimentConfig.model_validate({"name": "levels", "evaluators": evaluators, **extra})


def report(samples: list[Sample] | None = None, **extra: Any) -> Report:
    """The run of :func:`config` on ``samples`` (default: both conversations and a single-turn
    sample), with :data:`THRESHOLDS` unless ``thresholds`` is given."""
    extra.setdefault("thresholds", THRESHOLDS)
    return Pipeline(config(**extra)).run(samples or [C1, C2, PLAIN]).report
