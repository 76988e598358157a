"""Data in: the sample model, dataset readers (JSONL, CSV, Parquet, ragas layout), TREC files
and rankings (``rag_judge.data.trec``), and a live target system (``rag_judge.data.target``).

Nothing here imports evaluators, the judge, the LLM layer or the report."""

from __future__ import annotations

from rag_judge.data.jsonl import read_jsonl, write_jsonl
from rag_judge.data.readers import load_dataset
from rag_judge.data.sample import Context, Dataset, Sample

__all__ = ["Context", "Dataset", "Sample", "load_dataset", "read_jsonl", "write_jsonl"]
