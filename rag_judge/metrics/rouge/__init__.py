"""ROUGE-1/2/L/Lsum as rouge-score 0.1.2 computes them: ``port`` (rouge-score's scorer ported
bit for bit, without nltk) and ``scores`` (a batch of pairs, the tokenizers)."""

from rag_judge.metrics.rouge.port import FOLLOWS
from rag_judge.metrics.rouge.scores import (
    ROUGE_MEASURES,
    ROUGE_TOKENIZERS,
    ROUGE_TYPES,
    UnicodeTokenizer,
    rouge_scores,
    rouge_tokenizer,
)

__all__ = [
    "FOLLOWS",
    "ROUGE_MEASURES",
    "ROUGE_TOKENIZERS",
    "ROUGE_TYPES",
    "UnicodeTokenizer",
    "rouge_scores",
    "rouge_tokenizer",
]
