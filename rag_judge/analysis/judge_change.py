"""A judge change between two reports: which judge metrics it touches, the refusal that
``compare`` and ``gate`` give by default, and a comparison through a bridge.

A metric is a judge metric when either report's signature names its judges (``judged_by``)
or its summary is of kind ``judge``. Every option of such a signature is about the judge (the
model, the template's hash, the scoring mode, n, the temperature, the judge's seed, a
grounding mode) except the package ``version``, which moves with every release and says
nothing of the judge. Two reports whose signatures differ in one of them measured the metric
on two judges' scales: their difference mixes the system's change with the judge's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.analysis.bridge import Bridge, bridged_difference
from rag_judge.errors import ConfigError
from rag_judge.report.model import MetricKind, Report, Signature
from rag_judge.stats.student import t_coverage

__all__ = [
    "BridgedDiff",
    "JudgeChangeError",
    "bridged_diff",
    "check_judge_change",
    "judge_changes",
    "judge_fields",
]

NOT_ABOUT_THE_JUDGE = frozenset({"version"})


class JudgeChangeError(ConfigError):
    """Two reports' judge metrics were judged differently and nothing bridges them."""


def judge_fields(old: Signature, new: Signature) -> list[tuple[str, str, str]]:
    """(field, old value, new value) for each judge field that differs, in the old's order."""
    keys = [*old.options, *(k for k in new.options if k not in old.options)]
    out = [
        (k, old.options.get(k, "(none)"), new.options.get(k, "(none)"))
        for k in keys
        if k not in NOT_ABOUT_THE_JUDGE and old.options.get(k) != new.options.get(k)
    ]
    if old.judged_by != new.judged_by and not any(k == "judge" for k, _, _ in out):
        out.insert(0, ("judge", _judges(old), _judges(new)))
    return out


def _judges(sig: Signature) -> str:
    return ",".join(j.text + (" (stub)" if j.stub else "") for j in sig.judged_by) or "(none)"


def _is_judged(report: Report, metric: str) -> bool:
    sig = report.signatures.get(metric)
    summary = report.summary.get(metric)
    return bool(sig and sig.judged_by) or (summary is not None and summary.kind is MetricKind.JUDGE)


def judge_changes(
    base: Report, new: Report, metrics: Sequence[str]
) -> dict[str, list[tuple[str, str, str]]]:
    """Each of ``metrics`` that is a judge metric whose judge fields differ between the two
    reports (a report without the metric's signature, written before signatures, is not
    compared), with the fields that differ."""
    out = {}
    for m in metrics:
        old, now = base.signatures.get(m), new.signatures.get(m)
        if old is None or now is None or not (_is_judged(base, m) or _is_judged(new, m)):
            continue
        fields = judge_fields(old, now)
        if fields:
            out[m] = fields
    return out


def describe(metric: str, fields: list[tuple[str, str, str]]) -> str:
    """``faithfulness: judge a/x -> b/y; template 1 -> 2``."""
    return f"{metric}: " + "; ".join(f"{k} {a} -> {b}" for k, a, b in fields)


def check_judge_change(
    base: Report,
    new: Report,
    metrics: Sequence[str],
    *,
    allow: bool = False,
    bridge: Bridge | None = None,
    base_label: str = "BASE",
    new_label: str = "NEW",
) -> list[str]:
    """The metrics of ``metrics`` to compare through ``bridge``. Raises
    :class:`JudgeChangeError` naming every judge metric whose judge changed that the bridge
    does not cover, unless ``allow``; a bridge that does not match both reports' judges is an
    error whatever ``allow`` says."""
    changed = judge_changes(base, new, metrics)
    bridged = [m for m in changed if bridge is not None and m in bridge.rubrics]
    for m in bridged:
        assert bridge is not None
        _check_bridge(bridge, m, base, new, base_label, new_label)
    left = {m: f for m, f in changed.items() if m not in bridged}
    if left and not allow:
        lines = "\n".join(f"  {describe(m, f)}" for m, f in left.items())
        why = "" if bridge is None else " (not in the bridge)"
        raise JudgeChangeError(
            f"{new_label} was judged differently from {base_label}{why}; its judge metrics are "
            f"on another judge's scale:\n{lines}\nbridge the judges (rag-judge bridge "
            f"{base_label} --judge NEW-CONFIG, then --bridge BRIDGE.json), compare other "
            "metrics (--metric), or compare anyway with --allow-judge-change"
        )
    return bridged


def _check_bridge(
    bridge: Bridge, metric: str, base: Report, new: Report, base_label: str, new_label: str
) -> None:
    for side, sig, label in (
        ("old", base.signatures[metric], base_label),
        ("new", new.signatures[metric], new_label),
    ):
        stored = (bridge.old_signatures if side == "old" else bridge.new_signatures).get(metric)
        fields = [] if stored is None else judge_fields(stored, sig)
        if stored is None or fields:
            detail = "no signature" if stored is None else describe(metric, fields)
            raise JudgeChangeError(
                f"the bridge's {side} judge is not {label}'s for {metric} ({detail}): it "
                f"bridges {bridge.old_report} to {bridge.new_config}"
            )
    column = base.column(metric)
    rubric = bridge.rubrics[metric]
    for i, value in zip(rubric.ids, rubric.old):
        if column.get(i) != value:
            raise JudgeChangeError(
                f"the bridge's {metric} of sample {i!r} is {value}, {base_label}'s is "
                f"{column.get(i)}: it was made from another report ({bridge.old_report})"
            )


@dataclass(frozen=True)
class BridgedDiff:
    """NEW − bridged BASE over the paired samples, its interval and two-sided p; ``base_mean``:
    BASE's mean on the new judge's scale; ``note``: how it was bridged, for the tables."""

    diff: float
    base_mean: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    note: str

    def fields(self) -> dict[str, Any]:
        """What it replaces in compare's MetricComparison."""
        return {
            "base_mean": self.base_mean, "diff": self.diff, "ci_low": self.ci_low,
            "ci_high": self.ci_high, "p_value": self.p_value, "p_adjusted": self.p_value,
            "exact": False, "bridged": self.note,
        }  # fmt: skip


def bridged_diff(
    bridge: Bridge, metric: str, base: NDArray[np.float64], new: NDArray[np.float64],
    confidence: float, ids: Sequence[str] | None = None,
) -> BridgedDiff:  # fmt: skip
    """``metric``'s paired scores (BASE's by the old judge, NEW's by the new one, of the samples
    ``ids``) compared through the bridge's cross-fitted map:
    :func:`~rag_judge.analysis.bridge.bridged_difference`."""
    rubric = bridge.rubrics[metric]
    cf = rubric.cross_fit()
    delta = new - cf.predict(base, ids)
    d, s, q = bridged_difference(delta, cf.residuals, confidence)
    diff, se, quantile = float(d), float(s), float(q)
    df = max(len(rubric.old) - 1, 1)
    p = None if se == 0 else 1.0 - t_coverage(abs(diff) / se, df)
    ok = math.isfinite(se)
    note = f"{rubric.mapping} map, n={len(rubric.old)} pairs, seed {bridge.seed}"
    return BridgedDiff(
        diff=diff,
        base_mean=float(new.mean()) - diff,
        ci_low=diff - quantile * se if ok else None,
        ci_high=diff + quantile * se if ok else None,
        p_value=p,
        note=note,
    )
