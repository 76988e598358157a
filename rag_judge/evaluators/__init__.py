"""Evaluators and the explicit name -> class registry a config names them by.

The registry is consulted when a config is validated, not frozen at import: a user class is
registered with ``EVALUATORS["exact_match"] = ExactMatch`` (its ``type`` default is the name),
or named in YAML by import path, ``type: my_pkg.evals:ExactMatch``; an ``Evaluator`` instance
passes through as it is.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from rag_judge.evaluators.base import CorpusStatistic, DryRun, Evaluator, EvaluatorResult
from rag_judge.evaluators.bertscore import BERTScoreEvaluator
from rag_judge.evaluators.grounding import GroundingEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.evaluators.rouge import RougeEvaluator
from rag_judge.evaluators.sacrebleu import BleuEvaluator, ChrfEvaluator, TerEvaluator
from rag_judge.evaluators.tools import ToolsEvaluator
from rag_judge.messages import moved_error

__all__ = [
    "EVALUATORS",
    "BERTScoreEvaluator",
    "BleuEvaluator",
    "ChrfEvaluator",
    "CorpusStatistic",
    "DryRun",
    "Evaluator",
    "EvaluatorResult",
    "GroundingEvaluator",
    "JudgeEvaluator",
    "RetrievalEvaluator",
    "RougeEvaluator",
    "TerEvaluator",
    "ToolsEvaluator",
    "evaluator_class",
    "validate_evaluators",
]

# The one list of evaluator classes, keyed by the ``type`` a config names them with.
EVALUATORS: dict[str, type[Evaluator]] = {
    "retrieval": RetrievalEvaluator,
    "rouge": RougeEvaluator,
    "bleu": BleuEvaluator,
    "chrf": ChrfEvaluator,
    "ter": TerEvaluator,
    "bertscore": BERTScoreEvaluator,
    "judge": JudgeEvaluator,
    "grounding": GroundingEvaluator,
    "tools": ToolsEvaluator,
}


def evaluator_class(name: Any) -> type[Evaluator]:
    """The class a config's ``type`` names: a registered name or ``module:Class``."""
    if not isinstance(name, str) or not name:
        raise ValueError("each evaluator needs a 'type'; valid types: " + ", ".join(EVALUATORS))
    if name in EVALUATORS:
        return EVALUATORS[name]
    if ":" not in name:
        raise ValueError(
            f"unknown evaluator type {name!r}; valid types: {', '.join(EVALUATORS)}, "
            "or 'package.module:Class' for your own"
        )
    module, _, attr = name.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"evaluator type {name!r} cannot be imported: {exc}") from None
    if not (isinstance(found, type) and issubclass(found, Evaluator)):
        raise ValueError(f"evaluator type {name!r} is not a subclass of rag_judge.Evaluator")
    return found


def validate_evaluators(items: Any) -> Any:
    """Turn a config's list of evaluator mappings into evaluators, looking each ``type`` up
    now; every problem is reported with its index (``evaluators[2].metrics: ...``)."""
    if not isinstance(items, list | tuple):
        return items  # the field's own validation names the problem
    out: list[Any] = []
    errors: list[InitErrorDetails] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            out.append(item)
            continue
        try:
            cls = evaluator_class(item.get("type"))
        except ValueError as exc:
            errors.append(_error((i, "type"), item.get("type"), str(exc)))
            continue
        raw = dict(item)
        try:
            raw["type"] = _registered_name(cls, raw.get("type"))
        except ValueError as exc:
            errors.append(_error((i, "type"), item.get("type"), str(exc)))
            continue
        try:
            out.append(cls.model_validate(raw))
        except ValidationError as exc:
            errors += [moved_error(e, (i, *e["loc"])) for e in exc.errors()]
    if errors:
        raise ValidationError.from_exception_data("evaluators", errors)
    return out


def _registered_name(cls: type[Evaluator], named: Any) -> Any:
    """A class named by import path is registered under its own ``type`` default, so the
    config a report records validates again in this process."""
    own = cls.model_fields["type"].default
    if named in EVALUATORS or not isinstance(own, str):
        return named if not isinstance(own, str) else own
    holder = EVALUATORS.setdefault(own, cls)
    if holder is not cls:
        raise ValueError(
            f"{named!r} has type {own!r}, which already names {holder.__name__}; "
            "give your class another type"
        )
    return own


def _error(loc: tuple[int | str, ...], value: Any, message: str) -> InitErrorDetails:
    return InitErrorDetails(
        type="value_error", loc=loc, input=value, ctx={"error": ValueError(message)}
    )
