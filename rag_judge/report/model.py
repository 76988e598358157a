"""The Report as pure data: what one run produced, with meaning in types, not in strings.

``report.json`` is :class:`Report` dumped (a contract). Its parts (signatures, failures,
judgments, metric kinds) are the types of ``types.py``, re-exported here; the samples are a list
or, for a large run, a :class:`~rag_judge.report.samples.SampleFile` (``samples.jsonl`` beside
report.json, which then names it as ``samples_file`` instead of holding a ``samples`` list).
The Markdown and HTML renderers import this module and turn it into text, never the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    InstanceOf,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)

from rag_judge._version import __version__
from rag_judge.errors import DataError
from rag_judge.report.estimates import (
    ChunkGrading,
    GradeConfusion,
    JuryAgreement,
    LengthStratum,
    PPIEstimate,
    ReportWarning,
    RoganGladen,
    RubricAudit,
    WarningKind,
)
from rag_judge.report.result import UNIT_PREFIXES, Degradation, Miss, SampleResult, UnitResult
from rag_judge.report.samples import SampleFile, SampleIndex, index_of
from rag_judge.report.segments import Segment
from rag_judge.report.types import (
    CLAIM_VERDICTS,
    GROUNDING,
    UNCHECKED,
    BaseJudgment,
    ClaimJudgment,
    Direction,
    Failure,
    FailureKind,
    GroundingJudgment,
    JudgeName,
    Judgment,
    Juror,
    JuryJudgment,
    MetricInfo,
    MetricKind,
    MetricSummary,
    PerContextJudgment,
    Restatement,
    RubricJudgment,
    Signature,
    Usage,
)

__all__ = [
    "CLAIM_VERDICTS",
    "GROUNDING",
    "SAMPLES_FILE",
    "UNCHECKED",
    "BaseJudgment",
    "ChunkGrading",
    "ClaimJudgment",
    "Degradation",
    "Direction",
    "Failure",
    "FailureKind",
    "GradeConfusion",
    "GroundingJudgment",
    "JudgeName",
    "Judgment",
    "Juror",
    "JuryAgreement",
    "JuryJudgment",
    "LengthStratum",
    "MetricInfo",
    "MetricKind",
    "MetricSummary",
    "Miss",
    "PPIEstimate",
    "PerContextJudgment",
    "Report",
    "ReportWarning",
    "Restatement",
    "RoganGladen",
    "RubricAudit",
    "RubricJudgment",
    "SampleFile",
    "SampleIndex",
    "SampleResult",
    "Signature",
    "UnitResult",
    "Usage",
    "WarningKind",
    "stub_method",
]

SAMPLES_FILE = "samples.jsonl"  # beside report.json, when the samples are not inline


class Report(BaseModel):
    """Everything one run produced. ``report.json`` is this model, dumped (a contract)."""

    summary: dict[str, MetricSummary]
    # A list, or (a large run, a report.json with ``samples_file``) the rows of a file.
    samples: InstanceOf[SampleFile] | list[SampleResult]
    signatures: dict[str, Signature]
    # The interval level of the summary's bounds and of the judge analyses: the run's
    # ``bootstrap.confidence``. A report.json written before it was stored reads its config's.
    confidence: float = Field(default=0.95, gt=0, lt=1)
    usage: Usage = Field(default_factory=Usage)
    config: dict[str, Any] = Field(default_factory=dict)
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    rag_judge_version: str = __version__
    # Human labels of a slice of the samples (id -> metric -> label), when the run was given
    # some, and what the run concluded from them and from its judges (absent in older reports).
    labels: dict[str, dict[str, float]] = Field(default_factory=dict)
    estimates: dict[str, PPIEstimate] = Field(default_factory=dict)  # per judge metric
    jury: dict[str, JuryAgreement] = Field(default_factory=dict)  # per jury-judged rubric
    audit: dict[str, RubricAudit] = Field(default_factory=dict)  # per judge metric
    warnings: list[ReportWarning] = Field(default_factory=list)
    # Human vs judge chunk grades, when labels graded the chunks of retrieval metrics computed
    # from judge grades (docs/judge-estimates.md); left out otherwise, so a report is as before.
    grade_confusion: GradeConfusion | None = Field(default=None, exclude_if=lambda v: v is None)
    # Retrieval metrics from judge grades: what the review mode needs to take people's chunk
    # grades (left out otherwise).
    chunk_grading: ChunkGrading | None = Field(default=None, exclude_if=lambda v: v is None)
    # Per value of the run's group_by keys (docs/segments.md); left out when it asked for none,
    # so a report without segments is as before.
    segments: list[Segment] = Field(default_factory=list, exclude_if=lambda v: not v)
    # What each step's model calls cost (``evaluators[i] (type)``, ``target``), for the steps
    # whose cost is known (docs/prices.md); left out when none is, so such a report is as before.
    usage_by_evaluator: dict[str, Usage] = Field(default_factory=dict, exclude_if=lambda v: not v)
    _index: tuple[int, int, SampleIndex] | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        # The sample index is a cache built on first use, not part of what the report says.
        if not isinstance(other, Report):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic leaves it

    @field_serializer("samples", mode="wrap")
    def _samples(
        self, value: Any, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        if isinstance(value, SampleFile):  # every row, read from the file
            return [r.model_dump(mode=info.mode) for r in value]
        return handler(value)

    @field_validator("signatures", mode="before")
    @classmethod
    def _legacy_signatures(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {m: Signature.parse(s) if isinstance(s, str) else s for m, s in value.items()}
        return value

    @model_validator(mode="before")
    @classmethod
    def _legacy_confidence(cls, data: Any) -> Any:
        if isinstance(data, dict) and "confidence" not in data:
            config = data.get("config")
            boot = config.get("bootstrap") if isinstance(config, dict) else None
            if isinstance(boot, dict) and "confidence" in boot:
                data = {**data, "confidence": boot["confidence"]}
        return data

    @model_validator(mode="after")
    def _legacy_restated(self) -> Report:
        # A report written before restated metrics said so in their summary marks them only
        # with the signature option ``given`` (``faithfulness_answered``): read it there, once.
        for metric, summary in self.summary.items():
            given = self.signatures.get(metric, Signature(name=metric)).options.get("given")
            if summary.restates is None and given is not None and summary.normalises is None:
                restated = Restatement(metric=metric.removesuffix(f"_{given}"), given=given)
                summary.restates = restated
        return self

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read a report.json, or the report.json inside a run folder."""
        path = Path(path)
        if path.is_dir():
            path = path / "report.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and "samples_file" in data and "samples" not in data:
                data["samples"] = SampleFile(path.parent / str(data.pop("samples_file")))
            return cls.model_validate(data)
        except FileNotFoundError as exc:
            raise DataError(f"{exc.filename or path}: file not found") from None
        except ValueError as exc:
            raise DataError(f"{path}: not a rag-judge report.json ({exc})") from None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False)

    def index(self) -> SampleIndex:
        """Ids, score columns, failures and verdict uncertainty of every sample, built once
        (a list that changes length is indexed again)."""
        key = (id(self.samples), len(self.samples))
        if self._index is None or self._index[:2] != key:
            self._index = (*key, index_of(self.samples))
        return self._index[2]

    def ids(self) -> list[str]:
        return list(self.index().ids)

    def column(self, metric: str) -> dict[str, float | None]:
        """Sample id -> value of ``metric`` (None where it failed or is absent). A metric
        scored per turn or step (``turn.X``) maps each unit's id (``c1#t2``: the conversation
        and the turn index, and the step's) to its value, over the units that scored it."""
        if metric.startswith(UNIT_PREFIXES):
            return {u.id: u.scores[metric] for _, u in self.units(metric)}
        index = self.index()
        values, present = index.column(metric).tolist(), index.present(metric).tolist()
        return {sid: v if p else None for sid, v, p in zip(index.ids, values, present, strict=True)}

    def units(self, metric: str | None = None) -> Iterator[tuple[str, UnitResult]]:
        """Each unit row with its conversation's id, in order; only those that scored
        ``metric`` when it is given."""
        for result in self.samples:
            for unit in result.units:
                if metric is None or metric in unit.scores:
                    yield result.id, unit

    def clusters(self, metric: str) -> dict[str, str] | None:
        """For a metric scored per unit, each unit's id -> its conversation's id (what a
        bootstrap of it resamples); None for a metric scored per sample."""
        if not metric.startswith(UNIT_PREFIXES):
            return None
        return {u.id: conversation for conversation, u in self.units(metric)}

    def judge_rubrics(self) -> list[str]:
        """The judge metrics on their own scale: 1-5 rubrics and the grounding evaluator's
        claim metrics and rates (not a rubric's normalised twin)."""
        return [
            m
            for m, s in self.summary.items()
            if s.kind is MetricKind.JUDGE and s.normalises is None
        ]

    def judge_scored_nothing(self) -> bool:
        """Whether the report has judge metrics and not one value among them: the judge failed
        outright (a dead server errs on every call), so no judge-derived number may pass."""
        rubrics = self.judge_rubrics()
        return bool(rubrics) and not any(self.summary[m].n for m in rubrics)

    def graded_rubrics(self) -> list[str]:
        """The judge rubrics graded 1-5 on every sample they judged (what a person can label
        and the audit reads): not the 0/1 rates and claim counts of ``judge_rubrics``, nor a
        rubric restated over a subset of the samples (``faithfulness_answered``)."""
        out = []
        for metric in self.judge_rubrics():
            summary = self.summary[metric]
            if tuple(summary.scale) == (1.0, 5.0) and summary.restates is None:
                out.append(metric)
        return out

    def stub_judged(self) -> dict[str, list[str]]:
        """The judge rubrics scored by the stub provider, by how it scored them (see
        ``stub_method``); empty when a model judged every rubric."""
        out: dict[str, list[str]] = {}
        for metric in self.judge_rubrics():
            method = self.stub_method(metric)
            if method is not None:
                out.setdefault(method, []).append(metric)
        return out

    def stub_method(self, metric: str) -> str | None:
        """How the stub judge scored ``metric`` ("a fixed score of 5", "a lexical word-overlap
        heuristic"; for a jury, each stub judge's way, joined), or None when no stub scored it."""
        return stub_method(self.signatures.get(metric))


def stub_method(sig: Signature | None) -> str | None:
    """How the stub judge scores a metric of signature ``sig`` (see ``Report.stub_method``),
    or None when no stub does; known from a signature before a run as after it."""
    stubs = [j.model for j in (sig.judged_by if sig else ()) if j.stub]
    if not stubs:
        return None
    return " and ".join(dict.fromkeys(_stub_way(m) for m in stubs))


def _stub_way(model: str) -> str:
    if model.startswith("stub-fixed-"):
        return f"a fixed score of {model.removeprefix('stub-fixed-')}"
    if model == "stub-lexical-support":
        return "a lexical word-overlap heuristic"
    return f"a scripted stub ({model})"
