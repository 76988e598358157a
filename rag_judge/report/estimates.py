"""What a report says about its judge numbers beyond their means, as types: the bias-corrected
(prediction-powered) estimates from a labelled slice, the jury's agreement, and the judge audit.
The run computes them (``rag_judge.analysis``); the renderers and gates read them from here."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from rag_judge.stats.ppi import PPIMethod

__all__ = [
    "AUDIT_RESAMPLES",
    "COLLAPSE_SHARE",
    "ChunkGrading",
    "GradeConfusion",
    "JuryAgreement",
    "LengthStratum",
    "PPIEstimate",
    "ReportWarning",
    "RoganGladen",
    "RubricAudit",
    "WarningKind",
]

Bounds = tuple[float, float]


class RoganGladen(BaseModel):
    """A pass rate corrected for the judge's errors (Rogan & Gladen 1978): the judge's apparent
    pass rate ``apparent`` over every scored sample, its sensitivity and specificity against
    the human labels of the labelled slice, and ``corrected`` = (apparent + spec − 1) /
    (sens + spec − 1), clipped to [0, 1]; None where sens + spec − 1 ≤ 0 (the judge is no
    better than chance) or a class is missing from the labels. ``threshold``: a 1-5 rubric
    passes at a score ≥ it; None for a 0/1 metric."""

    model_config = ConfigDict(frozen=True)

    threshold: float | None = None
    apparent: float | None = None
    sensitivity: float | None = None
    specificity: float | None = None
    corrected: float | None = None
    ci: Bounds | None = None


class PPIEstimate(BaseModel):
    """A judge metric's mean on the human scale, corrected with the labelled slice by
    prediction-powered inference (PPI++, Angelopoulos et al. 2023, power-tuned λ).

    ``judge_mean``/``judge_ci``: the raw judge mean over every scored sample and its classical
    interval (what the judge alone claims). ``labelled_mean``/``labelled_ci``: the human labels
    alone. ``estimate``/``ci``/``se``: PPI++. ``ess``: the effective sample size, the number of
    labels the classical estimate would need for PPI's variance; ``ess_gain`` = ess /
    n_labelled. None where a quantity is undefined (fewer than 2 labelled samples). ``method``:
    how the three intervals were computed (``t``: small-sample, Student's t; ``ppi_py``: the
    reference package's normal intervals; see :mod:`rag_judge.stats.ppi`); each is clipped to
    the metric's scale (a mean cannot leave it)."""

    model_config = ConfigDict(frozen=True)

    metric: str
    confidence: float = 0.95
    # reports written before the field was added have ppi_py's intervals
    method: PPIMethod = PPIMethod.PPI_PY
    n_labelled: int  # samples with both a human label and a judge score
    n_unlabelled: int  # samples with a judge score and no label
    judge_mean: float | None = None
    judge_ci: Bounds | None = None
    labelled_mean: float | None = None
    labelled_ci: Bounds | None = None
    estimate: float | None = None
    ci: Bounds | None = None
    se: float | None = None
    lam: float | None = None  # the power-tuning weight of the judge's predictions, in [0, 1]
    ess: float | None = None
    ess_gain: float | None = None
    pass_rate: RoganGladen | None = None


class GradeConfusion(BaseModel):
    """Human against judge relevance grades of the chunks of the labelled queries (each
    graded chunk once): ``matrix[h][j]`` counts the chunks a person graded h and the judge j,
    both on the 0-3 scale (the judge's 1-5 ``rubric`` verdict mapped onto it)."""

    model_config = ConfigDict(frozen=True)

    rubric: str
    queries: int
    matrix: list[list[int]]


class ChunkGrading(BaseModel):
    """What the review's chunk-grades mode needs of a run whose retrieval metrics come from
    judge grades: the rubric whose per-context verdicts grade the chunks, ``k`` (the deepest
    cut-off of the metrics a top-k grading corrects), whether a query needs every retrieved
    chunk graded (``whole``: a corrected metric such as R@k or NDCG@k reads the whole list), the
    run's seed (the queue's order), and the people's grades the run read (``human``: by sample
    id, by rank)."""

    model_config = ConfigDict(frozen=True)

    rubric: str
    k: int
    whole: bool = False
    seed: int = 0
    human: dict[str, list[int]] = Field(default_factory=dict)


class JuryAgreement(BaseModel):
    """How far a jury's judges agree on one rubric: Krippendorff's α (interval metric) over
    the samples two or more of them scored (``units``), the mean per-sample spread (population
    standard deviation of the judges' scores), and each judge's failed verdicts."""

    model_config = ConfigDict(frozen=True)

    metric: str
    judges: list[str]
    alpha: float | None = None
    units: int = 0
    mean_spread: float | None = None
    failed: dict[str, int] = Field(default_factory=dict)


class LengthStratum(BaseModel):
    """Judge scores of the answers whose length (words) lies in [low, high]."""

    model_config = ConfigDict(frozen=True)

    low: int
    high: int
    n: int
    mean: float | None = None


# The audit's defaults, for the run's audit and ``rag-judge audit`` alike: a rubric is
# collapsed when its modal score has this share or more; its length slope's interval is a
# bootstrap of this many resamples.
COLLAPSE_SHARE = 0.8
AUDIT_RESAMPLES = 1000


class RubricAudit(BaseModel):
    """The judge audit of one rubric: length bias (the OLS slope of score on answer length in
    points per 100 words, with its interval, and the means per length quartile), score
    collapse (the modal score's share; ``collapsed`` when it is at least the audit's
    threshold), the unscored rate, a self-preference flag (the judge's model family is the
    generator's) and, for a pairwise run, position consistency."""

    model_config = ConfigDict(frozen=True)

    metric: str
    n: int
    length_slope: float | None = None
    length_slope_ci: Bounds | None = None
    length_strata: list[LengthStratum] = Field(default_factory=list)
    modal_score: float | None = None
    modal_share: float | None = None
    collapsed: bool = False
    unscored_rate: float | None = None
    self_preference: bool | None = None  # None: the generator's model is not recorded
    self_preference_note: str = ""
    position_consistency: float | None = None


class WarningKind(str, Enum):
    # judged@k fell below the evaluator's min_judged: the labels no longer cover what is
    # retrieved (re-indexed or re-chunked), so the retrieval metrics read unjudged as irrelevant.
    UNJUDGED = "unjudged"
    # fewer labelled samples of a judge metric than the bias-corrected intervals are checked
    # for (analysis.ppi.MIN_LABELS), or (FEW_LABELS_OFF_MODE) a slice that is nearly all one
    # label: no interval method's coverage holds there (docs/judge-estimates.md).
    FEW_LABELS = "few_labels"
    FEW_LABELS_OFF_MODE = "few_labels_off_mode"
    # Labels (the config's ``labels``) of ids that are no sample of the run: left out of the
    # estimates, which a mistyped id or a label file of another dataset would quietly shrink.
    # Its ``metric`` is "labels" (the config key), ``value`` the count of such ids, ``threshold`` 0.
    UNMATCHED_LABELS = "unmatched_labels"
    # executor: ray: a shard's worker died and the shard ran again (its numbers are the last
    # attempt's; the lost attempt's model calls are not in the usage), or died on every attempt
    # and its samples failed (the run failed). Its ``metric`` is the step
    # (``evaluators[1] (judge)``), ``value`` the attempts lost (the samples lost), ``threshold``
    # the ``ray.retries`` allowed.
    SHARD_RERUN = "shard_rerun"
    SHARD_LOST = "shard_lost"
    # A judge that produced no verdict on any sample it was asked about (every call failed, or
    # no reply could be read): its mean, audit and review are empty, which a table alone does
    # not say. Its ``metric`` names the judge's metrics (", "-joined), ``value`` the samples
    # that failed, ``threshold`` 0 (the verdicts it produced).
    JUDGE_FAILED = "judge_failed"
    # The config's ``otel`` export failed (a dead endpoint, a file that cannot be written): the
    # run's numbers stand, but the events did not all arrive. Its ``metric`` is "otel" (the
    # config key), ``value`` the events not exported, ``threshold`` 0.
    OTEL_EXPORT = "otel_export"
    # Human chunk grades (a label line's ``relevance``) that do not cover a query's top k
    # chunks, or name a chunk it did not retrieve: that query is left out of the corrected
    # retrieval metrics. Its ``metric`` is "relevance", ``value`` the queries left out.
    PARTIAL_GRADES = "partial_grades"


class ReportWarning(BaseModel):
    """Something the run found that makes a number read wrong unless it is said beside it."""

    model_config = ConfigDict(frozen=True)

    kind: WarningKind
    metric: str
    value: float
    threshold: float
    message: str
