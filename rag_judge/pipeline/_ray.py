"""``executor: ray``: contiguous shards of the samples as Ray tasks, one per shard and evaluator,
each evaluator an unprepared copy that the worker prepares; Ray is imported here, only.
Gathering the shards (reruns, lost shards, the workers' warnings) is ``_ray_shards.py``."""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
from types import ModuleType
from typing import Any

from rag_judge.config import ExperimentConfig, RayConfig
from rag_judge.data.sample import Sample
from rag_judge.data.stream import InMemory, SampleSource
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.pipeline._ray_shards import Shards, brief
from rag_judge.pipeline.running import run_whole

__all__ = ["Shards", "submit"]

log = logging.getLogger("rag_judge")

# The settings of rag-judge's own that a worker reads from its environment; a worker of a
# cluster started apart (``ray start``) does not inherit the driver's, so they travel with
# each task. API keys do not: a runtime_env is stored by the cluster and shown by its tools.
ENV_PREFIX = "RAG_JUDGE_"


def submit(config: ExperimentConfig, source: SampleSource) -> dict[int, Shards]:
    """Start each shardable evaluator's shards as Ray tasks; per evaluator index, its
    :class:`Shards` (``gather()`` waits for them and joins them in shard order)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("executor: ray needs Ray: pip install 'rag-judge[ray]'") from None
    samples = source.samples if isinstance(source, InMemory) else list(source)
    connect(ray, config.ray)
    resources = ray.cluster_resources()
    count = min(config.ray.shards or max(1, int(resources.get("CPU", 1))), len(samples))
    if count < 1:
        return {}
    bounds = [round(k * len(samples) / count) for k in range(count + 1)]
    shards = [ray.put(list(samples[a:b])) for a, b in itertools.pairwise(bounds)]
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    # Retries are ours (max_retries=0), so that a rerun is known and said in the report.
    options: dict[str, Any] = {"max_retries": 0}
    if env:
        options["runtime_env"] = {"env_vars": env}
    task = ray.remote(_evaluate_shard)
    pending: dict[int, Shards] = {}
    for i, evaluator in enumerate(config.evaluators):
        if not evaluator.shardable:
            log.info("evaluators[%d] (%s) needs every sample at once: not sharded, "
                     "it runs in the driver", i, evaluator.type)  # fmt: skip
            continue
        if evaluator.reads():
            continue  # it reads the judge step's judgments, in the driver, after the judge
        if evaluator.per != "conversation":
            continue  # it scores each sample's units (pipeline/per_unit.py), in the driver
        # Each shard's copy carries its share of the limits (a judge's calls per minute); the
        # worker prepares it: nothing loaded travels.
        copies = [evaluator.for_shard(count, k) for k in range(count)]
        gpus = min(1.0, resources.get("GPU", 0) / count) if evaluator.wants_gpu() else 0
        run = task.options(num_gpus=gpus, **options)
        start = functools.partial(_start, run, copies, shards)
        label = f"evaluators[{i}] ({evaluator.type})"
        pending[i] = Shards(label, evaluator, bounds, start, config.ray.retries)
    return pending


def connect(ray: ModuleType, cfg: RayConfig) -> None:
    """Join the cluster at ``cfg.address`` (else ``$RAY_ADDRESS``) within
    ``cfg.connect_timeout`` seconds, or, with neither, start a new local one (never one
    already running on this machine, which Ray's own default would join). A cluster this
    process is already connected to (``ray.init()`` before the run) is used as it is. A
    failure is a one-line ConfigError naming ``ray.address``."""
    if ray.is_initialized():
        return
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    init = functools.partial(ray.init, include_dashboard=False, log_to_driver=False)
    if not address:
        init(address="local")
        return
    named = f"ray.address {address!r}" if cfg.address else f"RAY_ADDRESS {address!r}"
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            init(address=address)
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    # In a thread: Ray retries an address that does not answer (or refuses this process's
    # token) for minutes, printing only its own log lines. Its warning that a driver joined
    # off the main thread sets no SIGTERM handler is left out: the CLI needs none.
    ray_worker = logging.getLogger("ray._private.worker")
    ray_worker.addFilter(_off_main_thread)
    thread = threading.Thread(target=join, name="rag-judge-ray-connect", daemon=True)
    thread.start()
    try:
        thread.join(cfg.connect_timeout)
    finally:
        ray_worker.removeFilter(_off_main_thread)
    if not outcome:
        raise ConfigError(
            f"{named}: no Ray cluster answered within {cfg.connect_timeout:g} s "
            "(ray.connect_timeout). Check the host and port (host:6379 for the cluster's "
            "GCS, ray://host:10001 for Ray Client), that the cluster is up, and, if it "
            "requires a token, that RAY_AUTH_MODE=token and RAY_AUTH_TOKEN are set here"
        )
    exc = outcome[0]
    if exc is None:
        return
    # Ray wraps the refusal, sometimes only as text in the message of the error it raises
    if any(
        type(e).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(e)
        for e in _chain(exc)
    ):
        raise ConfigError(
            f"{named}: the Ray cluster refused this process's token (AuthenticationError): it "
            "requires token authentication; set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
            "RAY_AUTH_TOKEN_PATH) to the cluster's token"
        )
    raise ConfigError(f"{named}: could not join the Ray cluster: {brief(exc, 300)}")


def _off_main_thread(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("SIGTERM handler is not set")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (Ray wraps the cause of a failed join)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _start(run: Any, copies: list[Evaluator], shards: list[Any], k: int) -> Any:
    """Submit shard ``k`` (again, after its worker died); its object ref."""
    return run.remote(copies[k], shards[k])


def _evaluate_shard(
    evaluator: Evaluator, samples: list[Sample]
) -> tuple[EvaluatorResult, list[tuple[int, str]]]:
    """One Ray task: the evaluator prepared in the worker and run on its shard, a failure
    recorded against the shard's samples as in a local run; with the warnings rag-judge
    logged meanwhile (level, message), which the driver logs: the workers' own logs are not
    sent to it."""
    logged: list[tuple[int, str]] = []
    handler = _Keep(logged)
    logger = logging.getLogger("rag_judge")
    logger.addHandler(handler)
    try:
        return run_whole(evaluator, samples), logged
    finally:
        logger.removeHandler(handler)


class _Keep(logging.Handler):
    def __init__(self, into: list[tuple[int, str]]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append((record.levelno, record.getMessage()))
