"""The config's models: ``ExperimentConfig`` and its nested option models (bootstrap, labels,
ray), each validated at construction; ``rag_judge.config`` re-exports them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from rag_judge.config._conversation import ConversationConfig
from rag_judge.evaluators import Evaluator, validate_evaluators
from rag_judge.evaluators.retrieval import RetrievalEvaluator, settle_retrieval
from rag_judge.messages import redact_url
from rag_judge.report.result import UNIT_PREFIXES
from rag_judge.report.segments import check_group_by, parse_segment_gate
from rag_judge.report.thresholds import parse_threshold
from rag_judge.stats.ppi import PPIMethod

__all__ = ["BootstrapConfig", "ExperimentConfig", "LabelsConfig", "OtelConfig", "RayConfig"]


class BootstrapConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resamples: int = Field(default=1000, ge=0)
    confidence: float = Field(default=0.95, gt=0, lt=1)


class LabelsConfig(BaseModel):
    """Human labels of a slice of the samples, for the bias-corrected (PPI) estimates: a label
    file (``path``: JSONL or CSV, ``{"id": ..., "<metric>": label}``, as ``rag-judge
    calibrate`` and the report's review mode write them), or with ``column`` each sample's
    ``metadata[column]`` in the dataset (or in ``path``). ``pass_score``: a 1-5 rubric's
    verdict passes at a score >= it (the pass rate corrected by Rogan-Gladen). ``method``: how
    the estimates' intervals are computed, ``t`` (small-sample, valid down to 15 labels) or
    ``ppi_py`` (the reference package's normal interval). A bare string in the config is the
    ``path``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path | None = None
    column: str | None = None
    pass_score: float = Field(default=4.0, ge=1, le=5)
    method: PPIMethod = PPIMethod.T

    @model_validator(mode="before")
    @classmethod
    def _bare_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str | Path) else value

    @model_validator(mode="after")
    def _something(self) -> LabelsConfig:
        if self.path is None and self.column is None:
            raise ValueError("needs a 'path' (a label file) or a 'column' (in the dataset)")
        return self


class RayConfig(BaseModel):
    """Where ``executor: ray`` runs: ``address`` of an existing cluster (``ray://head:10001``,
    ``auto``; None: ``$RAY_ADDRESS``, else a new local cluster started for the run, never one
    already running on the machine), the number of ``shards`` the samples are split into
    (None: the cluster's CPUs), how long joining a cluster may take (``connect_timeout``,
    seconds) and how many times a shard whose worker died is run again (``retries``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = None
    shards: int | None = Field(default=None, ge=1)
    connect_timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0)


class OtelConfig(BaseModel):
    """Where ``rag-judge run`` sends the run's values as OpenTelemetry evaluation events
    (docs/traces.md): a ``file`` of OTLP-JSON lines (relative: in the run's folder) and/or an
    OTLP/HTTP ``endpoint`` with its ``headers`` and ``timeout`` (seconds). ``headers`` are left
    out of report.json, as they often hold a token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path | None = None
    endpoint: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, exclude=True)
    timeout: float = Field(default=10.0, gt=0)

    @field_serializer("endpoint")
    def _shown(self, url: str | None) -> str | None:
        # report.json records where events went, never a token in the URL.
        return redact_url(url) if url is not None else None

    @field_validator("endpoint")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        parts = urlsplit(url or "http://x")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{url!r} is not an http(s) URL (e.g. http://localhost:4318)")
        return url

    @model_validator(mode="after")
    def _somewhere(self) -> OtelConfig:
        if self.file is None and self.endpoint is None:
            raise ValueError("needs a 'file' (OTLP-JSON lines) or an 'endpoint' (OTLP/HTTP)")
        return self


class ExperimentConfig(BaseModel):
    """A run: which dataset, which evaluators with which options, where the report goes.

    Relative paths are resolved against the config file's folder by :func:`load_config`.
    Validation reads no file. The checks of metric names need the evaluators prepared (a
    judge's rubric files read): the pipeline runs them then (:func:`check_metric_names`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "experiment"
    dataset: Path | None = None
    # None: from the extension (a .json/.jsonl trace export from its first key: otlp).
    dataset_format: Literal["jsonl", "csv", "parquet", "otlp"] | None = None
    dataset_layout: Literal["rag-judge", "ragas", "deepeval"] | None = None  # None: from columns
    # A live system to evaluate: "package.module:function" or "file.py:function", called with
    # each question; its answers and contexts replace the dataset's.
    target: str | None = None
    target_concurrency: int = Field(default=4, ge=1)
    target_timeout: float | None = Field(default=None, gt=0)
    # The target is conversational: driven a turn at a time (replay or a simulated user).
    # Left out of the dump when unset, so a config without it reports as before.
    conversation: ConversationConfig | None = Field(default=None, exclude_if=lambda v: v is None)
    output_dir: Path | None = None
    # The model that generated the answers (a sample's metadata["generator"] overrides it):
    # the judge audit flags self-preference when it is of the judge's model family.
    generator: str | None = None
    labels: LabelsConfig | None = None  # human labels of a slice: bias-corrected estimates
    seed: int = 0
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    # Each a registered type, a 'package.module:Class' path, or an Evaluator instance.
    evaluators: list[SerializeAsAny[Evaluator]] = Field(min_length=1)
    # Segments (docs/segments.md): per value of each metadata key, every metric's n, mean and
    # CI; fewer than min_segment_n values give no CI and fail a gate. Left out when unset.
    group_by: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    min_segment_n: int = Field(default=10, ge=1, exclude_if=lambda v: v == 10)
    # CI gates checked after the run: metric -> "OP VALUE" (a bare number means ">=").
    gates: dict[str, str | float] = Field(default_factory=dict)
    # Per-unit thresholds that say which hop of a conversation degraded: a ``turn.X`` or
    # ``step.X`` metric -> "OP VALUE"; a gate on such a metric serves where none is given here.
    thresholds: dict[str, str | float] = Field(default_factory=dict, exclude_if=lambda v: not v)
    # `rag-judge run` exits 3 when more than this share of any evaluator's values failed
    # (errors, unscored verdicts, missing inputs), and whatever it is set to, when an evaluator
    # produced no value at all; the default, 1.0, fails only the latter.
    max_error_rate: float = 1.0
    # Where the evaluators run: "local" (this process) or "ray" (contiguous shards of the
    # samples as Ray tasks; needs the rag-judge[ray] extra). `ray` says which cluster.
    executor: Literal["local", "ray"] = "local"
    ray: RayConfig = Field(default_factory=RayConfig)
    # Samples an evaluator takes at a time: memory holds one chunk of samples, not the dataset.
    chunk_size: int = Field(default=2000, ge=1)
    # 2: the evaluators that score a chunk at a time (retrieval, ROUGE, BLEU) run in a second
    # process, reading the JSON Lines dataset themselves, while this one runs the judge that
    # drives their pass; the numbers are the same. Without such a judge or such a dataset it
    # changes nothing. Left out of the dump at 1, so a config without it reports as before.
    processes: Literal[1, 2] = Field(default=1, exclude_if=lambda v: v == 1)
    # report.json holds the samples inline up to this many; past it they are written to
    # samples.jsonl beside it, and only score columns stay in memory.
    inline_samples: int = Field(default=5000, ge=0)
    # The run's values out as OpenTelemetry evaluation events, after the report is written.
    # Left out of the dump when unset, so a config without it reports as before.
    otel: OtelConfig | None = Field(default=None, exclude_if=lambda v: v is None)

    @field_validator("max_error_rate")
    @classmethod
    def _valid_rate(cls, rate: float) -> float:
        if not 0.0 <= rate <= 1.0:  # NaN fails too
            raise ValueError(
                f"max_error_rate must be between 0 and 1 (the share of an evaluator's values "
                f"that may fail, e.g. 0.05), got {rate:g}"
            )
        return rate

    @field_validator("conversation")
    @classmethod
    def _drives_a_target(
        cls, value: ConversationConfig | None, info: ValidationInfo
    ) -> ConversationConfig | None:
        if value is not None and info.data.get("target") is None:
            raise ValueError("drives a target: set 'target' to a conversational callable")
        return value

    @field_validator("group_by", mode="before")
    @classmethod
    def _one_key(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # group_by: metadata.topic

    @field_validator("group_by")
    @classmethod
    def _valid_keys(cls, keys: list[str]) -> list[str]:
        return check_group_by(keys)

    @field_validator("gates")
    @classmethod
    def _valid_gates(
        cls, gates: dict[str, str | float], info: ValidationInfo
    ) -> dict[str, str | float]:
        for metric, expr in gates.items():
            parse_threshold(expr, metric=metric)  # raises, naming the legal operators
            segment = parse_segment_gate(metric)
            keys = info.data.get("group_by")
            if segment is not None and keys is not None:
                segment_key(metric, segment.key, keys)
        return gates

    @field_validator("thresholds")
    @classmethod
    def _unit_thresholds(cls, thresholds: dict[str, str | float]) -> dict[str, str | float]:
        for metric, expr in thresholds.items():
            if not metric.startswith(UNIT_PREFIXES):
                raise ValueError(
                    f"thresholds: {metric!r} is not a per-unit metric; a threshold names a "
                    f"metric scored per turn or per step ('turn.<metric>' or 'step.<metric>')"
                )
            parse_threshold(expr, metric=metric)
        return thresholds

    @field_validator("evaluators", mode="before")
    @classmethod
    def _evaluators(cls, value: Any) -> Any:
        return validate_evaluators(value)  # the registry is read now, not at import

    @field_validator("evaluators")
    @classmethod
    def _one_automatic_judged(cls, evaluators: list[Evaluator]) -> list[Evaluator]:
        # Only retrieval evaluators add an automatic judged@k, and their names need no file.
        # A judge's names need its rubric files read, so the clash checks wait for prepare()
        # (check_metric_names).
        retrieval = [e for e in evaluators if isinstance(e, RetrievalEvaluator)]
        settled = iter(settle_retrieval(retrieval))
        return [next(settled) if isinstance(e, RetrievalEvaluator) else e for e in evaluators]


def segment_key(gate: str, key: str, keys: list[str]) -> None:
    """A ValueError when a segment gate's ``key`` (``topic`` or ``metadata.topic``) is not
    one of the run's ``group_by`` keys: such a gate could only ever fail."""
    if f"metadata.{key.removeprefix('metadata.')}" not in keys:
        grouped = ", ".join(keys) or "none"
        raise ValueError(
            f"gates: {gate!r} names a segment of {key!r}, which the run does not group by "
            f"(group_by: {grouped})"
        )
