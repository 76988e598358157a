"""``executor: ray``: contiguous shards of the samples as Ray tasks, one per shard and evaluator,
each evaluator an unprepared copy that the worker prepares; Ray is imported here, only."""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable
from typing import Any

from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.data.stream import InMemory, SampleSource
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.llm.providers import ClientConfig
from rag_judge.pipeline.judged_relevance import reads_judgments
from rag_judge.pipeline.running import run_whole

__all__ = ["submit"]

log = logging.getLogger("rag_judge")


def submit(config: ExperimentConfig, source: SampleSource) -> dict[int, Callable[[], list[Any]]]:
    """Start each shardable evaluator's shards as Ray tasks; per evaluator index, a call that
    waits for its shards' results, in shard order."""
    try:
        import ray
    except ImportError:
        raise ConfigError("executor: ray needs Ray: pip install 'rag-judge[ray]'") from None
    samples = source.samples if isinstance(source, InMemory) else list(source)
    cfg = config.ray
    if not ray.is_initialized():  # address None: $RAY_ADDRESS, else a local cluster
        ray.init(address=cfg.address, include_dashboard=False, log_to_driver=False)
    resources = ray.cluster_resources()
    count = min(cfg.shards or max(1, int(resources.get("CPU", 1))), len(samples))
    if count < 1:
        return {}
    bounds = [round(k * len(samples) / count) for k in range(count + 1)]
    shards = [ray.put(list(samples[a:b])) for a, b in itertools.pairwise(bounds)]
    task = ray.remote(_evaluate_shard)
    pending: dict[int, Callable[[], list[Any]]] = {}
    for i, evaluator in enumerate(config.evaluators):
        if not evaluator.shardable:
            log.info("evaluators[%d] (%s) needs every sample at once: not sharded, "
                     "it runs in the driver", i, evaluator.type)  # fmt: skip
            continue
        if reads_judgments(evaluator):
            continue  # it reads the judge step's judgments, in the driver, after the judge
        copy = _shard_copy(evaluator, count)
        gpus = min(1.0, resources.get("GPU", 0) / count) if _wants_gpu(evaluator) else 0
        refs = [task.options(num_gpus=gpus).remote(copy, shard) for shard in shards]
        pending[i] = functools.partial(ray.get, refs)
    return pending


def _evaluate_shard(evaluator: Evaluator, samples: list[Sample]) -> EvaluatorResult:
    """One Ray task: the evaluator prepared in the worker and run on its shard, a failure
    recorded against the shard's samples as in a local run."""
    return run_whole(evaluator, samples)


def _shard_copy(evaluator: Evaluator, shards: int) -> Evaluator:
    """The evaluator as sent to a shard: unprepared (nothing loaded travels; the worker
    prepares it), with a judge client's rpm and tpm divided among the shards, so the shards
    together keep the configured rate."""
    update: dict[str, Any] = {}
    client = getattr(evaluator, "client", None)
    if isinstance(client, ClientConfig):
        update["client"] = _divided(client, shards)
    judges = getattr(evaluator, "judges", ())
    if judges:  # a jury: each judge keeps its own rate, divided the same way
        update["judges"] = tuple(_divided(j, shards) for j in judges)
    copy = evaluator.model_copy(update=update)
    private = type(evaluator).__private_attributes__
    object.__setattr__(
        copy, "__pydantic_private__", {k: a.get_default() for k, a in private.items()}
    )
    return copy


def _divided(client: ClientConfig, shards: int) -> ClientConfig:
    limits = {k: getattr(client, k) / shards for k in ("rpm", "tpm") if getattr(client, k)}
    return client.model_copy(update=limits) if limits else client


def _wants_gpu(evaluator: Evaluator) -> bool:
    """BERTScore and the local judge (alone or on a jury) run on a GPU when the cluster has
    one."""
    clients = [getattr(evaluator, "client", None), *getattr(evaluator, "judges", ())]
    return evaluator.type == "bertscore" or any(
        isinstance(c, ClientConfig) and c.provider == "local" for c in clients
    )
