"""Data in: the sample model and conversations (turns of retrieval and tool-call steps, and
the plain samples they expand into per step or per turn),
dataset readers (JSONL, CSV, Parquet; the ragas and DeepEval layouts), TREC files and rankings
(``rag_judge.data.trec``), and a live target system (``rag_judge.data.target``).

Nothing here imports evaluators, the judge, the LLM layer or the report."""

import typing as _typing

from rag_judge._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from rag_judge.data.context import Context
    from rag_judge.data.conversation import ExpectedTools, RetrievalStep, ToolStep, Turn
    from rag_judge.data.jsonl import read_jsonl, write_jsonl
    from rag_judge.data.readers import load_dataset
    from rag_judge.data.sample import Dataset, Sample
    from rag_judge.data.units import Unit, step_samples, turn_samples, unit_of

__all__ = [
    "Context",
    "Dataset",
    "ExpectedTools",
    "RetrievalStep",
    "Sample",
    "ToolStep",
    "Turn",
    "Unit",
    "load_dataset",
    "read_jsonl",
    "step_samples",
    "turn_samples",
    "unit_of",
    "write_jsonl",
]

# Imported on first use (PEP 562): the TREC readers, which live here too, need no pydantic.
_HOME = {
    "Context": "rag_judge.data.context",
    **dict.fromkeys(["Dataset", "Sample"], "rag_judge.data.sample"),
    **dict.fromkeys(
        ["ExpectedTools", "RetrievalStep", "ToolStep", "Turn"], "rag_judge.data.conversation"
    ),
    **dict.fromkeys(["read_jsonl", "write_jsonl"], "rag_judge.data.jsonl"),
    "load_dataset": "rag_judge.data.readers",
    **dict.fromkeys(["Unit", "step_samples", "turn_samples", "unit_of"], "rag_judge.data.units"),
}


__getattr__ = _lazy_names("rag_judge.data", _HOME, globals())
