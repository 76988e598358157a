"""rag-judge: evaluate retrieval-augmented generation end to end."""

from __future__ import annotations

from rag_judge._version import __version__
from rag_judge.config import BootstrapConfig, ExperimentConfig, load_config
from rag_judge.data.jsonl import read_jsonl, write_jsonl
from rag_judge.data.ranking import Qrels, Run, rankings_for
from rag_judge.data.readers import load_dataset
from rag_judge.data.sample import Context, Dataset, Sample
from rag_judge.data.target import TargetRun, resolve_target, run_target_sync
from rag_judge.data.trec import (
    qrels_from_samples,
    read_qrels,
    read_run,
    run_from_samples,
    samples_from_trec,
    write_qrels,
    write_run,
)
from rag_judge.errors import ConfigError, DataError, RagJudgeError
from rag_judge.evaluators import EVALUATORS
from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.evaluators.bertscore import BERTScoreEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.evaluators.lexical import BleuEvaluator, RougeEvaluator
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.llm.base import Usage
from rag_judge.metrics.retrieval import MetricSpec, Rankings, compute, parse_metric
from rag_judge.pipeline import Pipeline
from rag_judge.report.model import MetricSummary, Report, SampleResult

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
