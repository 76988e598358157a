"""rag-judge: evaluate retrieval-augmented generation end to end."""

from __future__ import annotations

__version__ = "0.1.0"

from rag_judge.config import BootstrapConfig, ExperimentConfig, load_config
from rag_judge.data import Context, Dataset, Sample, read_jsonl, write_jsonl
from rag_judge.errors import ConfigError, DataError, RagJudgeError
from rag_judge.evaluators import (
    EVALUATORS,
    BERTScoreEvaluator,
    BleuEvaluator,
    Evaluator,
    EvaluatorResult,
    JudgeEvaluator,
    RetrievalEvaluator,
    RougeEvaluator,
)
from rag_judge.loaders import load_dataset
from rag_judge.metrics.retrieval import MetricSpec, Rankings, compute, parse_metric
from rag_judge.pipeline import Pipeline
from rag_judge.report import MetricSummary, Report, SampleResult, Usage
from rag_judge.target import TargetRun, resolve_target, run_target_sync
from rag_judge.trec import (
    Qrels,
    Run,
    qrels_from_samples,
    rankings_for,
    read_qrels,
    read_run,
    run_from_samples,
    samples_from_trec,
    write_qrels,
    write_run,
)

__all__ = [
    "EVALUATORS",
    "BERTScoreEvaluator",
    "BleuEvaluator",
    "BootstrapConfig",
    "ConfigError",
    "Context",
    "DataError",
    "Dataset",
    "Evaluator",
    "EvaluatorResult",
    "ExperimentConfig",
    "JudgeEvaluator",
    "MetricSpec",
    "MetricSummary",
    "Pipeline",
    "Qrels",
    "RagJudgeError",
    "Rankings",
    "Report",
    "RetrievalEvaluator",
    "RougeEvaluator",
    "Run",
    "Sample",
    "SampleResult",
    "TargetRun",
    "Usage",
    "__version__",
    "compute",
    "load_config",
    "load_dataset",
    "parse_metric",
    "qrels_from_samples",
    "rankings_for",
    "read_jsonl",
    "read_qrels",
    "read_run",
    "resolve_target",
    "run_from_samples",
    "run_target_sync",
    "samples_from_trec",
    "write_jsonl",
    "write_qrels",
    "write_run",
]
