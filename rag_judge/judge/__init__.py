"""Rubric LLM judging: rubrics as data, sandboxed prompt templates, verdict parsing.

The evaluator that runs them is :class:`rag_judge.evaluators.judge.JudgeEvaluator`.
"""

from __future__ import annotations

from rag_judge.judge.prompts import PromptError, PromptRenderer, neutralise, section
from rag_judge.judge.rubrics import (
    BUILTIN_RUBRICS,
    Example,
    Rubric,
    load_rubrics,
    missing_input,
    resolve_rubrics,
)
from rag_judge.judge.verdicts import (
    SCORE_LABELS,
    VERDICT_SCHEMA,
    JudgeVerdict,
    Unscored,
    parse_verdict,
    score_probs_from_logprobs,
    weighted_score,
)

__all__ = [
    "BUILTIN_RUBRICS",
    "SCORE_LABELS",
    "VERDICT_SCHEMA",
    "Example",
    "JudgeVerdict",
    "PromptError",
    "PromptRenderer",
    "Rubric",
    "Unscored",
    "load_rubrics",
    "missing_input",
    "neutralise",
    "parse_verdict",
    "resolve_rubrics",
    "score_probs_from_logprobs",
    "section",
    "weighted_score",
]
