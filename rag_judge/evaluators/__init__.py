"""Evaluators and the explicit name -> class registry the config and pipeline use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from rag_judge.evaluators.base import CorpusStatistic, Evaluator, EvaluatorResult
from rag_judge.evaluators.bertscore import BERTScoreEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.evaluators.lexical import BleuEvaluator, RougeEvaluator
from rag_judge.evaluators.retrieval import RetrievalEvaluator

__all__ = [
    "EVALUATORS",
    "AnyEvaluator",
    "BERTScoreEvaluator",
    "BleuEvaluator",
    "CorpusStatistic",
    "Evaluator",
    "EvaluatorResult",
    "JudgeEvaluator",
    "RetrievalEvaluator",
    "RougeEvaluator",
]

# The one list of evaluator classes, keyed by the ``type`` a config names them with.
EVALUATORS: dict[str, type[Evaluator]] = {
    "retrieval": RetrievalEvaluator,
    "rouge": RougeEvaluator,
    "bleu": BleuEvaluator,
    "bertscore": BERTScoreEvaluator,
    "judge": JudgeEvaluator,
}

if TYPE_CHECKING:
    AnyEvaluator = Evaluator
else:
    # A discriminated union on ``type`` built from the registry, so adding an evaluator is one
    # line above, and an unknown type is reported with the list of legal ones.
    AnyEvaluator = Annotated[Union[tuple(EVALUATORS.values())], Field(discriminator="type")]  # noqa: UP007
