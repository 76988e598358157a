"""Judge chosen samples again, outside a run: a config's judge evaluators over samples the
caller picked, such as a seeded subset of a report's samples judged by a new judge
(``rag-judge bridge``) or transformed copies of them (``rag-judge audit --metamorphic``).

It is an ordinary :class:`Pipeline` run over those samples, with every evaluator that is not a
judge left out, and with no labels, gates, thresholds, segments, target or conversation: only
the judges' verdicts are wanted. The judges' caches work as in a run, so an interrupted
re-judging resumes from them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.pipeline import Pipeline, RunResult
from rag_judge.report.model import MetricKind, Report

__all__ = ["judge_config", "judged_samples", "rejudge", "report_config", "seeded_subset"]


def report_config(report: Report) -> ExperimentConfig:
    """The config a report was run with, as its report.json recorded it."""
    if not report.config:
        raise ConfigError("the report records no config: it cannot be judged again")
    return ExperimentConfig.model_validate(report.config)


def judge_config(config: ExperimentConfig, *, name: str | None = None) -> ExperimentConfig:
    """``config`` with its judge evaluators alone (a judge, a grounding step: every evaluator of
    kind ``judge``) and nothing run after the verdicts. An error when it has no judge."""
    judges = [e for e in config.evaluators if e.kind is MetricKind.JUDGE]
    if not judges:
        kinds = ", ".join(e.type for e in config.evaluators)
        raise ConfigError(f"config {config.name!r} has no judge evaluator (it has: {kinds})")
    return config.model_copy(
        update={
            "name": name or config.name,
            "evaluators": judges,
            "dataset": None,
            "target": None,
            "conversation": None,
            "labels": None,
            "gates": {},
            "thresholds": {},
            "group_by": [],
            "executor": "local",
        }
    )


def judged_samples(report: Report) -> list[Sample]:
    """The report's samples as they were judged (with a target, the target's answers); an
    error when the report did not keep them."""
    out = []
    for result in report.samples:
        if result.sample is None:
            raise ConfigError(f"sample {result.id!r}: the report did not keep its input")
        out.append(result.sample)
    return out


def seeded_subset(ids: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` of ``ids`` drawn without replacement by ``random.Random(seed)`` (all of them when
    there are no more), in the order of ``ids``: the same ids for the same seed everywhere."""
    if n < 1:
        raise ConfigError(f"a subset needs at least 1 sample, got {n}")
    if n >= len(ids):
        return list(ids)
    chosen = set(random.Random(seed).sample(list(ids), n))
    return [i for i in ids if i in chosen]


def rejudge(config: ExperimentConfig, samples: Sequence[Sample]) -> RunResult:
    """The judge evaluators of ``config`` over ``samples``: a report of their verdicts alone."""
    return Pipeline(judge_config(config)).run(list(samples))
