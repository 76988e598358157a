"""Paired comparison of runs: ``rag-judge compare BASE NEW [NEW ...]``.

Per metric, over the samples both reports scored: the mean difference NEW − BASE, a paired
percentile-bootstrap interval of it and a two-sided sign-flip randomisation test, with an
optional multiple-comparison correction across every (NEW, metric) pair. The statistics are
pure functions over arrays; loading and rendering sit at the end of the module.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError, DataError
from rag_judge.report.model import Report
from rag_judge.stats import CORRECTIONS, EXACT_MAX, adjust_pvalues, bootstrap_ci, sign_flip_pvalue

__all__ = [
    "CompareOptions",
    "Comparison",
    "MetricComparison",
    "apply_correction",
    "compare_pairs",
    "compare_reports",
    "compare_runs",
    "render_markdown",
    "render_table",
]

_CHUNK = 2_000_000  # sign-matrix elements held in memory at once
# Signature fields that describe the report's own CI, not how the metric was computed.
_RUN_FIELDS = ("ci:", "seed:")


@dataclass(frozen=True)
class CompareOptions:
    """How many resamples and sign flips, the CI level and the seed (shared by every metric,
    so that selecting metrics does not change any one metric's numbers)."""

    resamples: int = 10_000
    confidence: float = 0.95
    permutations: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("resamples", "permutations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(
                f"confidence must be between 0 and 1 (exclusive), got {self.confidence!r}"
            )


@dataclass
class MetricComparison:
    """One metric of one NEW against BASE; statistics are None when no pair is scored."""

    n: int
    base_mean: float | None
    new_mean: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    missing: int  # samples in both reports with this metric unscored on either side
    exact: bool = False  # p from full enumeration of the sign flips
    corpus: str | None = None  # the summary's corpus aggregate, when it is not a mean
    signature_differs: bool = False


@dataclass
class Comparison:
    new: str
    only_in_base: int
    only_in_new: int
    metrics: dict[str, MetricComparison] = field(default_factory=dict)
    metrics_only_in_base: list[str] = field(default_factory=list)
    metrics_only_in_new: list[str] = field(default_factory=list)


def compare_pairs(
    base: NDArray[np.float64],
    new: NDArray[np.float64],
    options: CompareOptions,
    missing: int = 0,
) -> MetricComparison:
    """Statistics of paired scores (index-aligned, all present)."""
    n = len(base)
    if n == 0:
        return MetricComparison(0, None, None, None, None, None, None, None, missing)
    d = np.asarray(new, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    o = options
    low, high = bootstrap_ci(d, resamples=o.resamples, confidence=o.confidence, seed=o.seed)
    p, exact = sign_flip_pvalue(d, permutations=o.permutations, seed=o.seed)
    return MetricComparison(
        n=n,
        base_mean=math.fsum(base.tolist()) / n,
        new_mean=math.fsum(new.tolist()) / n,
        diff=math.fsum(d.tolist()) / n,
        ci_low=low,
        ci_high=high,
        p_value=p,
        p_adjusted=p,
        missing=missing,
        exact=exact,
    )


def _metric_names(report: Report) -> list[str]:
    names = dict.fromkeys(report.summary)
    for s in report.samples:
        names.update(dict.fromkeys(s.scores))
    return list(names)


def _scores(report: Report, label: str) -> dict[str, dict[str, float | None]]:
    by_id: dict[str, dict[str, float | None]] = {}
    for s in report.samples:
        if s.id in by_id:
            raise DataError(f"{label}: sample id {s.id!r} appears twice")
        by_id[s.id] = s.scores
    return by_id


def _signature(report: Report, metric: str) -> str | None:
    sig = report.signatures.get(metric)
    if sig is None:
        return None
    return "|".join(p for p in sig.split("|") if not p.startswith(_RUN_FIELDS))


def compare_reports(
    base: Report,
    new: Report,
    options: CompareOptions | None = None,
    *,
    metrics: list[str] | None = None,
    base_label: str = "BASE",
    new_label: str = "NEW",
) -> Comparison:
    """Compare ``new`` with ``base`` on the shared metrics (or ``metrics``), paired by id."""
    options = options or CompareOptions()
    base_names, new_names = _metric_names(base), _metric_names(new)
    shared = [m for m in base_names if m in new_names]
    if metrics:
        for m in metrics:
            if m not in shared:
                where = "in neither report"
                if m in base_names or m in new_names:
                    where = f"only in {base_label if m in base_names else new_label}"
                raise ConfigError(
                    f"metric {m!r} is {where}; metrics in both: {', '.join(shared) or '(none)'}"
                )
        shared = list(dict.fromkeys(metrics))
    b_scores, n_scores = _scores(base, base_label), _scores(new, new_label)
    ids = [i for i in b_scores if i in n_scores]
    out = Comparison(
        new=new_label,
        only_in_base=len(b_scores) - len(ids),
        only_in_new=len(n_scores) - len(ids),
        metrics_only_in_base=[m for m in base_names if m not in new_names],
        metrics_only_in_new=[m for m in new_names if m not in base_names],
    )
    for m in shared:
        pairs = [(b_scores[i].get(m), n_scores[i].get(m)) for i in ids]
        # NaN counts as unscored: it would otherwise poison every mean.
        kept = [(b, v) for b, v in pairs if _finite(b) and _finite(v)]
        arr = np.array(kept, dtype=np.float64).reshape(-1, 2)
        result = compare_pairs(arr[:, 0], arr[:, 1], options, missing=len(pairs) - len(kept))
        aggregates = {r.summary[m].aggregate for r in (base, new) if m in r.summary}
        result.corpus = next((a for a in sorted(aggregates) if a != "mean"), None)
        b_sig, n_sig = _signature(base, m), _signature(new, m)
        result.signature_differs = None not in (b_sig, n_sig) and b_sig != n_sig
        out.metrics[m] = result
    return out


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def apply_correction(comparisons: list[Comparison], method: str) -> None:
    """Adjust every p-value of ``comparisons`` in place, as one family."""
    cells = [mc for c in comparisons for mc in c.metrics.values() if mc.p_value is not None]
    adjusted = adjust_pvalues(np.array([mc.p_value for mc in cells], dtype=np.float64), method)
    for mc, p in zip(cells, adjusted):
        mc.p_adjusted = float(p)


def compare_runs(
    base: str | Path,
    news: list[str | Path],
    options: CompareOptions | None = None,
    *,
    metrics: list[str] | None = None,
    correction: str = "none",
) -> dict[str, Any]:
    """Load the reports, compare each NEW with BASE, correct across all; the JSON-ready dict."""
    if correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")
    options = options or CompareOptions()
    base_report = Report.load(base)
    comparisons = []
    for new in news:
        new_report = Report.load(new)
        comparison = compare_reports(
            base_report,
            new_report,
            options,
            metrics=metrics,
            base_label=str(base),
            new_label=str(new),
        )
        comparisons.append(comparison)
    apply_correction(comparisons, correction)
    return {
        "base": str(base),
        "comparisons": [asdict(c) for c in comparisons],
        **asdict(options),
        "correction": correction,
    }


# ---- rendering ----------------------------------------------------------------------------


def _num(x: float | None, fmt: str = ".4f") -> str:
    return "–" if x is None else format(x, fmt)


def _rows(result: dict[str, Any], comp: dict[str, Any]) -> list[list[str]]:
    conf = f"{result['confidence']:.0%} CI"
    head = ["metric", "n", "base", "new", "diff", conf, "p"]
    adjusted = result["correction"] != "none"
    if adjusted:
        head.append(f"p ({result['correction']})")
    head.append("missing")
    rows = [head]
    for name, mc in comp["metrics"].items():
        flag = "*" if mc["corpus"] or mc["signature_differs"] else ""
        ci = "–" if mc["ci_low"] is None else f"[{mc['ci_low']:+.4f}, {mc['ci_high']:+.4f}]"
        row = [
            name + flag,
            str(mc["n"]),
            _num(mc["base_mean"]),
            _num(mc["new_mean"]),
            _num(mc["diff"], "+.4f"),
            ci,
            _num(mc["p_value"], ".4g"),
        ]
        if adjusted:
            row.append(_num(mc["p_adjusted"], ".4g"))
        row.append(str(mc["missing"]))
        rows.append(row)
    return rows


def _notes(result: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    notes = [
        f"paired samples: only in base {comp['only_in_base']}, only in new {comp['only_in_new']}"
    ]
    for name, mc in comp["metrics"].items():
        if mc["corpus"]:
            notes.append(
                f"{name}*: the report's aggregate is {mc['corpus']}; base/new/diff and the "
                "paired tests use the per-sample (sentence-level) values"
            )
        if mc["signature_differs"]:
            notes.append(f"{name}*: the two reports computed it with different options")
    for side in ("base", "new"):
        if comp[f"metrics_only_in_{side}"]:
            notes.append(f"metrics only in {side}: {', '.join(comp[f'metrics_only_in_{side}'])}")
    return notes


def render_table(result: dict[str, Any]) -> str:
    out: list[str] = []
    for comp in result["comparisons"]:
        rows = _rows(result, comp)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out.append(f"{comp['new']} vs {result['base']}")
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        out += [*_notes(result, comp), ""]
    out.append(_footer(result))
    return "\n".join(out)


def render_markdown(result: dict[str, Any]) -> str:
    out = [f"# Comparison with `{result['base']}`", ""]
    for comp in result["comparisons"]:
        rows = _rows(result, comp)
        out += [f"## `{comp['new']}`", "", "| " + " | ".join(rows[0]) + " |"]
        out.append("|---|" + "---:|" * (len(rows[0]) - 1))
        out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        out += [""] + [f"- {n}" for n in _notes(result, comp)] + [""]
    out.append(_footer(result))
    return "\n".join(out) + "\n"


def _footer(result: dict[str, Any]) -> str:
    return (
        f"diff = mean(new - base) over paired samples; CI: paired bootstrap, "
        f"{result['resamples']} resamples; p: two-sided sign-flip test, "
        f"{result['permutations']} permutations (exact for n <= {EXACT_MAX}); "
        f"correction: {result['correction']}; seed {result['seed']}"
    )


# ---- command line -------------------------------------------------------------------------
