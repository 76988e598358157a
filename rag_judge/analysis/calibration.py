"""Judge calibration: agreement between the judge's 1–5 scores and human labels.

Per rubric, over the samples with both a human label and a judge score (``n``):

- **Spearman ρ**: Pearson correlation of the two rank vectors, ties given their average rank;
- **quadratic-weighted Cohen's κ** over the categories 1..5: 1 − Σ w·O / Σ w·E with
  w = (i − j)² / 16, O the observed and E the chance (outer product of marginals) table;
- **Krippendorff's α**, interval metric, two coders, no missing value within a pair:
  1 − D_o / D_e from the coincidence matrix;
- **exact** and **within ±1** agreement rates.

A weighted (G-Eval, non-integer) judge score is rounded half up (3.5 → 4) for κ and both
agreement rates; ρ and α use it as is. A statistic that is undefined (n < 2, or no variance
on a side, so that its denominator is 0) is None.

A judge rubric is a judge metric on its own 1-5 scale (:meth:`Report.judge_rubrics`); its
normalised twin is refused, and so is a label outside 1-5. A label file may also hold 0/1 labels
of a pass/fail judge metric (``answer_rate``): those have no agreement statistics here, only the
bias-corrected estimates of :mod:`rag_judge.analysis.ppi`. :func:`agreement_table` is the
agreement's table; ``rag_judge.cli.calibrate`` renders it beside the estimates'.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.data.jsonl import json_lines, read_text
from rag_judge.data.readers import load_dataset
from rag_judge.errors import DataError
from rag_judge.messages import describe_value
from rag_judge.report.format import Column, Table, num
from rag_judge.report.model import MetricKind, Report
from rag_judge.stats.agreement import krippendorff_alpha_interval as alpha_interval

__all__ = [
    "CalibrationResult",
    "agreement_rubrics",
    "agreement_table",
    "calibrate",
    "krippendorff_alpha_interval",
    "labels_from_dataset",
    "load_labels",
    "quadratic_kappa",
    "spearman",
]

Labels = dict[str, dict[str, int]]
_LOW, _HIGH = 1, 5
_PASS_FAIL = (0, 1)  # a label file also holds 0/1 labels of pass/fail metrics


@dataclass(frozen=True)
class CalibrationResult:
    rubric: str
    n: int  # samples with both a label and a judge score
    spearman: float | None
    kappa: float | None  # quadratic-weighted Cohen's kappa
    alpha: float | None  # Krippendorff's alpha, interval metric
    exact: float | None
    within_one: float | None
    unpaired: int  # labelled samples missing from the report or left unscored by the judge


# ---- statistics (pure numpy) ------------------------------------------------------------------


def average_ranks(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks 1..n, each tie group given the mean of the ranks it spans."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], len(x)] - 1
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = (first[group] + last[group]) / 2.0 + 1.0
    return ranks


def spearman(x: NDArray[np.float64], y: NDArray[np.float64]) -> float | None:
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x) - (len(x) + 1) / 2, average_ranks(y) - (len(y) + 1) / 2
    denom = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return None if denom == 0 else float(rx @ ry) / denom


def quadratic_kappa(
    a: NDArray[np.int64], b: NDArray[np.int64], low: int = 1, high: int = 5
) -> float | None:
    """Cohen's kappa with weights (i − j)² over the categories low..high."""
    if len(a) == 0:
        return None
    k = high - low + 1
    observed = np.zeros((k, k), dtype=np.float64)
    np.add.at(observed, (a - low, b - low), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / len(a)
    cats = np.arange(k, dtype=np.float64)
    weights = (cats[:, None] - cats[None, :]) ** 2
    chance = float((weights * expected).sum())
    return None if chance == 0 else 1.0 - float((weights * observed).sum()) / chance


def krippendorff_alpha_interval(a: NDArray[np.float64], b: NDArray[np.float64]) -> float | None:
    """Two coders, every unit coded by both: with m = 2 values per unit it reduces to
    α = 1 − (N − 1) Σᵤ (aᵤ − bᵤ)² / (N Σᵥ (v − v̄)²), N = 2n pooled values."""
    return alpha_interval(np.column_stack([a, b]).astype(np.float64))


def round_half_up(x: NDArray[np.float64]) -> NDArray[np.int64]:
    return np.floor(x + 0.5).astype(np.int64)


# ---- pairing a report with labels -------------------------------------------------------------


def calibrate(
    report: Report, labels: Mapping[str, Mapping[str, int]], rubrics: Sequence[str] | None = None
) -> dict[str, CalibrationResult]:
    """Agreement per rubric (by default :func:`agreement_rubrics`)."""
    if rubrics is None:
        rubrics = agreement_rubrics(report, labels)
    out: dict[str, CalibrationResult] = {}
    for rubric in rubrics:
        _check_rubric(report, rubric)
        scores = report.column(rubric)
        human, judge, unpaired = [], [], 0
        for sid, row in labels.items():
            if rubric not in row:
                continue
            score = scores.get(sid)
            if score is None:
                unpaired += 1
                continue
            if not _LOW <= score <= _HIGH:
                raise DataError(
                    f"sample {sid!r}: {rubric} score {score} is outside 1-5; calibrate a 1-5 "
                    "judge rubric (not its normalised twin)"
                )
            if not _LOW <= row[rubric] <= _HIGH:
                raise DataError(
                    f"sample {sid!r}: {rubric} label {row[rubric]} is outside 1-5; agreement "
                    "needs a 1-5 label of a 1-5 judge rubric (0/1 labels are for pass/fail "
                    "metrics such as answer_rate)"
                )
            human.append(float(row[rubric]))
            judge.append(float(score))
        out[rubric] = _agreement(rubric, np.array(human), np.array(judge), unpaired)
    return out


def agreement_table(results: Mapping[str, CalibrationResult]) -> Table:
    """The agreement, a row per rubric."""
    columns = [Column("rubric", "text"), Column("n"), Column("Spearman ρ"), Column("QWK κ")]
    columns += [Column("Krippendorff α"), Column("exact"), Column("within ±1"), Column("unpaired")]
    rows = [
        [r.rubric, str(r.n)]
        + [num(v, ".3f") for v in (r.spearman, r.kappa, r.alpha, r.exact, r.within_one)]
        + [str(r.unpaired)]
        for r in results.values()
    ]
    return Table("Agreement with human labels", columns, rows, anchor="agreement")


def agreement_rubrics(report: Report, labels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The metrics ``labels`` name, sorted, less the report's judge metrics that are not on a
    1-5 scale (0/1 rates, claim counts: bias-corrected estimates only). The rest are checked
    by :func:`calibrate`, which names what is wrong with each."""
    named = sorted({r for row in labels.values() for r in row})
    judged = set(report.judge_rubrics())
    return [r for r in named if r not in judged or tuple(report.summary[r].scale) == (1.0, 5.0)]


def _check_rubric(report: Report, rubric: str) -> None:
    summary = report.summary.get(rubric)
    if summary is None:
        raise DataError(
            f"rubric {rubric!r} of the labels is not in the report; its judge rubrics: "
            f"{', '.join(report.judge_rubrics()) or 'none'}"
        )
    if summary.kind not in (MetricKind.JUDGE, MetricKind.CUSTOM):
        raise DataError(
            f"{rubric!r} is a {summary.kind.value} metric, not a judge rubric; the report's "
            f"judge rubrics: {', '.join(report.judge_rubrics()) or 'none'}"
        )
    if summary.normalises is not None:
        raise DataError(
            f"{rubric!r} restates the judge rubric {summary.normalises!r} on [0, 1]; label and "
            f"calibrate {summary.normalises!r} on its 1-5 scale"
        )


def _agreement(
    rubric: str, human: NDArray[np.float64], judge: NDArray[np.float64], unpaired: int
) -> CalibrationResult:
    n = len(human)
    h, j = human.astype(np.int64), round_half_up(judge)
    gap = np.abs(h - j)
    return CalibrationResult(
        rubric=rubric,
        n=n,
        spearman=spearman(human, judge),
        kappa=quadratic_kappa(h, j, _LOW, _HIGH),
        alpha=krippendorff_alpha_interval(human, judge),
        exact=float((gap == 0).mean()) if n else None,
        within_one=float((gap <= 1).mean()) if n else None,
        unpaired=unpaired,
    )


# ---- label files ------------------------------------------------------------------------------


def load_labels(path: str | Path) -> Labels:
    """Human labels: JSONL (``{"id": "q1", "faithfulness": 4}`` a line) or CSV (an ``id``
    column, one column per rubric): an integer 1-5 for a rubric, 0 or 1 for a pass/fail metric
    (``answer_rate``). An empty cell or a null is "not labelled"."""
    path = Path(path)
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        rows = _jsonl_rows(text, path)
    elif suffix == ".csv":
        rows = _csv_rows(text, path)
    else:
        raise DataError(f"{path}: unknown label file type {suffix!r}; use .jsonl or .csv")
    labels: Labels = {}
    line_of: dict[str, int] = {}
    for lineno, row in rows:
        try:
            sid, parsed = _parse_row(row, text=suffix == ".csv")
            if sid in line_of:
                raise DataError(f"field 'id': {sid!r} already labelled on line {line_of[sid]}")
        except DataError as exc:
            raise DataError(f"{path}:{lineno}: {exc}") from None
        line_of[sid] = lineno
        labels[sid] = parsed
    if not labels:
        raise DataError(f"{path}: contains no labels")
    return labels


def _jsonl_rows(text: str, path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for lineno, obj in json_lines(text.splitlines()):
        if isinstance(obj, DataError):
            raise DataError(f"{path}:{lineno}: {obj}")
        rows.append((lineno, obj))
    return rows


def _csv_rows(text: str, path: Path) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or "id" not in reader.fieldnames:
        raise DataError(f"{path}:1: the header needs an 'id' column, got {reader.fieldnames}")
    rows = []
    for row in reader:
        if None in row:
            raise DataError(f"{path}:{reader.line_num}: more cells than header columns")
        if any(v.strip() for v in row.values() if v is not None):
            rows.append((reader.line_num, {k: v.strip() if v else None for k, v in row.items()}))
    return rows


def _parse_row(row: dict[str, Any], *, text: bool = False) -> tuple[str, dict[str, int]]:
    """(id, metric -> label) of one row; ``text``: the cells are CSV text, so a label is read
    from a string ("4"), which in JSON is an error (a string where a number belongs)."""
    sid = row.get("id")
    if isinstance(sid, int) and not isinstance(sid, bool):
        sid = str(sid)
    if not isinstance(sid, str) or not sid:
        raise DataError(f"field 'id': expected a non-empty string, got {sid!r}")
    out = {}
    for key, value in row.items():
        # "relevance" holds chunk grades (analysis/relevance_labels.py), not a rubric label.
        if key in ("id", "relevance") or value is None or (text and value == ""):
            continue
        out[key] = _label(key, value, text=text)
    return sid, out


def _label(key: str, value: Any, *, text: bool) -> int:
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and text:
        try:
            number = float(value)
        except ValueError:
            number = None
    elif isinstance(value, str):  # JSON has numbers: "4" is not read as 4
        raise DataError(
            f"field {key!r}: expected a number (a label 1-5; 0 or 1 for a pass/fail metric), "
            f"got {describe_value(value)}"
        )
    if number is None or not number.is_integer() or not min(_PASS_FAIL) <= number <= _HIGH:
        raise DataError(
            f"field {key!r}: {value!r} is not a label 1-5 (an integer; 0 or 1 for a pass/fail "
            "metric)"
        )
    return int(number)


def labels_from_dataset(path: str | Path, column: str) -> Labels:
    """Labels kept in the dataset itself: each sample's ``metadata[column]`` holds
    ``{rubric: 1-5}`` (0/1 for a pass/fail metric); samples without it are unlabelled. Errors
    name file, sample and field."""
    labels: Labels = {}
    for sample in load_dataset(path):
        row = sample.metadata.get(column)
        if row is None:
            continue
        if not isinstance(row, dict):
            raise DataError(
                f"{path}: sample {sample.id!r}: field 'metadata.{column}': expected a mapping "
                f"of rubric -> label, got {type(row).__name__}"
            )
        try:
            labels[sample.id] = _parse_row({**row, "id": sample.id})[1]
        except DataError as exc:
            raise DataError(f"{path}: sample {sample.id!r}: metadata.{column}: {exc}") from None
    if not labels:
        raise DataError(f"{path}: no sample carries labels in metadata.{column}")
    return labels
