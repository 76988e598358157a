"""rag-judge: evaluate retrieval-augmented generation end to end.

The names here are what a user needs; the layers behind them are packages of their own:
``rag_judge.data`` (samples, readers, TREC files), ``rag_judge.metrics`` (pure kernels),
``rag_judge.evaluators``, ``rag_judge.judge``, ``rag_judge.llm`` (providers, engine),
``rag_judge.report``, ``rag_judge.analysis`` and ``rag_judge.cli``.
"""

from rag_judge._version import __version__
from rag_judge.analysis.calibration import calibrate
from rag_judge.analysis.compare import compare_reports
from rag_judge.analysis.gates import check_gates
from rag_judge.config import ExperimentConfig, load_config
from rag_judge.data import Context, Dataset, Sample, load_dataset, read_jsonl, write_jsonl
from rag_judge.errors import ConfigError, DataError, RagJudgeError
from rag_judge.evaluators import (
    EVALUATORS,
    BERTScoreEvaluator,
    BleuEvaluator,
    ChrfEvaluator,
    Evaluator,
    EvaluatorResult,
    GroundingEvaluator,
    JudgeEvaluator,
    RetrievalEvaluator,
    RougeEvaluator,
    TerEvaluator,
)
from rag_judge.judge.pairwise import PairwiseJudge
from rag_judge.pipeline import Pipeline, RunResult
from rag_judge.report.model import MetricSummary, Report

__all__ = [
    "EVALUATORS",
    "BERTScoreEvaluator",
    "BleuEvaluator",
    "ChrfEvaluator",
    "ConfigError",
    "Context",
    "DataError",
    "Dataset",
    "Evaluator",
    "EvaluatorResult",
    "ExperimentConfig",
    "GroundingEvaluator",
    "JudgeEvaluator",
    "MetricSummary",
    "PairwiseJudge",
    "Pipeline",
    "RagJudgeError",
    "Report",
    "RetrievalEvaluator",
    "RougeEvaluator",
    "RunResult",
    "Sample",
    "TerEvaluator",
    "__version__",
    "calibrate",
    "check_gates",
    "compare_reports",
    "load_config",
    "load_dataset",
    "read_jsonl",
    "write_jsonl",
]
