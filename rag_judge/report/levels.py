"""The report per level, as tables every renderer draws: the summary split into the metrics
scored per conversation, per turn and per step, and where each conversation degraded.

report.md, report.html and the terminal draw these same tables (``format.py`` draws a table
for each). A report without metrics scored per turn or per step has no levels: each renderer
then draws its summary as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_judge.report.format import MISSING, Column, Table, ci_label, interval, num, short
from rag_judge.report.model import Degradation, Miss, Report, SampleFile, UnitResult
from rag_judge.report.result import LEVELS, Level, level_of

__all__ = [
    "LEVEL_BRIEF",
    "LEVEL_TITLES",
    "DegradedCount",
    "degradation_table",
    "degraded_count",
    "level_groups",
    "level_note",
    "miss_text",
    "summary_rows",
    "unit_tables",
]

LEVEL_TITLES: dict[Level, str] = {
    "conversation": "Per conversation",
    "turn": "Per turn",
    "step": "Per step",
}

# The terminal's short form of :func:`level_note`.
LEVEL_BRIEF: dict[Level, str] = {
    "conversation": "n: samples",
    "turn": "n: turns; the interval resamples conversations",
    "step": "n: retrieval steps; the interval resamples conversations",
}


def level_groups(
    report: Report, metrics: Sequence[str] | None = None
) -> list[tuple[Level, list[str]]]:
    """``metrics`` (default: the summary's) by the level they score, in the order of
    :data:`LEVELS`, each in summary order; empty levels left out. Empty when no metric is
    scored per turn or per step: the report then has one level and no grouping."""
    names = list(report.summary) if metrics is None else list(metrics)
    groups = [(level, [m for m in names if level_of(m) == level]) for level in LEVELS]
    if all(level == "conversation" for level, ms in groups if ms):
        return []
    return [(level, ms) for level, ms in groups if ms]


def level_note(level: Level, confidence: float) -> str:
    """What ``n`` counts at ``level`` and what its interval resamples."""
    label = ci_label(confidence)
    if level == "conversation":
        return (
            "n counts samples: each conversation once, each single-turn sample once. "
            f"The {label} resamples samples."
        )
    what = "turns" if level == "turn" else "retrieval steps"
    return (
        f"n counts {what} (a single-turn sample is one turn of one step). The {label} resamples "
        f"conversations, not {what}: the {what} of one conversation are drawn together."
    )


def summary_rows(report: Report, metrics: Sequence[str]) -> list[list[str]]:
    """The summary's rows for ``metrics``: metric, mean, interval, n, errors, unscored, n/a,
    aggregate (the columns of ``report.md``'s summary table)."""
    rows = []
    for metric in metrics:
        s = report.summary[metric]
        counts = [str(c) for c in (s.n, s.errors, s.unscored, s.not_applicable)]
        rows.append([metric, num(s.mean), interval(s.ci_low, s.ci_high), *counts, s.aggregate])
    return rows


def miss_text(miss: Miss) -> str:
    """A value that fell short, as a line of text: ``turn.mrr 0.5 (>= 0.75)``, or a tool
    call that matched no expected call."""
    if miss.metric == "tool_call":
        return f"tool call {miss.call or MISSING} matched no expected call"
    threshold = f" ({miss.threshold})" if miss.threshold else ""
    return f"{miss.metric} {short(miss.value, 4)}{threshold}"


def degradation_table(report: Report) -> Table | None:
    """A row per failing turn of every conversation: the conversation, the turn, the turn's
    values that missed their thresholds, the first step that fell below its own and how. None
    when no turn failed."""
    rows = [
        [conversation, str(d.turn), "; ".join(miss_text(m) for m in d.misses), *_step_cells(d)]
        for conversation, d in _degradations(report)
    ]
    if not rows:
        return None
    columns = [
        Column("conversation", "text"),
        Column("turn"),
        Column("turn fell short", "text"),
        Column("first step below", "text"),
        Column("step fell short", "text"),
    ]
    notes = [
        "Turns and steps count from 0; a step's number is its place among all its turn's steps, "
        "tool calls included.",
        "No step named: no step of that turn fell below a threshold, so the turn failed on "
        "its own.",
    ]
    return Table("Where conversations degraded", columns, rows, notes, anchor="degraded")


def unit_tables(report: Report, limit: int) -> list[Table]:
    """A table per level scored per unit: a row per turn (or step) of every conversation, in
    report order, with the conversation, the turn (and step) and each of the level's metrics
    (a rubric's normalised twin left out: it restates the rubric). At most ``limit`` rows each;
    report.json holds every unit."""
    out = []
    for level, metrics in level_groups(report):
        if level == "conversation":
            continue
        shown = [m for m in metrics if report.summary[m].normalises is None]
        place = [Column("conversation", "text"), Column("turn")]
        if level == "step":
            place.append(Column("step"))
        rows: list[list[str]] = []
        total = 0
        for conversation, unit in report.units():
            if (unit.step is None) != (level == "turn"):
                continue
            total += 1
            if len(rows) < limit:
                where = [str(unit.turn)] + ([] if unit.step is None else [str(unit.step)])
                rows.append([conversation, *where, *(_unit_cell(unit, m) for m in shown)])
        what = "turn" if level == "turn" else "retrieval step"
        notes = [f"A row per {what}; turns and steps count from 0."]
        if total > len(rows):
            notes.append(f"The first {len(rows)} of {total} rows; report.json holds every one.")
        title = "Turns" if level == "turn" else "Steps"
        columns = [*place, *(Column(m) for m in shown)]
        out.append(Table(title, columns, rows, notes, anchor=f"{level}-values"))
    return out


def _unit_cell(unit: UnitResult, metric: str) -> str:
    """A unit's value of ``metric``, or the kind of failure that left it without one."""
    value = unit.scores.get(metric)
    if value is not None:
        return num(value)
    failure = unit.errors.get(metric)
    return failure.kind.value if failure is not None else MISSING


def _step_cells(d: Degradation) -> list[str]:
    if d.step is None:
        return ["none", MISSING]
    return [f"step {d.step}", "; ".join(miss_text(m) for m in d.step_misses) or MISSING]


def _degradations(report: Report) -> list[tuple[str, Degradation]]:
    if isinstance(report.samples, SampleFile):  # its index has them: no pass over the file
        return list(report.samples.indexed().degraded)
    return [(r.id, d) for r in report.samples for d in r.degraded]


@dataclass(frozen=True)
class DegradedCount:
    """How many samples and turns degraded, of how many scored per unit."""

    samples: int
    turns: int
    steps_named: int  # of those turns, how many named a step below its threshold
    of_samples: int

    def text(self) -> str:
        turns = f"{self.turns} turn{'s' if self.turns != 1 else ''}"
        return (
            f"{self.samples} of {self.of_samples} conversations degraded: {turns} fell short of "
            f"a threshold, {self.steps_named} with a step below its own (report.md: "
            "'Where conversations degraded')"
        )


def degraded_count(report: Report) -> DegradedCount:
    """The samples with a failing turn, the failing turns and those naming a step, out of the
    samples with per-unit rows (single-turn samples count as one-turn conversations)."""
    with_units = [r for r in report.samples if r.units]
    failing = [d for r in with_units for d in r.degraded]
    return DegradedCount(
        samples=sum(1 for r in with_units if r.degraded),
        turns=len(failing),
        steps_named=sum(1 for d in failing if d.step is not None),
        of_samples=len(with_units),
    )
