"""The tables of what a run concluded about its judge numbers: the bias-corrected (PPI)
estimates, the jury's agreement and the judge audit. Each is one :class:`Table`, built here
beside the types it shows (``estimates.py``). report.md, report.html, ``calibrate`` and
``audit`` draw these same tables through ``format.py``; a report without a part has no table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rag_judge.report.estimates import (
    AUDIT_RESAMPLES,
    COLLAPSE_SHARE,
    GradeConfusion,
    JuryAgreement,
    PPIEstimate,
    RubricAudit,
)
from rag_judge.report.format import MISSING, Column, Table, ci_label, interval, num, short
from rag_judge.report.model import Report
from rag_judge.stats.ppi import PPIMethod

__all__ = [
    "AuditSettings",
    "audit_table",
    "confusion_table",
    "interval_method",
    "judge_tables",
    "jury_table",
    "ppi_table",
]


def judge_tables(report: Report) -> list[Table]:
    """The tables of the parts the report has, in the order the page shows them."""
    tables = []
    if report.estimates:
        tables.append(ppi_table(report.estimates))
    if report.grade_confusion is not None:
        tables.append(confusion_table(report.grade_confusion))
    if report.jury:
        tables.append(jury_table(report.jury))
    if report.audit:
        tables.append(audit_table(report.audit, AuditSettings.of(report)))
    return tables


# ---- PPI ------------------------------------------------------------------------------------

_METHODS = {
    PPIMethod.T: "intervals: Student's t, small-sample (method t)",
    PPIMethod.PPI_PY: "intervals: normal, as the reference package ppi_py (method ppi_py)",
}
PPI_WHY = (
    "The judge mean's interval only shrinks around what the judge would say: a biased judge "
    "stays biased. The PPI mean corrects it with the labelled slice (a random sample of the "
    "run's samples), and its interval is valid whatever the judge's bias."
)


def interval_method(estimates: Iterable[PPIEstimate]) -> str:
    """How the estimates' intervals were computed, in words."""
    return "; ".join(_METHODS[m] for m in sorted({e.method for e in estimates}))


def ppi_table(estimates: Mapping[str, PPIEstimate]) -> Table:
    """The estimates, a row each. The interval level is the estimates' own (in a run, the
    report's); estimates at different levels say only "CI"."""
    levels = {e.confidence for e in estimates.values()}
    ci = ci_label(levels.pop()) if len(levels) == 1 else "CI"
    columns = [
        Column("metric", "text"),
        Column("labelled"),
        Column("unlabelled"),
        Column(f"judge mean [{ci}]"),
        Column(f"labels mean [{ci}]"),
        Column(f"PPI mean [{ci}]"),
        Column("λ"),
        Column("ESS gain"),
        Column(f"pass rate: judge → RG [{ci}]"),
    ]
    rows = [_ppi_row(e) for e in estimates.values()]
    notes = [_ppi_legend(estimates), PPI_WHY]
    return Table("Bias-corrected judge estimates", columns, rows, notes, anchor="estimates")


def _with_ci(value: float | None, bounds: tuple[float, float] | None) -> str:
    shown = num(value, ".3f")
    if value is None or bounds is None:
        return shown
    return f"{shown} {interval(*bounds, '.3f')}"


def _ppi_row(e: PPIEstimate) -> list[str]:
    rate = e.pass_rate
    return [
        e.metric,
        str(e.n_labelled),
        str(e.n_unlabelled),
        _with_ci(e.judge_mean, e.judge_ci),
        _with_ci(e.labelled_mean, e.labelled_ci),
        _with_ci(e.estimate, e.ci),
        num(e.lam, ".3f"),
        num(e.ess_gain, ".2f"),
        MISSING
        if rate is None
        else f"{num(rate.apparent, '.3f')} → {_with_ci(rate.corrected, rate.ci)}",
    ]


def _ppi_legend(estimates: Mapping[str, PPIEstimate]) -> str:
    rates = [e.pass_rate for e in estimates.values() if e.pass_rate is not None]
    cuts = sorted({r.threshold for r in rates if r.threshold is not None})
    passes = [f"a score ≥ {' or '.join(f'{c:g}' for c in cuts)}"] if cuts else []
    passes += ["a 0/1 metric's 1"] if any(r.threshold is None for r in rates) else []
    return (
        "PPI: the PPI++ mean on the human scale (power-tuned λ); ESS gain: how many labels-only "
        "samples each label is worth beside the judge; RG: the judge's pass rate "
        f"({', '.join(passes) or 'none'}) corrected by Rogan–Gladen; "
        f"{interval_method(estimates.values())}"
    )


def confusion_table(confusion: GradeConfusion) -> Table:
    """Human (rows) against judge (columns) chunk grades, 0-3, of the labelled queries."""
    columns = [Column("human ↓ judge →", "text")]
    columns += [Column(f"judge {j}") for j in range(len(confusion.matrix))]
    rows = [[f"human {h}", *(str(n) for n in row)] for h, row in enumerate(confusion.matrix)]
    note = (
        f"The {sum(map(sum, confusion.matrix))} chunks a person graded in "
        f"{confusion.queries} queries, by their grade and the judge's ({confusion.rubric} "
        "1-5 mapped onto 0-3); above the diagonal the judge was more lenient."
    )
    return Table("Chunk grades: human vs judge", columns, rows, [note], anchor="grade-confusion")


# ---- jury -----------------------------------------------------------------------------------

JURY_NOTE = (
    "Krippendorff's α (interval) between the jury's judges over the samples two or more of "
    "them scored; the spread is the judges' standard deviation on a sample (its uncertainty)."
)


def jury_table(jury: Mapping[str, JuryAgreement]) -> Table:
    """The jury's agreement, a row per rubric."""
    columns = [
        Column("rubric", "text"),
        Column("judges", "text"),
        Column("Krippendorff α"),
        Column("units"),
        Column("mean spread"),
        Column("failed", "text"),
    ]
    rows = [
        [
            a.metric,
            ", ".join(a.judges),
            num(a.alpha, ".3f"),
            str(a.units),
            num(a.mean_spread, ".3f"),
            ", ".join(f"{j}: {n}" for j, n in a.failed.items() if n) or "0",
        ]
        for a in jury.values()
    ]
    return Table("Jury agreement", columns, rows, [JURY_NOTE], anchor="jury")


# ---- audit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditSettings:
    """What an audit was computed with, for its table's last note and ``audit``'s JSON."""

    confidence: float
    threshold: float = COLLAPSE_SHARE
    resamples: int = AUDIT_RESAMPLES
    seed: int = 0

    @classmethod
    def of(cls, report: Report) -> AuditSettings:
        """The settings of the run's own audit: the report's level and seed, the defaults."""
        seed = report.config.get("seed")
        return cls(report.confidence, seed=seed if isinstance(seed, int) else 0)

    def footer(self) -> str:
        return (
            "length slope: OLS of the score on the answer's length in words, points per 100 "
            f"words; {ci_label(self.confidence)}: percentile bootstrap, {self.resamples} "
            f"resamples, seed {self.seed}; mode: verdicts rounded half up, COLLAPSED at a share "
            f"≥ {short(self.threshold)}; unscored: unscored / (scored + failed) verdicts"
        )


def audit_table(
    audits: Mapping[str, RubricAudit], settings: AuditSettings, pairwise: RubricAudit | None = None
) -> Table:
    """The audit, a row per rubric; a pairwise run's position consistency is a column where a
    rubric measured it, and a note for ``pairwise`` (``audit --pairwise``)."""
    columns = [
        Column("rubric", "text"),
        Column("n"),
        Column("slope /100w"),
        Column(ci_label(settings.confidence)),
        Column("means by length quartile", "text"),
        Column("mode (share)", "text"),
        Column("unscored"),
        Column("self-preference", "text"),
    ]
    rows = [_audit_row(a) for a in audits.values()]
    if any(a.position_consistency is not None for a in audits.values()):
        columns.append(Column("position consistency"))
        for a, row in zip(audits.values(), rows):
            row.append(num(a.position_consistency, ".3f"))
    notes = [f"length quartiles (words): {m}: {t}" for m, t in _grouped(audits, _quartiles)]
    notes += [
        f"self-preference: {m}: {t}" for m, t in _grouped(audits, lambda a: a.self_preference_note)
    ]
    if pairwise is not None:
        notes.append(pairwise_line(pairwise))
    notes.append(settings.footer())
    return Table("Judge audit", columns, rows, notes, anchor="audit")


def pairwise_line(p: RubricAudit) -> str:
    """A pairwise run's audit in one line."""
    return (
        f"pairwise {p.metric}: position consistency {num(p.position_consistency)} over {p.n} "
        f"scored pairs (unscored {num(p.unscored_rate, '.1%')})"
    )


def _audit_row(a: RubricAudit) -> list[str]:
    ci = interval(*a.length_slope_ci, spec=".3f") if a.length_slope_ci else MISSING
    means = " ".join(num(s.mean, ".2f") for s in a.length_strata) or MISSING
    mode = MISSING
    if a.modal_score is not None:
        mode = f"{short(a.modal_score)} ({num(a.modal_share, '.0%')})"
        mode += " COLLAPSED" if a.collapsed else ""
    prefers = {True: "yes", False: "no", None: "unknown"}[a.self_preference]
    slope = num(a.length_slope, "+.3f")
    return [a.metric, str(a.n), slope, ci, means, mode, num(a.unscored_rate, ".1%"), prefers]


def _grouped(
    audits: Mapping[str, RubricAudit], key: Callable[[RubricAudit], str]
) -> list[tuple[str, str]]:
    """(rubrics, text) pairs, one per distinct ``key(audit)``, rubrics that share it joined."""
    groups: dict[str, list[str]] = {}
    for metric, a in audits.items():
        groups.setdefault(key(a), []).append(metric)
    return [(", ".join(ms), text) for text, ms in groups.items() if text]


def _quartiles(a: RubricAudit) -> str:
    return ", ".join(f"{s.low}-{s.high} (n {s.n})" for s in a.length_strata)
