"""``evaluate``: a config run through the Pipeline once per test session, its report reused.

Two tests that gate the same config on the same data share one run. The key is a hash of the
effective config (after overrides and the stub switch) and of the dataset's content, so an
edit of either runs again. The cache lives in this process; the pytest plugin empties it when
a session starts and ends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_judge.testing._stub import forced, with_stub_judges

if TYPE_CHECKING:
    from rag_judge.config import ExperimentConfig
    from rag_judge.data.sample import Dataset, Sample
    from rag_judge.report.model import Report

__all__ = ["CacheInfo", "cache_info", "clear_cache", "effective_config", "evaluate"]

_READ_BLOCK = 1 << 20


@dataclass(frozen=True)
class CacheInfo:
    """How often ``evaluate`` ran a pipeline (``runs``) and reused a report (``hits``)."""

    runs: int
    hits: int
    size: int


_reports: dict[str, Report] = {}
_counts = {"runs": 0, "hits": 0}


def cache_info() -> CacheInfo:
    return CacheInfo(_counts["runs"], _counts["hits"], len(_reports))


def clear_cache() -> None:
    """Forget every report and reset the counts: the next ``evaluate`` runs again."""
    _reports.clear()
    _counts.update(runs=0, hits=0)


def evaluate(
    config: str | Path | ExperimentConfig,
    dataset: str | Path | Dataset | Sequence[Sample] | None = None,
    **overrides: Any,
) -> Report:
    """Run ``config`` (a YAML path, or an ``ExperimentConfig``) and return its report.

    ``dataset``: a file that replaces the config's (relative to the working folder, as
    ``rag-judge run --dataset`` takes it), or samples in memory. ``overrides`` replace
    top-level keys of the config (``seed=1``, ``bootstrap={"resamples": 200}``). Inside a test
    marked ``rag_judge_stub`` every judge runs on the offline stub.

    The same effective config on the same data runs once per session: a second call returns
    the same Report object, so treat it as read-only.
    """
    from rag_judge.pipeline import Pipeline

    samples = None
    if isinstance(dataset, str | Path):
        overrides = {**overrides, "dataset": str(dataset)}
    else:
        samples = dataset
    cfg = effective_config(config, overrides)
    key = _key(cfg, samples)
    report = _reports.get(key)
    if report is not None:
        _counts["hits"] += 1
        return report
    report = Pipeline(cfg).run(samples).report
    _counts["runs"] += 1
    _reports[key] = report
    return report


def effective_config(
    config: str | Path | ExperimentConfig, overrides: dict[str, Any] | None = None
) -> ExperimentConfig:
    """The config ``evaluate`` runs: loaded (a packaged ``configs/NAME.yaml`` is found as
    ``rag-judge run`` finds it), with ``overrides``, and on the stub when the switch is on."""
    from rag_judge.config import ExperimentConfig, load_config
    from rag_judge.resources import resolve_config

    if isinstance(config, ExperimentConfig):
        # Validated again with the overrides, as a YAML file's keys would be.
        cfg = config
        if overrides:
            cfg = ExperimentConfig.model_validate({**dict(config), **overrides})
    else:
        cfg = load_config(resolve_config(config), overrides or None)
    return with_stub_judges(cfg) if forced() else cfg


def _key(config: ExperimentConfig, samples: Dataset | Sequence[Sample] | None) -> str:
    digest = hashlib.sha256(config.model_dump_json().encode())
    if samples is not None:
        from rag_judge.data.sample import Dataset

        for sample in samples.samples if isinstance(samples, Dataset) else samples:
            digest.update(sample.model_dump_json().encode())
    elif config.dataset is not None and config.dataset.is_file():
        # A missing file is left for the run to report, with its own message.
        with config.dataset.open("rb") as f:
            while block := f.read(_READ_BLOCK):
                digest.update(block)
    return digest.hexdigest()
