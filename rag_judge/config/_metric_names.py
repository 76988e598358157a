"""The checks of a config's metric names that need the evaluators prepared.

A judge's metric names are its rubrics' names, and a rubric file must be read to know them.
Validation reads no file, so these checks run when the pipeline prepares the evaluators.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from rag_judge.errors import ConfigError, format_loc
from rag_judge.evaluators import Evaluator
from rag_judge.evaluators.base import per_metric
from rag_judge.evaluators.retrieval import check_relevance_from

__all__ = ["check_metric_names", "check_threshold_names"]


def check_metric_names(evaluators: Sequence[Evaluator]) -> None:
    """A ConfigError unless every metric comes from one evaluator, and every
    ``relevance_from`` names a rubric that a judge evaluator scores.

    The error's ``loc`` names the evaluator, as ``("evaluators", 2)``. For a
    ``relevance_from`` it is ``("evaluators",)``, and the message names the evaluator.
    """
    seen: dict[str, int] = {}
    for i, evaluator in enumerate(evaluators):
        for own in evaluator.metric_names():
            metric = per_metric(evaluator.per, own)  # a step's ndcg@10 is not the sample's
            if metric in seen:
                loc: tuple[int | str, ...] = ("evaluators", i)
                raise ConfigError(
                    f"{format_loc(loc)}: metric {metric!r} is produced by "
                    f"evaluators[{seen[metric]}] and evaluators[{i}]; give one of them a "
                    "different metric list",
                    loc=loc,
                )
            seen[metric] = i
    try:
        check_relevance_from(evaluators)
    except ValueError as exc:
        raise ConfigError(str(exc), loc=("evaluators",)) from None


def check_threshold_names(thresholds: Collection[str], evaluators: Sequence[Evaluator]) -> None:
    """A ConfigError unless every per-unit threshold names a metric an evaluator scores per
    turn or per step (``turn.faithfulness``), with the closest such names."""
    per_unit = [e for e in evaluators if e.per != "conversation"]
    legal = [per_metric(e.per, m) for e in per_unit for m in e.metric_names()]
    for name in thresholds:
        if name not in legal:
            close = difflib.get_close_matches(name, legal, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            scored = ", ".join(legal) if legal else "none: no evaluator has per: turn or step"
            raise ConfigError(
                f"thresholds.{name}: no evaluator scores {name!r} per unit{hint} "
                f"(the per-unit metrics: {scored})",
                loc=("thresholds", name),
            )
