"""Retrieval metrics over samples: the list order of ``contexts`` is the ranking.

Grades come from the sample's own judgments (``relevance``, a context's ``relevance``), from
document or span labels (``qrels``) mapped onto the chunks by an overlap rule, or, with
``relevance_from: context_relevance``, from the judge's per-context grades where a sample has
no judgments of its own. ``judged@k`` rides along by default: stale labels after re-indexing
show as a collapse in it, not as a retrieval regression.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator, model_validator

from rag_judge._version import __version__
from rag_judge.data.chunks import Graded, Level, OverlapRule, graded
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import (
    CorpusStatistic,
    Evaluator,
    EvaluatorResult,
    EvaluatorRun,
    Final,
)
from rag_judge.judge.relevance import graded_by_judge, relevance_grade
from rag_judge.metrics.retrieval import (
    COUNTS,
    MIN_JUDGED,
    MetricSpec,
    Rankings,
    aggregate,
    compute,
    is_count,
    is_geometric,
    parse_metric,
    uses_threshold,
)
from rag_judge.report.model import (
    Direction,
    Judgment,
    MetricInfo,
    MetricKind,
    PerContextJudgment,
    Report,
    ReportWarning,
    Signature,
    WarningKind,
)

__all__ = [
    "MIN_JUDGED",
    "RetrievalEvaluator",
    "RetrievalRun",
    "check_relevance_from",
    "retrieval_signature",
    "settle_retrieval",
]

DEFAULT_METRICS = ("precision@5", "recall@5", "hit_rate@5", "mrr", "map", "ndcg@5", "ndcg_exp@5")
_GAINED = {"dcg", "idcg", "ndcg", "ndcg_exp"}
# Families that measure the labels or the ranking's length, not its quality (the rest improve
# upward): more judged documents, relevant documents or retrieved ones is no better ranking.
_DIRECTIONS = dict.fromkeys(("idcg", "num_rel", "num_ret", "judged"), Direction.NEUTRAL)
# How relevance_grade maps the judge's 1-5 onto 0-3, as the signature writes it: 1-5:0,0,1,2,3
JUDGE_MAPPING = "1-5:" + ",".join(str(relevance_grade(s)) for s in range(1, 6))


def retrieval_signature(
    spec: MetricSpec,
    threshold: float,
    ordering: str,
    *,
    unit: str | None = None,
    ideal: str = "judged",
    max_docs: int | None = None,
) -> Signature:
    """sacrebleu-style signature: every option that changes the number."""
    options = {"k": str(spec.k) if spec.k is not None else "all"}
    if spec.family in _GAINED:
        options |= {"gain": "exp2" if spec.family == "ndcg_exp" else "linear", "ideal": ideal}
    elif uses_threshold(spec):
        options["rel"] = f">={threshold:g}"
    if spec.family == "gm_map":
        options["agg"] = "geometric"
    elif is_count(spec):
        options["agg"] = "sum"
    if max_docs is not None:
        options["max_docs"] = str(max_docs)
    if unit is not None:
        options["unit"] = unit
    options |= {"order": ordering, "version": __version__}
    return Signature(name=spec.name, options=options)


class RetrievalEvaluator(Evaluator):
    """precision/recall/F1/hit rate@k, MRR, MAP, R-precision, DCG/IDCG/NDCG (linear, exp2), and
    trec_eval's bpref, infAP, interpolated precision, set measures, gm_map and counts."""

    type: Literal["retrieval"] = "retrieval"
    kind: ClassVar[MetricKind] = MetricKind.RETRIEVAL
    metrics: tuple[str, ...] = Field(default=DEFAULT_METRICS, min_length=1)
    relevance_threshold: float = Field(default=1.0, gt=0)
    level: Level = "chunk"
    overlap: OverlapRule = Field(default_factory=OverlapRule)
    max_docs: int | None = Field(default=None, gt=0)  # trec_eval -M: the top N of each ranking
    judged: bool = True  # add judged@k at the deepest cut-off unless one is listed
    min_judged: float = Field(default=MIN_JUDGED, ge=0.0, le=1.0)  # warn below this mean judged@k
    relevance_from: Literal["context_relevance"] | None = None
    # Prepended to every metric name; None: "" at chunk level, "doc_" at document level, so
    # one config can hold both levels (ndcg@5 beside doc_ndcg@5).
    prefix: str | None = Field(default=None, pattern=r"^[a-z0-9_]*$")

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics: tuple[str, ...]) -> tuple[str, ...]:
        names = tuple(parse_metric(m).name for m in metrics)  # raises, listing the valid names
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"metric listed twice: {', '.join(sorted(dup))}")
        return names

    @model_validator(mode="after")
    def _overlap_needs_chunks(self) -> RetrievalEvaluator:
        if self.level == "document" and "overlap" in self.model_fields_set:
            raise ValueError("'overlap' maps span labels onto chunks: it needs level 'chunk'")
        return self

    @property
    def name_prefix(self) -> str:
        if self.prefix is not None:
            return self.prefix
        return "doc_" if self.level == "document" else ""

    def metric_names(self) -> list[str]:
        return [self.name_prefix + name for name in self._specs()]

    def _specs(self) -> dict[str, MetricSpec]:
        """The metrics computed, by their unprefixed names: the listed ones and judged@k."""
        names = list(self.metrics)
        extra = self.judged_metric()
        if extra is not None and extra not in names:
            names.append(extra)
        return {n: parse_metric(n) for n in names}

    def automatic_judged(self) -> str | None:
        """The prefixed judged@k this evaluator adds on its own (not listed), or None."""
        listed = any(parse_metric(m).family == "judged" for m in self.metrics)
        name = self.judged_metric()
        return None if listed or name is None else self.name_prefix + name

    def judged_metric(self) -> str | None:
        """The judged@k this evaluator reports: a listed one, else the automatic one (at the
        deepest cut-off of its metrics, or 10), or None when ``judged`` is off."""
        specs = [parse_metric(m) for m in self.metrics]
        listed = [s.name for s in specs if s.family == "judged"]
        if listed:
            return listed[-1]
        if not self.judged:
            return None
        cuts = [s.k for s in specs if isinstance(s.k, int) and s.family != "judged"]
        return f"judged@{max(cuts, default=10)}"

    def signature(self, metric: str) -> Signature:
        return self._signature(metric, "judged", False)

    def metric_info(self, metric: str) -> MetricInfo:
        family = parse_metric(metric.removeprefix(self.name_prefix)).family
        direction = _DIRECTIONS.get(family, Direction.HIGHER)
        # A count (num_ret, ...) has no upper bound; every other metric lies in [0, 1].
        scale = (0.0, None) if family in COUNTS else (0.0, 1.0)
        return MetricInfo(kind=self.kind, direction=direction, scale=scale)

    def _signature(self, metric: str, ideal: str, spans: bool) -> Signature:
        """``spans``: some sample's labels were mapped onto its chunks by the overlap rule."""
        unit = "doc" if self.level == "document" else "chunk"
        if spans and self.level == "chunk":
            unit += f",{self.overlap.render()}"
        sig = retrieval_signature(
            parse_metric(metric.removeprefix(self.name_prefix)),
            self.relevance_threshold,
            "list",
            unit=unit,
            ideal=ideal,
            max_docs=self.max_docs,
        )
        options = dict(sig.options)
        if self.relevance_from is not None:
            options["rel_from"] = f"{self.relevance_from}({JUDGE_MAPPING})"
        return Signature(name=metric, options=options)

    def missing(self, sample: Sample) -> list[str]:
        problem = _problem(sample)
        return [problem] if problem else []

    def score(self, samples: Sequence[Sample]) -> dict[str, NDArray[np.float64]]:
        return self._score([graded(s, self.level, self.overlap) for s in samples])

    def _score(self, queries: Sequence[Graded]) -> dict[str, NDArray[np.float64]]:
        batch = Rankings.from_lists(
            [g.ranked for g in queries],
            [g.ideal for g in queries],
            [g.known for g in queries],
            [g.extra for g in queries],
        )
        specs = self._specs()
        values = compute(batch, specs.values(), self.relevance_threshold, max_docs=self.max_docs)
        return {self.name_prefix + name: values[spec.name] for name, spec in specs.items()}

    def reads(self) -> tuple[str, ...]:
        return (self.relevance_from,) if self.relevance_from is not None else ()

    def prepare(self) -> RetrievalRun:
        return RetrievalRun(self)

    def conclusions(self, report: Report) -> list[ReportWarning]:
        """A warning when the mean judged@k fell below ``min_judged``: unjudged documents count
        as irrelevant, so stale labels (an index rebuilt or re-chunked since they were made)
        would otherwise read as a retrieval regression."""
        judged = self.judged_metric()
        if judged is None:
            return []
        metric = self.name_prefix + judged
        mean = report.summary[metric].mean if metric in report.summary else None
        if mean is None or mean >= self.min_judged:
            return []
        message = (
            f"{metric} is {mean:.3f}, below {self.min_judged:g}: only {mean:.0%} of the top "
            "retrieved items carry a relevance label, and the retrieval metrics count the rest "
            "as irrelevant. If the index was rebuilt or re-chunked since the labels were made, "
            "relabel (or label spans of documents, which survive re-chunking) before reading "
            "a drop as a regression."
        )
        warning = ReportWarning(
            kind=WarningKind.UNJUDGED,
            metric=metric,
            value=mean,
            threshold=self.min_judged,
            message=message,
        )
        return [warning]


class RetrievalRun(EvaluatorRun):
    """A run of :class:`RetrievalEvaluator`. It holds the judge's grades when the evaluator
    reads them (``relevance_from``), and what its chunks' samples were graded by, which the
    signatures say at the end of the run."""

    evaluator: RetrievalEvaluator

    def __init__(self, evaluator: RetrievalEvaluator) -> None:
        super().__init__(evaluator)
        self._grades: Iterator[Judgment | None] | None = None
        self._sources: set[str] = set()  # where the ideal rankings came from
        self._spans = False  # whether span labels were mapped onto chunks

    def take(self, judgments: Mapping[str, Iterator[Judgment | None]]) -> None:
        """The judge's ``relevance_from`` judgments, one per sample in sample order, read as
        the run streams the samples."""
        rubric = self.evaluator.relevance_from
        if rubric is not None and rubric in judgments:
            self._grades = judgments[rubric]

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        ev = self.evaluator
        result = super().evaluate(samples) if self._grades is None else self._judge_graded(samples)
        sources, spans = self._provenance(samples, result)
        self._sources |= sources
        self._spans = self._spans or spans
        for name, spec in ev._specs().items():
            metric = ev.name_prefix + name
            result.signatures[metric] = ev._signature(metric, _ideal(sources), spans)
            # The summary is trec_eval's all-queries value: a geometric mean, a sum of counts.
            description = "geometric mean" if is_geometric(spec) else "sum"
            if is_geometric(spec) or is_count(spec):
                rows = np.array([v if v is not None else 0.0 for v in result.scores[metric]])
                result.corpus[metric] = CorpusStatistic(
                    rows=rows.reshape(-1, 1), score=_aggregator(spec), description=description
                )
        return result

    def finish(self) -> Final:
        """The signatures say what held over the whole run: where the ideal rankings came
        from and whether span labels were mapped onto chunks."""
        ev = self.evaluator
        ideal = _ideal(self._sources)
        return Final(
            signatures={m: ev._signature(m, ideal, self._spans) for m in ev.metric_names()}
        )

    def _provenance(
        self, samples: Sequence[Sample], result: EvaluatorResult
    ) -> tuple[set[str], bool]:
        """Where the scored samples' ideal rankings came from (``judged`` labels, or the
        ``retrieved`` chunks the judge graded), and whether any had span labels mapped."""
        scored = [s for s, e in zip(samples, result.errors, strict=True) if not e]
        sources = {
            "retrieved" if self._grades is not None and not s.has_judgments() else "judged"
            for s in scored
        }
        return sources, any(_has_spans(s) for s in scored)

    def _judge_graded(self, samples: Sequence[Sample]) -> EvaluatorResult:
        """Samples with judgments of their own as usual; the others graded by the judge's
        per-context verdicts (an ideal ranking of the retrieved chunks only)."""
        assert self._grades is not None  # only called with judge grades taken
        ev = self.evaluator
        names = ev.metric_names()
        result = EvaluatorResult.empty(len(samples), self.signatures())
        usable: list[int] = []
        queries: list[Graded] = []
        for i, sample in enumerate(samples):
            judgment = next(self._grades, None)
            query = graded_by_judge(sample, judgment) if not sample.has_judgments() else None
            if query is None:
                problem = _problem(sample)
                if problem is not None:
                    result.fail(i, f"{problem}, and {_why_ungraded(judgment)}")
                    continue
                query = graded(sample, ev.level, ev.overlap)
            usable.append(i)
            queries.append(query)
        if usable:
            values = ev._score(queries)
            for metric in names:
                result.fill(metric, usable, values[metric])
        return result


def _ideal(sources: set[str]) -> str:
    """``judged``, ``retrieved`` (only the judge-graded retrieved chunks), or both."""
    return "+".join(sorted(sources, key=["judged", "retrieved"].index)) or "judged"


def _has_spans(sample: Sample) -> bool:
    return sample.qrels is not None and any(q.start is not None for q in sample.qrels)


def _aggregator(spec: MetricSpec) -> Callable[[NDArray[np.float64]], float]:
    return lambda rows: aggregate(spec, rows[:, 0])


def _why_ungraded(judgment: Judgment | None) -> str:
    if not isinstance(judgment, PerContextJudgment):
        return "the judge did not grade its contexts"
    return "the judge left some of its contexts ungraded"


def _problem(sample: Sample) -> str | None:
    if not sample.has_judgments():
        return (
            "no relevance judgments: the sample has no 'relevance' or 'qrels' field "
            "and none of its contexts carries one"
        )
    if sample.qrels is not None:
        return None
    for rank, ctx in enumerate(sample.contexts):
        if ctx.id is None and ctx.relevance is None and ctx.doc_id is None:
            return f"field 'contexts[{rank}]': needs an 'id' or its own 'relevance' to be graded"
    return None


def settle_retrieval(evaluators: Sequence[Evaluator]) -> list[Evaluator]:
    """A config's evaluators with one automatic ``judged@k`` per name: retrieval evaluators that
    differ only in threshold or metrics report the same judged@k, so a later one does not add
    the one an earlier evaluator already reports (two would clash)."""
    out: list[Evaluator] = []
    names: set[str] = set()
    for ev in evaluators:
        if isinstance(ev, RetrievalEvaluator):
            auto = ev.automatic_judged()
            if auto is not None and auto in names:
                ev = ev.model_copy(update={"judged": False})
        names.update(ev.metric_names())
        out.append(ev)
    return out


def check_relevance_from(evaluators: Sequence[Evaluator]) -> None:
    """ValueError unless each ``relevance_from`` names a rubric some judge evaluator scores."""
    for i, ev in enumerate(evaluators):
        rubric = ev.relevance_from if isinstance(ev, RetrievalEvaluator) else None
        if rubric is None:
            continue
        if not any(
            rubric in other.metric_names() and other.metric_info(rubric).kind is MetricKind.JUDGE
            for other in evaluators
        ):
            raise ValueError(
                f"evaluators[{i}].relevance_from: {rubric!r} needs a judge evaluator whose "
                f"rubrics include {rubric!r} (its per-context grades are the relevance)"
            )
