"""LLM judging: rubrics as data, sandboxed prompt templates, verdict parsing, the ask / re-ask
loop (``asking``), pairwise comparison and judged relevance grades.

The evaluator that runs rubric judging is :class:`rag_judge.evaluators.judge.JudgeEvaluator`;
pairwise comparison is :class:`rag_judge.judge.pairwise.PairwiseJudge`.
"""

from __future__ import annotations

from rag_judge.judge.asking import Outcome, ask_all, ask_sync, reask_message
from rag_judge.judge.prompts import PromptError, PromptRenderer, neutralise, section
from rag_judge.judge.relevance import graded_by_judge, relevance_grade
from rag_judge.judge.rubrics import (
    BUILTIN_RUBRICS,
    CONVERSATION_RUBRICS,
    ConversationRubric,
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
    "CONVERSATION_RUBRICS",
    "SCORE_LABELS",
    "VERDICT_SCHEMA",
    "ConversationRubric",
    "Example",
    "JudgeVerdict",
    "Outcome",
    "PromptError",
    "PromptRenderer",
    "Rubric",
    "Unscored",
    "ask_all",
    "ask_sync",
    "graded_by_judge",
    "load_rubrics",
    "missing_input",
    "neutralise",
    "parse_verdict",
    "reask_message",
    "relevance_grade",
    "resolve_rubrics",
    "score_probs_from_logprobs",
    "section",
    "weighted_score",
]
