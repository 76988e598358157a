"""What a run concluded about its judge numbers, as tables of text for report.md and report.html:
the bias-corrected (PPI) estimates, the jury's agreement and the judge audit. Each table is a
heading row and body rows of cells; an absent part of the report gives no table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rag_judge.report._format import MISSING, interval, num
from rag_judge.report.estimates import JuryAgreement, PPIEstimate, RoganGladen, RubricAudit
from rag_judge.report.model import Report
from rag_judge.stats.ppi import PPIMethod

__all__ = ["JudgeTable", "interval_method", "judge_tables"]


@dataclass(frozen=True)
class JudgeTable:
    anchor: str  # the section's id in the page
    title: str
    note: str  # one or two sentences on how to read it
    head: list[str]
    rows: list[list[str]]
    text: tuple[int, ...] = ()  # the columns of words (left-aligned), beside the first

    def aligned(self) -> list[tuple[str, bool]]:
        """Each column's heading and whether it holds numbers (right-aligned)."""
        return [(h, i > 0 and i not in self.text) for i, h in enumerate(self.head)]


PPI_NOTE = (
    "The raw judge mean estimates what the judge would say, and its interval only shrinks "
    "around that: a biased judge stays biased. PPI++ corrects it with the labelled slice (a "
    "random sample of the run's samples) and its interval is valid whatever the judge's bias; "
    "ESS gain is how many labels each label is worth beside the judge's scores."
)
JURY_NOTE = (
    "Krippendorff's α (interval) between the jury's judges over the samples two or more of "
    "them scored; the spread is the judges' standard deviation on a sample (its uncertainty)."
)
AUDIT_NOTE = (
    "Length slope: OLS of the score on the answer's length, points per 100 words, with a "
    "bootstrap interval (an interval that excludes 0 is a length bias). Mode: the share of "
    "the most common score (collapsed: it says little about the samples). Self-preference: "
    "the judge's model family is the generator's."
)


def judge_tables(report: Report) -> list[JudgeTable]:
    tables = []
    if report.estimates:
        tables.append(_ppi_table(report))
    if report.jury:
        tables.append(_jury_table(report.jury))
    if report.audit:
        tables.append(_audit_table(report.audit))
    return tables


def _ci(bounds: tuple[float, float] | None) -> str:
    return MISSING if bounds is None else interval(*bounds, spec=".3f")


def _pass_rate(rate: RoganGladen | None) -> str:
    if rate is None:
        return MISSING
    at = "" if rate.threshold is None else f" (pass ≥ {rate.threshold:g})"
    return f"{num(rate.apparent, '.3f')} → {num(rate.corrected, '.3f')} {_ci(rate.ci)}{at}"


_METHODS = {
    PPIMethod.T: "intervals: Student's t, small-sample (method t)",
    PPIMethod.PPI_PY: "intervals: normal, as the reference package ppi_py (method ppi_py)",
}


def interval_method(estimates: Iterable[PPIEstimate]) -> str:
    """How the estimates' intervals were computed, in words."""
    return "; ".join(_METHODS[m] for m in sorted({e.method for e in estimates}))


def _ppi_table(report: Report) -> JudgeTable:
    level = f"{report.confidence:.0%}"
    head = [
        "metric",
        "labelled",
        "unlabelled",
        f"judge mean [{level}]",
        f"labels mean [{level}]",
        f"PPI mean [{level}]",
        "λ",
        "ESS gain",
        "pass rate: judge → corrected",
    ]
    rows = [_ppi_row(e) for e in report.estimates.values()]
    method = interval_method(report.estimates.values())
    note = f"{PPI_NOTE} {method[:1].upper()}{method[1:]}."
    return JudgeTable("estimates", "Bias-corrected judge estimates", note, head, rows)


def _ppi_row(e: PPIEstimate) -> list[str]:
    return [
        e.metric,
        str(e.n_labelled),
        str(e.n_unlabelled),
        f"{num(e.judge_mean, '.3f')} {_ci(e.judge_ci)}",
        f"{num(e.labelled_mean, '.3f')} {_ci(e.labelled_ci)}",
        f"{num(e.estimate, '.3f')} {_ci(e.ci)}",
        num(e.lam, ".3f"),
        MISSING if e.ess_gain is None else f"{e.ess_gain:.2f}×",
        _pass_rate(e.pass_rate),
    ]


def _jury_table(jury: dict[str, JuryAgreement]) -> JudgeTable:
    head = ["rubric", "judges", "Krippendorff α", "units", "mean spread", "failed"]
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
    return JudgeTable("jury", "Jury agreement", JURY_NOTE, head, rows, text=(1, 5))


def _audit_table(audit: dict[str, RubricAudit]) -> JudgeTable:
    head = [
        "rubric",
        "n",
        "length slope /100 words",
        "means by length quartile",
        "mode (share)",
        "unscored",
        "self-preference",
    ]
    pairwise = any(a.position_consistency is not None for a in audit.values())
    rows = [_audit_row(a) for a in audit.values()]
    if pairwise:  # a pairwise run's column only
        head.append("position consistency")
        for a, row in zip(audit.values(), rows):
            row.append(num(a.position_consistency, ".3f"))
    return JudgeTable("audit", "Judge audit", AUDIT_NOTE, head, rows, text=(3, 4, 6))


def _audit_row(a: RubricAudit) -> list[str]:
    strata = " · ".join(f"{s.low}–{s.high}w: {num(s.mean, '.2f')}" for s in a.length_strata)
    mode = MISSING
    if a.modal_score is not None and a.modal_share is not None:
        mode = f"{a.modal_score:g} ({a.modal_share:.0%})" + (" collapsed" if a.collapsed else "")
    preference = {True: "yes", False: "no", None: "unknown"}[a.self_preference]
    if a.self_preference_note:
        preference += f": {a.self_preference_note}"
    return [
        a.metric,
        str(a.n),
        f"{num(a.length_slope, '+.3f')} {_ci(a.length_slope_ci)}",
        strata or MISSING,
        mode,
        MISSING if a.unscored_rate is None else f"{a.unscored_rate:.1%}",
        preference,
    ]
