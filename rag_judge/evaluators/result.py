"""What an evaluator hands back: per-chunk results index-aligned with the samples, the
corpus statistics the report bootstraps, and how the results of shards join into one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rag_judge.data.sample import Sample
from rag_judge.llm.base import Usage
from rag_judge.report.model import Failure, FailureKind, Judgment, Signature

__all__ = [
    "MIXED",
    "CorpusStatistic",
    "DryRun",
    "EvaluatorResult",
    "Final",
    "merged_signature",
]


@dataclass(frozen=True)
class CorpusStatistic:
    """Per-sample sufficient statistics (rows) and the function that scores a set of rows.

    The report applies ``score`` to all rows for the headline number and to resampled rows for
    its bootstrap interval, so the interval resamples statistics, not text.
    """

    rows: NDArray[np.float64]
    score: Callable[[NDArray[np.float64]], float]
    description: str = "corpus-level"


@dataclass
class EvaluatorResult:
    """What one evaluator produced for a batch, index-aligned with the samples."""

    scores: dict[str, list[float | None]]
    errors: list[dict[str, Failure]]
    signatures: dict[str, Signature]
    corpus: dict[str, CorpusStatistic] = field(default_factory=dict)
    judgments: list[dict[str, Judgment]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # model calls, summed into the report's usage

    @classmethod
    def empty(cls, n: int, signatures: Mapping[str, Signature]) -> EvaluatorResult:
        """No values yet for ``n`` samples, one column per signed metric."""
        return cls(
            scores={m: [None] * n for m in signatures},
            errors=[{} for _ in range(n)],
            signatures=dict(signatures),
        )

    def fail(
        self, index: int, failure: Failure | str, metrics: Sequence[str] | None = None
    ) -> None:
        """Record one failure of one sample against ``metrics`` (default: every metric)."""
        if isinstance(failure, str):
            failure = Failure(message=failure)
        for metric in self.scores if metrics is None else metrics:
            self.scores[metric][index] = None
            self.errors[index][metric] = failure

    def fill(self, metric: str, indices: Sequence[int], values: ArrayLike) -> None:
        """Scatter ``values`` to the samples at ``indices``; their lengths must agree."""
        seq = np.asarray(values, dtype=np.float64).tolist()
        if len(seq) != len(indices):
            raise ValueError(
                f"metric {metric!r}: {len(seq)} values for {len(indices)} samples; an evaluator "
                "returns exactly one value per sample it was given"
            )
        column = self.scores[metric]
        for i, value in zip(indices, seq, strict=True):
            column[i] = value

    def require(
        self, samples: Sequence[Sample], missing: Callable[[Sample], list[str]]
    ) -> list[int]:
        """Indices of the samples ``missing`` finds nothing wrong with; the others fail with a
        missing-input failure naming what they lack."""
        usable = []
        for i, sample in enumerate(samples):
            problems = missing(sample)
            if problems:
                message = "; ".join(problems)
                self.fail(i, Failure(kind=FailureKind.MISSING_INPUT, message=message))
            else:
                usable.append(i)
        return usable

    @classmethod
    def concat(
        cls,
        parts: Sequence[EvaluatorResult],
        merge: Callable[[Sequence[Signature]], Signature] | None = None,
    ) -> EvaluatorResult:
        """One result from the results of contiguous shards of the samples, in shard order:
        columns, failures and judgments end to end, corpus rows stacked under one score
        function, usage summed. Each metric's signature is ``merge`` (default
        :func:`merged_signature`) of the distinct signatures of the parts that scored it, each
        once and first seen first (a shard
        whose evaluator crashed, or whose samples all failed, says nothing about how the
        scores were made); when none did, the first part's with options. A crashed shard's
        corpus rows are zeros: its samples have no score, so no statistic reads them."""
        if not parts:
            raise ValueError("no results to concatenate")
        base = next((p for p in parts if any(s.options for s in p.signatures.values())), parts[0])
        signatures = dict(base.signatures)
        for metric in signatures:
            voters: dict[tuple[tuple[str, Any], ...], Signature] = {}
            for p in parts:  # each distinct one once, first seen first, as a run's chunks give
                if metric in p.signatures and any(v is not None for v in p.scores.get(metric, ())):
                    voters.setdefault(
                        tuple(p.signatures[metric].options.items()), p.signatures[metric]
                    )
            if voters:
                signatures[metric] = (merge or merged_signature)(list(voters.values()))
        usage = Usage()
        for part in parts:
            usage += part.usage
        corpus = {}
        for metric in {m for p in parts for m in p.corpus}:
            stat = next(p.corpus[metric] for p in parts if metric in p.corpus)
            rows = [
                p.corpus[metric].rows if metric in p.corpus
                else np.zeros((len(p.errors), *stat.rows.shape[1:]), stat.rows.dtype)
                for p in parts
            ]  # fmt: skip
            corpus[metric] = replace(stat, rows=np.concatenate(rows))
        judged = any(p.judgments for p in parts)
        return cls(
            scores={m: [v for p in parts for v in p.scores[m]] for m in base.scores},
            errors=[e for p in parts for e in p.errors],
            signatures=signatures,
            corpus=corpus,
            judgments=[
                j for p in parts for j in (p.judgments or [{}] * len(p.errors))
            ] if judged else [],
            usage=usage,
        )  # fmt: skip


MIXED = "mixed"  # an option whose value differs between the parts of one run


def merged_signature(signatures: Sequence[Signature]) -> Signature:
    """One signature for a run from those of its parts (Ray shards), which must be of one
    metric: an option with the same value in every part keeps it; one whose value differs (or
    that some parts lack) says ``mixed``, as the judge's ``scoring`` does when logprobs came
    back for some verdicts only. The options keep the first part's order."""
    first = signatures[0]
    options = {}
    for key in dict.fromkeys(k for s in signatures for k in s.options):
        values = {s.options.get(key) for s in signatures}
        options[key] = first.options[key] if len(values) == 1 else MIXED
    return first.model_copy(update={"options": options})


@dataclass(frozen=True)
class DryRun:
    """What an evaluator would send to a model, spending nothing."""

    prompts: int
    skipped: int  # samples (x rubrics) left out for a missing input
    requests: int  # calls not already cached, identical requests counted once
    cache_hits: int
    prompt_tokens_estimate: int
    completion_tokens_max: int
    cost_estimate: float | None


@dataclass
class Final:
    """What an evaluator knows only when its run is over: signatures that replace the
    chunks' (how the scores were actually computed over every chunk) and usage not counted
    with any chunk's result."""

    signatures: dict[str, Signature] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def apply(self, result: EvaluatorResult) -> EvaluatorResult:
        """``result`` (of the whole run) with what the end of the run knows."""
        result.signatures.update(self.signatures)
        result.usage = result.usage + self.usage
        return result
