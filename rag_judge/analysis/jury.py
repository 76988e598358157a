"""How far a jury's judges agree, per rubric, from the per-juror verdicts its judgments keep
(``JuryJudgment.jury``): the samples × judges matrix of their scores (NaN where a judge failed),
Krippendorff's α (interval metric) over it, the mean spread of the scores per sample, and each
judge's failed verdicts. One pass over the samples (a list or a ``samples.jsonl`` file), a
column of floats per judge in memory."""

from __future__ import annotations

import math
from array import array

import numpy as np

from rag_judge.report.estimates import JuryAgreement
from rag_judge.report.model import Juror, JuryJudgment, Report
from rag_judge.stats.agreement import krippendorff_alpha_interval

__all__ = ["jury_agreement"]


class _Rubric:
    """One rubric's jury scores so far: a column per judge, in order of appearance."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.columns: list[array[float]] = []
        self.failed: dict[str, int] = {}
        self.rows = 0

    def add(self, jury: list[Juror]) -> None:
        bases: list[str] = []
        for k, verdict in enumerate(jury):
            base = verdict.judge or f"judge {k + 1}"
            copies = bases.count(base)  # two verdicts under one name: each keeps a column
            name = f"{base}#{copies + 1}" if copies else base
            bases.append(base)
            if name not in self.names:  # a judge first seen now had no verdict before
                self.names.append(name)
                self.columns.append(array("d", [math.nan] * self.rows))
                self.failed[name] = 0
            column = self.columns[self.names.index(name)]
            column.append(math.nan if verdict.score is None else verdict.score)
            self.failed[name] += verdict.score is None
        self.rows += 1
        for column in self.columns:  # a judge absent from this verdict gave no value
            if len(column) < self.rows:
                column.append(math.nan)

    def agreement(self, metric: str) -> JuryAgreement:
        matrix = np.column_stack([np.frombuffer(c, dtype=np.float64) for c in self.columns])
        pairable = matrix[(~np.isnan(matrix)).sum(axis=1) >= 2]
        spreads = np.nanstd(pairable, axis=1) if len(pairable) else np.empty(0)
        return JuryAgreement(
            metric=metric,
            judges=list(self.names),
            alpha=krippendorff_alpha_interval(matrix),
            units=len(pairable),
            mean_spread=float(spreads.mean()) if len(spreads) else None,
            failed=dict(self.failed),
        )


def jury_agreement(report: Report) -> dict[str, JuryAgreement]:
    """Per rubric judged by a jury, how far its judges agree: α over the samples two or more
    judges scored (``units``), the mean over those samples of the population standard
    deviation of their scores (``mean_spread``), and each judge's verdicts without a score
    (``failed``). Judges are named by their judgments' ``judge`` (``provider/model``). Empty
    when no rubric was judged by a jury."""
    found: dict[str, _Rubric] = {}
    for result in report.samples:
        for rubric, judgment in result.judgments.items():
            if isinstance(judgment, JuryJudgment) and judgment.jury:
                found.setdefault(rubric, _Rubric()).add(judgment.jury)
    return {rubric: seen.agreement(rubric) for rubric, seen in found.items()}
