"""Data in: the sample model, dataset readers (JSONL, CSV, Parquet, ragas layout), TREC files
and rankings (``rag_judge.data.trec``), and a live target system (``rag_judge.data.target``).

Nothing here imports evaluators, the judge, the LLM layer or the report."""

import typing as _typing

from rag_judge._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from rag_judge.data.jsonl import read_jsonl, write_jsonl
    from rag_judge.data.readers import load_dataset
    from rag_judge.data.sample import Context, Dataset, Sample

__all__ = ["Context", "Dataset", "Sample", "load_dataset", "read_jsonl", "write_jsonl"]

# Imported on first use (PEP 562): the TREC readers, which live here too, need no pydantic.
_HOME = {
    **dict.fromkeys(["Context", "Dataset", "Sample"], "rag_judge.data.sample"),
    **dict.fromkeys(["read_jsonl", "write_jsonl"], "rag_judge.data.jsonl"),
    "load_dataset": "rag_judge.data.readers",
}


__getattr__ = _lazy_names("rag_judge.data", _HOME, globals())
