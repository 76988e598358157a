"""The evaluator contract: a small config class; the base class does the bookkeeping.

An evaluator's fields are its configuration, validated by pydantic at construction (shape only,
no I/O). ``prepare()`` loads what it needs (models, files) once before a run. A family is then
one of two things:

- a per-batch ``score(samples) -> {metric: values}`` over the samples that have every field in
  ``needs``: the base class records "field X is missing" for the others, scatters the values
  back by index (checking their length), and signs each metric from the evaluator's fields;
- or a full ``evaluate(samples) -> EvaluatorResult`` override, for evaluators that need more
  (the judge's scheduler, corpus statistics, per-sample failures of their own).

A class that implements neither, or not ``metric_names``, fails when it is defined.
Aggregation is the report's job, except for corpus-level metrics, which hand the report their
per-sample sufficient statistics (``CorpusStatistic``).
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.llm.base import Usage
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Judgment,
    MetricInfo,
    MetricKind,
    Signature,
)

__all__ = [
    "MIXED",
    "CorpusStatistic",
    "DryRun",
    "Evaluator",
    "EvaluatorResult",
    "merged_signature",
    "missing_fields",
    "pick",
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
        :func:`merged_signature`) of the signatures of the parts that scored it (a shard
        whose evaluator crashed, or whose samples all failed, says nothing about how the
        scores were made); when none did, the first part's with options. A crashed shard's
        corpus rows are zeros: its samples have no score, so no statistic reads them."""
        if not parts:
            raise ValueError("no results to concatenate")
        base = next((p for p in parts if any(s.options for s in p.signatures.values())), parts[0])
        signatures = dict(base.signatures)
        for metric in signatures:
            voters = [
                p.signatures[metric]
                for p in parts
                if metric in p.signatures and any(v is not None for v in p.scores.get(metric, ()))
            ]
            if voters:
                signatures[metric] = (merge or merged_signature)(voters)
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


def missing_fields(sample: Sample, needs: Sequence[str]) -> list[str]:
    """ "field X is missing" for each needed field the sample lacks. An empty answer is an
    answer (the metrics score it); an empty list of references or contexts is not."""
    out = []
    for name in needs:
        value = getattr(sample, name)
        if value is None:
            out.append(f"field {name!r} is missing")
        elif isinstance(value, tuple | list | dict) and not value:
            out.append(f"field {name!r} is missing or empty")
    return out


class Evaluator(BaseModel, abc.ABC):
    """Base of every evaluator: pydantic fields are the config; subclasses set ``type``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str

    kind: ClassVar[MetricKind] = MetricKind.CUSTOM
    # Sample fields every scored sample must have ("answer", "references", "contexts", ...).
    needs: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # Fail at class definition, not mid-run: a missing method would otherwise surface as a
        # per-sample error in every report.
        super().__pydantic_init_subclass__(**kwargs)
        if inspect.isabstract(cls) and not cls.__dict__.get("__abstract__", False):
            missing = ", ".join(sorted(cls.__abstractmethods__))
            raise TypeError(f"{cls.__name__} must implement: {missing}")
        if cls.score is Evaluator.score and cls.evaluate is Evaluator.evaluate:
            raise TypeError(f"{cls.__name__} must implement score(samples) or evaluate(samples)")

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """Make the file paths in a raw config mapping relative to the config's folder.

        Evaluators with file options (templates, rubric files) override this.
        """
        return raw

    @abc.abstractmethod
    def metric_names(self) -> list[str]:
        """The metrics this evaluator produces, in report order."""

    def metric_info(self, metric: str) -> MetricInfo:
        """Kind and scale of ``metric`` (default: this class's kind on [0, 1])."""
        return MetricInfo(kind=self.kind)

    def signature(self, metric: str) -> Signature:
        """Every option that changes ``metric``'s number. Default: the fields set away from
        their defaults, then the version; families with richer semantics override it."""
        options = {
            k: _option_text(v)
            for k, v in self.model_dump(mode="json", exclude_defaults=True).items()
            if k != "type"
        }
        return Signature(name=metric, options={**options, "version": __version__})

    def missing(self, sample: Sample) -> list[str]:
        """What ``sample`` lacks for this evaluator (default: the fields in ``needs``)."""
        return missing_fields(sample, self.needs)

    def prepare(self) -> None:
        """Load what evaluating needs (models, files) once, before a run; validation does no
        I/O. Idempotent. The default has nothing to load."""

    @property
    def shardable(self) -> bool:
        """Whether evaluating contiguous shards of the samples apart and concatenating the
        results (:meth:`EvaluatorResult.concat`) gives what evaluating them together does;
        False for an evaluator whose scores depend on the whole batch (BERTScore's idf)."""
        return True

    def score(self, samples: Sequence[Sample]) -> Mapping[str, ArrayLike]:
        """Per-batch hook: one value per sample for each metric, over samples that have every
        field in ``needs``."""
        raise NotImplementedError  # pragma: no cover - guarded at class definition

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        """Score every sample; per-sample problems are recorded, never raised."""
        names = self.metric_names()
        result = EvaluatorResult.empty(len(samples), {m: self.signature(m) for m in names})
        usable = result.require(samples, self.missing)
        if usable:
            values = self.score([samples[i] for i in usable])
            for metric in names:
                result.fill(metric, usable, values[metric])
        return result

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> EvaluatorResult | None:
        """Score the samples a chunk at a time, handing each chunk's result to ``emit`` before
        taking the next chunk (the pipeline streams a dataset through this). Returns a result
        over no samples with what is known only at the end (usage not yet emitted, signatures
        that replace the chunks'), or None. Default: ``evaluate`` on each chunk; an evaluator
        that keeps state across chunks (the judge's one engine) overrides it."""
        for chunk in chunks:
            emit(self.evaluate(chunk))
        return None

    def dry_run(self, samples: Sequence[Sample]) -> DryRun | None:
        """What this evaluator would send to a model, or None if it calls no model."""
        return None

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        """One metric's signature for a run whose shards (``executor: ray``) signed it apart,
        each from its own samples: :func:`merged_signature` (an option that differs says
        ``mixed``); a family whose own word for that differs overrides it (sacrebleu's
        ``nrefs:var``)."""
        return merged_signature(signatures)


def _option_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_option_text(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def pick(kind: str, values: tuple[str, ...], legal: tuple[str, ...]) -> tuple[str, ...]:
    """Validate a non-empty, duplicate-free selection; the error names the value and the set."""
    for value in values:
        if value not in legal:
            raise ValueError(f"unknown {kind} {value!r}; choose from: {', '.join(legal)}")
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise ValueError(f"{kind} listed twice: {', '.join(dup)}")
    return values
