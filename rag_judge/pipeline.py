"""Pipeline: run the configured evaluators over a dataset and gather one Report."""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rag_judge import _progress as progress_
from rag_judge._version import __version__
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.data.readers import load_dataset
from rag_judge.data.sample import Dataset, Sample
from rag_judge.data.target import resolve_target, run_target_sync
from rag_judge.errors import ConfigError, format_loc
from rag_judge.evaluators.base import CorpusStatistic, Evaluator, EvaluatorResult
from rag_judge.llm.providers import ClientConfig
from rag_judge.report import write_report
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricInfo,
    MetricKind,
    MetricSummary,
    Report,
    SampleResult,
    Signature,
    Usage,
)
from rag_judge.stats import bootstrap_ci

__all__ = ["Pipeline", "RunResult", "summarize"]

log = logging.getLogger("rag_judge")

LATENCY = MetricInfo(kind=MetricKind.LATENCY, scale=(0.0, None))


@dataclass(frozen=True)
class RunResult:
    """What a run produced: the report, and each sample as it was evaluated (with a target,
    the target's answers and contexts). ``report.samples[i].sample`` is ``samples[i]``."""

    report: Report
    samples: list[Sample]
    # Each step of the run and the metrics it produced: "target" -> ["latency_s"] when there
    # is a target, then "evaluators[i] (type)" -> that evaluator's metric_names().
    steps: dict[str, list[str]] = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """report.json, report.md and report.html into ``out_dir``; returns the paths."""
        return write_report(self.report, out_dir)

    def failure_counts(self) -> dict[str, tuple[int, int]]:
        """(failed values, all values) of each step, over its metrics in the summary; a
        failure of any kind counts (error, unscored verdict, missing input). A judge rubric's
        normalised twin repeats its verdicts, so it is not counted again."""
        out = {}
        for step, metrics in self.steps.items():
            found = [self.report.summary[m] for m in metrics if m in self.report.summary]
            own = [s for s in found if s.normalises is None]
            out[step] = (sum(s.errors for s in own), sum(s.n + s.errors for s in own))
        return out


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

    def prepare(self) -> None:
        """Load what every evaluator needs (models, rubric files, baselines) once; a problem
        is a ConfigError naming the evaluator, raised before any sample is scored. Where the
        evaluator names the option at fault (a missing API key: ``client.api_key_env``), the
        message starts with its config path, ``evaluators[3].client.api_key_env: ...``, and the
        error's ``loc`` is that path (for a caller that knows the YAML file's lines)."""
        for i, evaluator in enumerate(self.config.evaluators):
            try:
                evaluator.prepare()
            except ConfigError as exc:
                if exc.loc:
                    loc = ("evaluators", i, *exc.loc)
                    message = str(exc).removeprefix(f"{format_loc(exc.loc)}: ")
                    raise ConfigError(f"{format_loc(loc)}: {message}", loc=loc) from None
                raise ConfigError(f"evaluators[{i}] ({evaluator.type}): {exc}") from None

    def run(
        self,
        dataset: Dataset | Sequence[Sample] | None = None,
        *,
        progress: progress_.Mode | Literal["bar", "lines", "off"] | None = None,
    ) -> RunResult:
        """Evaluate every sample with every evaluator. Per-sample failures are recorded in the
        report, never raised; an evaluator that crashes outright fails only its own metrics.

        ``progress``: ``"bar"`` (a live line on stderr, rewritten in place), ``"lines"`` (one
        line per finished step) or ``"off"``; None (the default) uses the active display,
        which is off unless a caller (the CLI) turned one on."""
        if progress is not None:
            with progress_.showing(progress_.Display(progress_.Mode(progress))):
                return self.run(dataset)
        progress_.current().start_run(self.config.name)
        self.prepare()
        samples = list(self.load_dataset() if dataset is None else dataset)
        outputs: list[tuple[EvaluatorResult, dict[str, MetricInfo]]] = []
        steps: dict[str, list[str]] = {}
        if self.config.target is not None:
            with progress_.step("target"):
                samples, called = self._call_target(samples)
            outputs.append((called, {"latency_s": LATENCY}))
            steps["target"] = ["latency_s"]
        evaluators = self.config.evaluators
        # With executor: ray, every shard of every shardable evaluator is submitted now and
        # gathered in its step; the others run here, in order, meanwhile.
        pending = self._submit_ray(samples) if self.config.executor == "ray" else {}
        for i, evaluator in enumerate(evaluators):
            name = f"evaluators[{i}] ({evaluator.type})"
            info = {m: evaluator.metric_info(m) for m in evaluator.metric_names()}
            with progress_.step(name):
                if i in pending:
                    result = EvaluatorResult.concat(pending[i]())
                else:
                    result = self._run_one(evaluator, samples)
                outputs.append((result, info))
            steps[name] = list(info)
        return RunResult(self._report(samples, outputs), samples, steps)

    def _report(
        self,
        samples: list[Sample],
        outputs: list[tuple[EvaluatorResult, dict[str, MetricInfo]]],
    ) -> Report:
        results = [SampleResult(id=s.id, sample=s) for s in samples]
        boot = self.config.bootstrap
        run = {"ci": f"bootstrap-{boot.resamples}@{boot.confidence:g}", "seed": self.config.seed}
        signatures: dict[str, Signature] = {}
        summary: dict[str, MetricSummary] = {}
        usage = Usage()
        for out, info in outputs:
            usage += out.usage
            for res, errs, judged in zip(
                results, out.errors, out.judgments or [{}] * len(samples), strict=True
            ):
                res.errors.update(errs)
                res.judgments.update(judged)
            for metric, values in out.scores.items():
                for res, value in zip(results, values, strict=True):
                    res.scores[metric] = value
                signatures[metric] = out.signatures[metric].with_run(**run)
                summary[metric] = summarize(
                    values,
                    resamples=boot.resamples,
                    confidence=boot.confidence,
                    seed=self.config.seed,
                    corpus=out.corpus.get(metric),
                    failures=[res.errors.get(metric) for res in results],
                    info=info.get(metric),
                )
        return Report(
            summary=summary,
            samples=results,
            signatures=signatures,
            usage=usage,
            config=self.config.model_dump(mode="json"),
        )

    def _submit_ray(self, samples: list[Sample]) -> dict[int, Callable[[], list[Any]]]:
        """Start each shardable evaluator's shards as Ray tasks; per evaluator index, a call
        that waits for its shards' results, in shard order. Ray is imported here, only."""
        try:
            import ray
        except ImportError:
            raise ConfigError("executor: ray needs Ray: pip install 'rag-judge[ray]'") from None
        cfg = self.config.ray
        if not ray.is_initialized():  # address None: $RAY_ADDRESS, else a local cluster
            ray.init(address=cfg.address, include_dashboard=False, log_to_driver=False)
        resources = ray.cluster_resources()
        count = min(cfg.shards or max(1, int(resources.get("CPU", 1))), len(samples))
        if count < 1:
            return {}
        bounds = [round(k * len(samples) / count) for k in range(count + 1)]
        shards = [ray.put(samples[a:b]) for a, b in itertools.pairwise(bounds)]
        task = ray.remote(_evaluate_shard)
        pending: dict[int, Callable[[], list[Any]]] = {}
        for i, evaluator in enumerate(self.config.evaluators):
            if not evaluator.shardable:
                log.info("evaluators[%d] (%s) needs every sample at once: not sharded, "
                         "it runs in the driver", i, evaluator.type)  # fmt: skip
                continue
            copy = _shard_copy(evaluator, count)
            gpus = min(1.0, resources.get("GPU", 0) / count) if _wants_gpu(evaluator) else 0
            refs = [task.options(num_gpus=gpus).remote(copy, shard) for shard in shards]
            pending[i] = functools.partial(ray.get, refs)
        return pending

    def _call_target(self, samples: list[Sample]) -> tuple[list[Sample], EvaluatorResult]:
        """Answer every question with the configured target; its latency is the metric
        ``latency_s`` and a failed call is recorded under ``errors["target"]``."""
        cfg = self.config
        if cfg.target is None:  # pragma: no cover - the caller checks
            raise ConfigError("no target configured")
        target = resolve_target(cfg.target)  # a bad spec fails here, before any call
        called = run_target_sync(
            target, samples, concurrency=cfg.target_concurrency, timeout=cfg.target_timeout
        )
        signature = Signature.of(
            "latency_s",
            target=cfg.target,
            concurrency=cfg.target_concurrency,
            timeout=f"{cfg.target_timeout:g}" if cfg.target_timeout else "none",
            unit="s",
            version=__version__,
        )
        result = EvaluatorResult(
            scores={"latency_s": list(called.latency)},
            errors=[{"target": Failure(message=e)} if e else {} for e in called.errors],
            signatures={"latency_s": signature},
        )
        return list(called.samples), result

    @staticmethod
    def _run_one(evaluator: Evaluator, samples: list[Sample]) -> EvaluatorResult:
        try:
            evaluator.prepare()  # idempotent: a no-op locally; a Ray worker's copy loads here
            result = evaluator.evaluate(samples)
            _check_aligned(result, len(samples), evaluator.metric_names())
            return result
        except Exception as exc:  # one broken evaluator must not lose the others' results
            log.exception("evaluator %s failed", evaluator.type)
            names = evaluator.metric_names()
            result = EvaluatorResult.empty(len(samples), {m: Signature(name=m) for m in names})
            message = f"{evaluator.type} evaluator failed: {type(exc).__name__}: {exc}"
            for i in range(len(samples)):
                result.fail(i, Failure(message=message))
            return result


def _evaluate_shard(evaluator: Evaluator, samples: list[Sample]) -> EvaluatorResult:
    """One Ray task: the evaluator prepared in the worker and run on its shard, a failure
    recorded against the shard's samples as in a local run."""
    return Pipeline._run_one(evaluator, samples)


def _shard_copy(evaluator: Evaluator, shards: int) -> Evaluator:
    """The evaluator as sent to a shard: unprepared (nothing loaded travels; the worker
    prepares it), with a judge client's rpm and tpm divided among the shards, so the shards
    together keep the configured rate."""
    update: dict[str, Any] = {}
    client = getattr(evaluator, "client", None)
    if isinstance(client, ClientConfig) and (client.rpm or client.tpm):
        limits = {k: getattr(client, k) / shards for k in ("rpm", "tpm") if getattr(client, k)}
        update["client"] = client.model_copy(update=limits)
    copy = evaluator.model_copy(update=update)
    private = type(evaluator).__private_attributes__
    object.__setattr__(
        copy, "__pydantic_private__", {k: a.get_default() for k, a in private.items()}
    )
    return copy


def _wants_gpu(evaluator: Evaluator) -> bool:
    """BERTScore and the local judge run on a GPU when the cluster has one."""
    client = getattr(evaluator, "client", None)
    return evaluator.type == "bertscore" or (
        isinstance(client, ClientConfig) and client.provider == "local"
    )


def _check_aligned(out: EvaluatorResult, n: int, metrics: Sequence[str]) -> None:
    """An evaluator returns one entry per sample in every column of every metric it names,
    each signed; a short column would silently drop scores."""
    absent = [m for m in metrics if m not in out.scores]
    if absent:
        raise ValueError(f"no values for the metrics {', '.join(absent)}")
    lengths = {m: len(v) for m, v in out.scores.items()}
    lengths["errors"] = len(out.errors)
    if out.judgments:
        lengths["judgments"] = len(out.judgments)
    bad = {k: v for k, v in lengths.items() if v != n}
    if bad:
        raise ValueError(f"evaluator result is not aligned with the {n} samples: {bad}")
    unsigned = set(out.scores) - set(out.signatures)
    if unsigned:
        raise ValueError(f"metrics without a signature: {', '.join(sorted(unsigned))}")


def summarize(
    values: list[float | None],
    *,
    resamples: int,
    confidence: float,
    seed: int,
    corpus: CorpusStatistic | None = None,
    failures: Sequence[Failure | None] = (),
    info: MetricInfo | None = None,
) -> MetricSummary:
    """Exact mean (or corpus statistic) of the scored samples and its bootstrap interval;
    ``failures`` are the per-sample failures, of which unscored verdicts are counted apart."""
    info = info or MetricInfo()
    described = {"kind": info.kind, "scale": info.scale, "normalises": info.normalises}
    scored = [i for i, v in enumerate(values) if v is not None]
    errors = len(values) - len(scored)
    unscored = sum(1 for f in failures if f is not None and f.kind is FailureKind.UNSCORED)
    if not scored:
        return MetricSummary(mean=None, n=0, errors=errors, unscored=unscored, **described)
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
        unscored=unscored, aggregate=aggregate, **described,
    )  # fmt: skip
