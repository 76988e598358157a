"""rag-judge: evaluate retrieval-augmented generation end to end.

The names here are what a user needs; the layers behind them are packages of their own:
``rag_judge.data`` (samples, readers, TREC files), ``rag_judge.metrics`` (pure kernels),
``rag_judge.evaluators``, ``rag_judge.judge``, ``rag_judge.llm`` (providers, engine),
``rag_judge.report``, ``rag_judge.analysis`` and ``rag_judge.cli``.
"""

import typing as _typing

from rag_judge._lazy import lazy_names as _lazy_names
from rag_judge._version import __version__

if _typing.TYPE_CHECKING:
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

# Where each public name lives. They are imported on first use (PEP 562), so a command that
# needs none of them (`rag-judge retrieval`) does not pay for pydantic, the judge and the report.
_HOME = {
    "calibrate": "rag_judge.analysis.calibration",
    "compare_reports": "rag_judge.analysis.compare",
    "check_gates": "rag_judge.analysis.gates",
    "ExperimentConfig": "rag_judge.config",
    "load_config": "rag_judge.config",
    **dict.fromkeys(
        ["Context", "Dataset", "Sample", "load_dataset", "read_jsonl", "write_jsonl"],
        "rag_judge.data",
    ),
    **dict.fromkeys(["ConfigError", "DataError", "RagJudgeError"], "rag_judge.errors"),
    **dict.fromkeys(
        [
            "EVALUATORS",
            "BERTScoreEvaluator",
            "BleuEvaluator",
            "ChrfEvaluator",
            "Evaluator",
            "EvaluatorResult",
            "GroundingEvaluator",
            "JudgeEvaluator",
            "RetrievalEvaluator",
            "RougeEvaluator",
            "TerEvaluator",
        ],
        "rag_judge.evaluators",
    ),
    "PairwiseJudge": "rag_judge.judge.pairwise",
    **dict.fromkeys(["Pipeline", "RunResult"], "rag_judge.pipeline"),
    **dict.fromkeys(["MetricSummary", "Report"], "rag_judge.report.model"),
}


__getattr__ = _lazy_names("rag_judge", _HOME, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
