"""``python -m rag_judge.cli``: the same as the ``rag-judge`` command."""

from rag_judge.cli import entry

entry()
