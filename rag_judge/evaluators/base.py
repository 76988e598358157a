"""The evaluator contract: a small config class; the base class does the bookkeeping.

An evaluator's fields are its configuration, validated by pydantic at construction (shape only,
no I/O). ``prepare()`` loads what a run needs (models, files) and returns an
:class:`EvaluatorRun`, the run-scoped object that scores; the config itself never changes.
A family implements one of three hooks:

- ``score(samples) -> {metric: values}``: one value per sample and metric;
- ``statistics(samples) -> Statistics``: a corpus metric's per-sample sufficient statistics,
  its sentence scores and the function that scores a set of rows (sacrebleu's ``Metric``);
- ``prepare()`` returning its own ``EvaluatorRun`` subclass, for families that keep state
  across chunks (the judge's one engine) or load a model.

Calls go one way: ``evaluate`` -> ``prepare().evaluate_all`` -> ``evaluate_chunks`` ->
``evaluate`` per chunk -> the hook. A run ends with a :class:`Final` (signatures that replace
the chunks', usage not yet counted). The pipeline reads what it needs through declared
hooks (``reads``, ``restated``, ``conclusions``, ``wants_gpu``, ``for_shard``), never the
class. The hooks are catalogued in docs/extending.md.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.result import (
    MIXED,
    CorpusStatistic,
    DryRun,
    EvaluatorResult,
    Final,
    merged_signature,
)
from rag_judge.report.model import Judgment, MetricInfo, MetricKind, Signature

if TYPE_CHECKING:
    from rag_judge.report.model import Report, ReportWarning

__all__ = [
    "MIXED",
    "CorpusStatistic",
    "DryRun",
    "Evaluator",
    "EvaluatorResult",
    "EvaluatorRun",
    "Final",
    "Restated",
    "Statistics",
    "merged_signature",
    "missing_fields",
    "per_metric",
    "pick",
]


@dataclass(frozen=True)
class Statistics:
    """What a corpus family computes for a batch (sacrebleu's segment statistics): per-sample
    sufficient statistics (``rows``), each sample's own score (``sentence``), the options its
    signature adds to the version (sacrebleu's own signature, what it omits), the score of a set
    of rows (summed for the corpus, resampled for the interval) and what that score is."""

    rows: NDArray[np.float64]
    sentence: NDArray[np.float64]
    score: Callable[[NDArray[np.float64]], float]
    options: dict[str, str] = field(default_factory=dict)
    description: str = "corpus-level"


@dataclass(frozen=True)
class Restated:
    """Metrics of other evaluators restated over the samples where ``gate`` (a 0/1 metric of
    this evaluator's) is 1, as ``<metric><suffix>``; where it is 0 they do not apply."""

    gate: str
    metrics: tuple[str, ...]
    suffix: str
    given: str  # what the gate says of a sample, for the signature and the report: "answered"


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


Per = Literal["conversation", "turn", "step"]
PER = ("conversation", "turn", "step")


def per_metric(per: Per, metric: str) -> str:
    """The name a metric is reported under when scored ``per`` unit: itself for a
    conversation (today's names), else prefixed (``step.ndcg@10``). No built-in metric
    starts with ``turn.`` or ``step.``; a custom one that did would clash, which
    ``check_metric_names`` reports."""
    return metric if per == "conversation" else f"{per}.{metric}"


class Evaluator(BaseModel, abc.ABC):
    """Base of every evaluator: pydantic fields are the config; subclasses set ``type``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    # The level: what one value scores, a whole sample (a conversation, or a
    # single-turn sample), each turn, or each retrieval step (docs/conversations.md, "Levels").
    # Not named level: the retrieval evaluator's level (chunk | document) came first. Left out
    # of a dump at its default, so every config and report before it reads and writes unchanged.
    per: Per = Field(default="conversation", exclude_if=lambda v: v == "conversation")

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
        hooks = (cls.score, cls.statistics, cls.prepare)
        if hooks == (Evaluator.score, Evaluator.statistics, Evaluator.prepare):
            raise TypeError(
                f"{cls.__name__} must implement score(samples), statistics(samples) or "
                "prepare() returning its own EvaluatorRun"
            )
        if "evaluate" in cls.__dict__ or "evaluate_chunks" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} overrides evaluate: implement score(samples), "
                "statistics(samples) or an EvaluatorRun returned by prepare() instead"
            )

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

    def signatures(self) -> dict[str, Signature]:
        """Every metric's signature, before any sample is scored (one call: a family that
        builds its signatures together overrides this, and ``signature`` reads from it)."""
        return {m: self.signature(m) for m in self.metric_names()}

    def missing(self, sample: Sample) -> list[str]:
        """What ``sample`` lacks for this evaluator (default: the fields in ``needs``)."""
        return missing_fields(sample, self.needs)

    # ---- the hooks a family implements ------------------------------------------------------

    def score(self, samples: Sequence[Sample]) -> Mapping[str, ArrayLike]:
        """One value per sample for each metric, over samples that have every field in
        ``needs``."""
        raise NotImplementedError  # pragma: no cover - guarded at class definition

    def statistics(self, samples: Sequence[Sample]) -> Statistics:
        """A corpus metric (the evaluator's one metric): per-sample sufficient statistics of
        samples that have every field in ``needs``. The base class fills the sentence scores,
        hands the rows to the report as a :class:`CorpusStatistic` and signs the metric with
        the statistics' options."""
        raise NotImplementedError  # pragma: no cover - guarded at class definition

    def prepare(self) -> EvaluatorRun:
        """Load what a run needs (models, files) and return the run that scores; validation
        does no I/O. The default has nothing to load. A problem is a ConfigError, raised
        before any sample is scored."""
        return EvaluatorRun(self)

    # ---- what the pipeline asks (declared, so that it never asks for a class) --------------

    @property
    def shardable(self) -> bool:
        """Whether evaluating contiguous shards of the samples apart and concatenating the
        results (:meth:`EvaluatorResult.concat`) gives what evaluating them together does;
        False for an evaluator whose scores depend on the whole batch (BERTScore's idf)."""
        return True

    def reads(self) -> tuple[str, ...]:
        """Metrics of other evaluators whose judgments this one reads (so it runs after them,
        fed through :meth:`EvaluatorRun.take`); default none."""
        return ()

    def restated(self) -> Restated | None:
        """Metrics of other evaluators this one restates over a subset of the samples."""
        return None

    def conclusions(self, report: Report) -> list[ReportWarning]:
        """Warnings this evaluator draws from the finished report (stale labels, say)."""
        return []

    def wants_gpu(self) -> bool:
        """Whether this evaluator runs on a GPU where a cluster has one."""
        return False

    def for_shard(self, shards: int, k: int) -> Evaluator:
        """The evaluator as run on shard ``k`` of ``shards`` (``executor: ray``): a family
        with shared limits (a judge's calls per minute) gives each shard its share."""
        return self

    def merge_signature(self, signatures: Sequence[Signature]) -> Signature:
        """One metric's signature for a run whose parts (chunks, Ray shards) signed it apart,
        each from its own samples: :func:`merged_signature` (an option that differs says
        ``mixed``); a family whose own word for that differs overrides it (sacrebleu's
        ``nrefs:var``). Of a run's chunks, ``signatures`` holds each distinct one (by options)
        once, in the order first given."""
        return merged_signature(signatures)

    # ---- running --------------------------------------------------------------------------

    def evaluate(self, samples: Sequence[Sample], **run: Any) -> EvaluatorResult:
        """Score every sample; per-sample problems are recorded, never raised. ``run``:
        options of the family's ``prepare`` (a judge's ``client``)."""
        return self.prepare(**run).evaluate_all(samples)

    def dry_run(self, samples: Sequence[Sample]) -> DryRun | None:
        """What this evaluator would send to a model, or None if it calls no model."""
        return None


class EvaluatorRun:
    """One run of an evaluator: what ``prepare()`` loaded, and the scoring.

    The base scores a chunk through the evaluator's ``score`` or ``statistics`` hook and ends
    the run with the signatures of the chunks merged (``merge_signature``) where they differ.
    A family with state across chunks overrides ``evaluate_chunks`` (and returns its own
    :class:`Final`) or ``evaluate`` (one chunk).
    """

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        # Per metric, each distinct signature its chunks gave (by options), first seen first:
        # a million samples in a thousand chunks keep one each, not a thousand.
        self._signed: dict[str, dict[tuple[tuple[str, Any], ...], Signature]] = {}

    def metric_names(self) -> list[str]:
        return self.evaluator.metric_names()

    def signatures(self) -> dict[str, Signature]:
        """Every metric's signature as planned, before any sample is scored."""
        return self.evaluator.signatures()

    def take(self, judgments: Mapping[str, Iterator[Judgment | None]]) -> None:
        """Another step's judgments, one per sample in order, of the metrics the evaluator
        ``reads()``; the default reads none."""

    def aside(self) -> Callable[[Sequence[Sample]], Any] | None:
        """Work on each chunk that another process may do for this run, as a picklable
        callable (a judge's prompts, rendered by the side process of a ``processes: 2`` run
        that parses the samples anyway); None (the default): none."""
        return None

    def take_aside(self, samples: Sequence[Sample], done: Any) -> None:
        """What :meth:`aside`'s callable returned for ``samples`` (None: nothing), before
        they are scored here; the scores must not depend on it."""

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        """Score one chunk of samples."""
        ev = self.evaluator
        if type(ev).statistics is not Evaluator.statistics:
            return self._corpus(samples)
        names = self.metric_names()
        result = EvaluatorResult.empty(len(samples), self.signatures())
        usable = result.require(samples, ev.missing)
        if usable:
            values = ev.score([samples[i] for i in usable])
            for metric in names:
                result.fill(metric, usable, values[metric])
        return result

    def _corpus(self, samples: Sequence[Sample]) -> EvaluatorResult:
        """One chunk of a corpus metric: the sentence scores, the rows (zeros for samples that
        lack an input: the report never reads them) and the signature."""
        metric = self.metric_names()[0]
        result = EvaluatorResult.empty(len(samples), {metric: Signature(name=metric)})
        usable = result.require(samples, self.evaluator.missing)
        stats = self.evaluator.statistics([samples[i] for i in usable])
        options = {**stats.options, "version": __version__}
        result.signatures[metric] = Signature(name=metric, options=options)
        result.fill(metric, usable, stats.sentence)
        rows = np.zeros((len(samples), *stats.rows.shape[1:]), dtype=np.float64)
        rows[usable] = stats.rows
        result.corpus[metric] = CorpusStatistic(rows, stats.score, stats.description)
        return result

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> Final:
        """Score the samples a chunk at a time, handing each chunk's result to ``emit`` before
        taking the next chunk (the pipeline streams a dataset through this); returns what only
        the end of the run knows."""
        for chunk in chunks:
            emit(self.evaluate_chunk(chunk))
        return self.finish()

    def evaluate_chunk(self, chunk: Sequence[Sample]) -> EvaluatorResult:
        """One chunk's result, its signatures noted for :meth:`finish`: what
        ``evaluate_chunks`` does per chunk, for a caller that hands the chunks over itself."""
        result = self.evaluate(chunk)
        for metric, signature in result.signatures.items():
            if any(v is not None for v in result.scores.get(metric, ())):
                seen = self._signed.setdefault(metric, {})
                seen.setdefault(tuple(signature.options.items()), signature)
        return result

    def finish(self) -> Final:
        """The run's signatures where its chunks signed a metric differently (sacrebleu's
        reference count per chunk, say), merged by the evaluator from the distinct ones."""
        out = {}
        for metric, seen in self._signed.items():
            if len(seen) > 1:
                out[metric] = self.evaluator.merge_signature(list(seen.values()))
        return Final(signatures=out)

    def evaluate_all(self, samples: Sequence[Sample]) -> EvaluatorResult:
        """Every sample as one chunk, with what the end of the run knows."""
        parts: list[EvaluatorResult] = []
        final = self.evaluate_chunks([samples], parts.append)
        if not parts:  # a run that emits nothing for no samples still signs its columns
            parts.append(EvaluatorResult.empty(0, self.signatures()))
        return final.apply(EvaluatorResult.concat(parts))


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
