"""BLEU, chrF and TER as sacrebleu computes them, from per-sample statistics a report can
bootstrap: ``bleu`` (with ``bleu_rows``, its statistics counted in arrays), ``chrf``, ``ter``,
and ``rows`` (the statistics of sacrebleu's own metric objects). Each family gives a sentence
score per pair and scores a set of rows; sacrebleu is imported when first used."""

from rag_judge.metrics.sacrebleu.bleu import (
    BLEU_ORDER,
    SMOOTH_METHODS,
    BleuStatistics,
    bleu_statistics,
    bleu_tokenizers,
    check_bleu_options,
    check_bleu_tokenizer,
    corpus_bleu_from_rows,
    corpus_bleu_from_sums,
    sentence_bleu_from_rows,
)
from rag_judge.metrics.sacrebleu.chrf import (
    check_chrf_options,
    chrf_statistics,
    corpus_chrf_from_rows,
    corpus_chrf_from_sums,
    sentence_chrf_from_rows,
)
from rag_judge.metrics.sacrebleu.rows import SacreStatistics, sacrebleu_rows
from rag_judge.metrics.sacrebleu.ter import (
    corpus_ter_from_rows,
    sentence_ter_from_rows,
    ter_statistics,
)

__all__ = [
    "BLEU_ORDER",
    "SMOOTH_METHODS",
    "BleuStatistics",
    "SacreStatistics",
    "bleu_statistics",
    "bleu_tokenizers",
    "check_bleu_options",
    "check_bleu_tokenizer",
    "check_chrf_options",
    "chrf_statistics",
    "corpus_bleu_from_rows",
    "corpus_bleu_from_sums",
    "corpus_chrf_from_rows",
    "corpus_chrf_from_sums",
    "corpus_ter_from_rows",
    "sacrebleu_rows",
    "sentence_bleu_from_rows",
    "sentence_chrf_from_rows",
    "sentence_ter_from_rows",
    "ter_statistics",
]
