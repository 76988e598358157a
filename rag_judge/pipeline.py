"""Pipeline: run the configured evaluators over a dataset and gather one Report."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_judge._version import __version__
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.data.readers import load_dataset
from rag_judge.data.sample import Dataset, Sample
from rag_judge.data.target import resolve_target, run_target_sync
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import CorpusStatistic, Evaluator, EvaluatorResult
from rag_judge.llm.base import Usage
from rag_judge.report.model import Report, SampleResult
from rag_judge.stats import bootstrap_ci

if TYPE_CHECKING:
    from rag_judge.data.sample import Sample
from rag_judge.report.model import MetricSummary

__all__ = ["Pipeline", "summarize"]

log = logging.getLogger("rag_judge")


class Pipeline:
    """Runs evaluators over samples. Build it from a config, a YAML file, or a list of evaluators.

    >>> from rag_judge import Pipeline, RetrievalEvaluator
    >>> pipe = Pipeline([RetrievalEvaluator(metrics=["ndcg@10", "mrr"])])
    """

    def __init__(self, config: ExperimentConfig | Sequence[Evaluator]) -> None:
        if not isinstance(config, ExperimentConfig):
            config = ExperimentConfig(evaluators=list(config))
        self.config = config

    @classmethod
    def from_yaml(cls, path: str | Path) -> Pipeline:
        return cls(load_config(path))

    @property
    def evaluators(self) -> list[Evaluator]:
        return list(self.config.evaluators)

    def load_dataset(self) -> Dataset:
        if self.config.dataset is None:
            raise ConfigError("no dataset: set 'dataset' in the config or pass one to run()")
        return load_dataset(
            self.config.dataset,
            format=self.config.dataset_format,
            layout=self.config.dataset_layout,
        )

    def run(self, dataset: Dataset | Sequence[Sample] | None = None) -> Report:
        """Evaluate every sample with every evaluator. Per-sample failures are recorded in the
        report, never raised; an evaluator that crashes outright fails only its own metrics."""
        samples = list(self.load_dataset() if dataset is None else dataset)
        outputs = []
        if self.config.target is not None:
            samples, called = self._call_target(samples)
            outputs.append(called)
        outputs += [self._run_one(evaluator, samples) for evaluator in self.config.evaluators]
        results = [SampleResult(id=s.id) for s in samples]
        signatures: dict[str, str] = {}
        columns: dict[str, list[float | None]] = {}
        corpus = {}
        usage = Usage()
        for out in outputs:
            usage = usage.add(out.usage)
            signatures.update(out.signatures)
            corpus.update(out.corpus)
            for metric, values in out.scores.items():
                columns[metric] = values
                for res, value in zip(results, values):
                    res.scores[metric] = value
            for res, errs in zip(results, out.errors):
                res.errors.update(errs)
            for res, judged in zip(results, out.judgments):
                res.judgments.update(judged)
        boot = self.config.bootstrap
        ci = f"ci:bootstrap-{boot.resamples}@{boot.confidence:g}|seed:{self.config.seed}"
        signatures = {metric: f"{sig}|{ci}" for metric, sig in signatures.items()}
        summary = {
            metric: summarize(
                values,
                resamples=boot.resamples,
                confidence=boot.confidence,
                seed=self.config.seed,
                corpus=corpus.get(metric),
                reasons=[res.errors.get(metric) for res in results],
            )
            for metric, values in columns.items()
        }
        return Report(
            summary=summary,
            samples=results,
            signatures=signatures,
            usage=usage,
            config=self.config.model_dump(mode="json"),
        )

    def _call_target(self, samples: list[Sample]) -> tuple[list[Sample], EvaluatorResult]:
        """Answer every question with the configured target; its latency is the metric
        ``latency_s`` and a failed call is recorded under ``errors["target"]``."""
        cfg = self.config
        assert cfg.target is not None
        target = resolve_target(cfg.target)  # a bad spec fails here, before any call
        called = run_target_sync(
            target, samples, concurrency=cfg.target_concurrency, timeout=cfg.target_timeout
        )
        timeout = f"{cfg.target_timeout:g}" if cfg.target_timeout else "none"
        signature = (
            f"latency_s|target:{cfg.target}|concurrency:{cfg.target_concurrency}"
            f"|timeout:{timeout}|unit:s|version:{__version__}"
        )
        result = EvaluatorResult(
            scores={"latency_s": list(called.latency)},
            errors=[{"target": e} if e else {} for e in called.errors],
            signatures={"latency_s": signature},
        )
        return list(called.samples), result

    @staticmethod
    def _run_one(evaluator: Evaluator, samples: list[Sample]) -> EvaluatorResult:
        try:
            return evaluator.evaluate(samples)
        except Exception as exc:  # one broken evaluator must not lose the others' results
            log.exception("evaluator %s failed", evaluator.type)
            result = EvaluatorResult.empty(len(samples), evaluator.metric_names(), {})
            for i in range(len(samples)):
                result.fail(i, f"{evaluator.type} evaluator failed: {type(exc).__name__}: {exc}")
            return result


def summarize(
    values: list[float | None],
    *,
    resamples: int,
    confidence: float,
    seed: int,
    corpus: CorpusStatistic | None = None,
    reasons: list[str | None] | None = None,
) -> MetricSummary:
    """Exact mean (or corpus statistic) of the scored samples and its bootstrap interval.

    ``reasons`` are the per-sample error messages; those starting "unscored" are counted apart.
    """
    scored = [i for i, v in enumerate(values) if v is not None]
    errors = len(values) - len(scored)
    unscored = sum(1 for r in reasons or [] if r is not None and r.startswith("unscored"))
    if not scored:
        return MetricSummary(mean=None, n=0, errors=errors, unscored=unscored)
    ci: tuple[float, float] | tuple[None, None]
    if corpus is not None:
        rows = corpus.rows[scored]
        point = corpus.score(rows)
        ci = bootstrap_ci(
            rows, resamples=resamples, confidence=confidence, seed=seed, statistic=corpus.score
        )
        aggregate = corpus.description
    else:
        arr = np.array([values[i] for i in scored], dtype=np.float64)
        point = math.fsum(arr.tolist()) / len(arr)  # exact mean, independent of order
        ci = bootstrap_ci(arr, resamples=resamples, confidence=confidence, seed=seed)
        aggregate = "mean"
    return MetricSummary(
        mean=point, ci_low=ci[0], ci_high=ci[1], n=len(scored), errors=errors,
        unscored=unscored, aggregate=aggregate,
    )  # fmt: skip
