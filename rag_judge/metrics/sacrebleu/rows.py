"""Per-sample sufficient statistics from sacrebleu's own metric objects (chrF, TER).

A sentence score is sacrebleu's score of one row, a corpus score its score of the summed
rows, so the report's bootstrap can resample the rows instead of the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SACREBLEU_CHUNK",
    "SacreStatistics",
    "check_pairs",
    "reference_count",
    "sacrebleu_rows",
]

SACREBLEU_CHUNK = 5_000  # samples per sacrebleu call: bounds its reference cache


@dataclass(frozen=True)
class SacreStatistics:
    """Per-sample statistics rows, the sentence score of each, and sacrebleu's signature.

    chrF rows are ``[hyp, ref, match]`` counts per n-gram order (character orders first, then
    word orders), of the reference with the best sentence chrF; TER rows are ``[edits,
    reference length]`` (fewest edits over the references, mean reference length).
    """

    rows: NDArray[np.float64]
    sentence: NDArray[np.float64]
    signature: str


def check_pairs(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    """ValueError unless each hypothesis has a list of references, none of them empty."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    if any(not refs for refs in references):
        raise ValueError("every hypothesis needs at least one reference")


def reference_count(references: Sequence[Sequence[str]]) -> int:
    """The ``num_refs`` sacrebleu's signature shows after one call over these pairs: their
    common number of references, -1 (``nrefs:var``) if it varies, 0 with no pairs."""
    counts = {len(refs) for refs in references}
    if not counts:
        return 0
    return counts.pop() if len(counts) == 1 else -1


def sacrebleu_rows(
    metric: Any, hypotheses: Sequence[str], references: Sequence[Sequence[str]]
) -> list[list[Any]]:
    """Per-sample sufficient statistics from a sacrebleu metric object (BLEU, CHRF, TER), with
    its ``num_refs`` set as one ``corpus_score`` call over every pair would set it.

    References may vary in number per pair; every pair needs at least one.
    """
    check_pairs(hypotheses, references)
    if not hypotheses:
        metric.num_refs = 0
        return []
    # sacrebleu wants rectangular reference streams; None pads a pair with fewer references
    # (sacrebleu drops None when it caches references, and says nrefs:var in the signature).
    # In chunks: sacrebleu tokenizes and caches every reference of a call at once, which
    # at 100,000 samples held 1.7 GB. Statistics are per sample, so chunking is exact.
    width = max(len(refs) for refs in references)
    stats: list[list[Any]] = []
    counts = set()
    for start in range(0, len(hypotheses), SACREBLEU_CHUNK):
        refs = references[start : start + SACREBLEU_CHUNK]
        streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
        stats += metric._extract_corpus_statistics(
            list(hypotheses[start : start + SACREBLEU_CHUNK]), streams
        )
        counts.add(metric.num_refs)
    metric.num_refs = counts.pop() if len(counts) == 1 else -1  # -1: nrefs:var
    return stats
