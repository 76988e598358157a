"""Chart geometry for report.html: a metric's scale, its histogram bins, and the coordinates
of the page's SVGs (histogram, mean and CI against k, the summary's CI strip). Numbers only:
the template's SVG macros draw them, escaping any text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rag_judge.report.format import short
from rag_judge.report.model import MetricSummary

__all__ = [
    "RANGE",
    "RUBRIC",
    "UNIT",
    "Bin",
    "Bins",
    "CiBar",
    "Histogram",
    "KChart",
    "Scale",
    "bin_blocks",
    "bin_scores",
    "ci_bar",
    "histogram",
    "k_chart",
]


@dataclass(frozen=True)
class Scale:
    """Where a metric's values are drawn: on [lo, hi], or (``hi`` None) between the smallest
    and the largest value; ``discrete``: one bar per integer lo..hi (a judge's 1-5 rubric)."""

    lo: float
    hi: float | None
    discrete: bool = False


UNIT = Scale(0.0, 1.0)
RUBRIC = Scale(1.0, 5.0, discrete=True)
RANGE = Scale(0.0, None)


@dataclass(frozen=True)
class Bin:
    """Values in [lo, hi) (the last bin includes hi); a discrete bin holds the integer lo."""

    lo: float
    hi: float
    count: int


@dataclass(frozen=True)
class Bins:
    """Histogram of one metric."""

    bins: list[Bin]
    discrete: bool = False

    @property
    def counts(self) -> list[int]:
        return [b.count for b in self.bins]

    @property
    def labels(self) -> list[str]:
        if self.discrete:
            return [short(b.lo) for b in self.bins]
        return [f"{short(b.lo)}–{short(b.hi)}" for b in self.bins]


def bin_scores(values: Sequence[float] | npt.ArrayLike, scale: Scale) -> Bins:
    """One bar per integer of a discrete scale (rounded half up: a context mean of 2.5 counts
    as 3), else ten equal bins over [lo, hi] (the top value in the last), or between the
    minimum and the maximum for an unbounded scale. A value outside a bounded scale (float
    error) is counted in the nearest end bin; NaN and infinite values are not counted. Computed
    with numpy over every value (a page of a million samples bins them in milliseconds)."""
    return bin_blocks(lambda: [values], scale)


def bin_blocks(blocks: Callable[[], Iterable[npt.ArrayLike]], scale: Scale) -> Bins:
    """:func:`bin_scores` over values given a block at a time by ``blocks()`` (called twice
    for an unbounded scale: its minimum and maximum first), so that a column in a file is
    binned without a copy of it; the counts are those of :func:`bin_scores` over them all."""

    def finite() -> Iterator[npt.NDArray[np.float64]]:
        for block in blocks():
            v = np.asarray(block, dtype=float).ravel()
            yield v[np.isfinite(v)]

    if scale.discrete and scale.hi is not None:
        first, last = int(scale.lo), int(scale.hi)
        counts = np.zeros(last - first + 1, dtype=np.int64)
        for v in finite():
            index = np.clip(np.floor(v + 0.5), first, last).astype(np.intp) - first
            counts += np.bincount(index, minlength=last - first + 1)
        return Bins([Bin(first + i, first + i, c) for i, c in enumerate(counts.tolist())],
                    discrete=True)  # fmt: skip
    if scale.hi is not None:
        lo, hi = scale.lo, scale.hi
    else:
        ends = [(float(v.min()), float(v.max())) for v in finite() if v.size]
        lo, hi = (min(e[0] for e in ends), max(e[1] for e in ends)) if ends else (0.0, 1.0)
    span = hi - lo or 1.0  # all values equal: one full bar in the first bin
    width = span / 10
    tens = np.zeros(10, dtype=np.int64)
    for v in finite():
        # (v - lo) * 10 / span, not / width: 0.3 / 0.1 is 2.9999999999999996
        tens += np.bincount(np.clip(np.floor((v - lo) * 10 / span), 0, 9).astype(np.intp),
                            minlength=10)  # fmt: skip
    return Bins([Bin(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(tens.tolist())])


# --- SVG geometry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    count: int


@dataclass(frozen=True)
class _Tick:
    x: float
    text: str
    anchor: str


@dataclass(frozen=True)
class Histogram:
    width: int
    height: int
    left: int
    base: int
    bars: list[_Bar]
    ticks: list[_Tick]


def histogram(bins: Bins, width: int = 240, height: int = 96) -> Histogram:
    """Bars with a tooltip each; the x axis names the range ends (or each discrete score)."""
    top, bottom, left = 6, 18, 4
    plot_h, n = height - top - bottom, len(bins.bins)
    step = (width - 2 * left) / n
    peak = max(bins.counts) or 1
    bars = []
    for i, (count, label) in enumerate(zip(bins.counts, bins.labels)):
        h = plot_h * count / peak
        bars.append(_Bar(left + i * step + 1, top + plot_h - h, step - 2, h, label, count))
    if bins.discrete:
        places = [(left + (i + 0.5) * step, lab) for i, lab in enumerate(bins.labels)]
    else:
        places = [(left, short(bins.bins[0].lo)), (width - left, short(bins.bins[-1].hi))]
    ticks = [_Tick(x, text, _anchor(x, width)) for x, text in places]
    return Histogram(width, height, left, top + plot_h, bars, ticks)


@dataclass(frozen=True)
class _Grid:
    y: float
    value: float


@dataclass(frozen=True)
class _Dot:
    x: float
    y: float
    k: int
    mean: float


@dataclass(frozen=True)
class KChart:
    width: int
    height: int
    left: int
    right: int
    grid: list[_Grid]
    band: str
    line: str
    dots: list[_Dot]


def k_chart(points: Sequence[tuple[int, MetricSummary]], width: int = 260) -> KChart:
    """Mean against k with the CI as a shaded band; y is [0, 1] unless a value leaves it."""
    height, left, right, top, bottom = 150, 34, 12, 10, 22
    means = [(k, s.mean) for k, s in points if s.mean is not None]
    cis = [
        (k, s.ci_low, s.ci_high)
        for k, s in points
        if s.ci_low is not None and s.ci_high is not None
    ]
    ks = [k for k, _ in means]
    ys = [m for _, m in means] + [v for _, lo_, hi_ in cis for v in (lo_, hi_)]
    lo, hi = (0.0, 1.0) if all(0 <= v <= 1 for v in ys) else (min(ys), max(ys))
    span_k = (ks[-1] - ks[0]) or 1

    def px(k: float) -> float:
        return left + (k - ks[0]) / span_k * (width - left - right)

    def py(v: float) -> float:
        return top + (1 - (v - lo) / ((hi - lo) or 1)) * (height - top - bottom)

    upper = [f"{px(k):.1f},{py(h):.1f}" for k, _, h in cis]
    lower = [f"{px(k):.1f},{py(low):.1f}" for k, low, _ in reversed(cis)]
    return KChart(
        width=width,
        height=height,
        left=left,
        right=right,
        grid=[_Grid(py(v), v) for v in (lo, (lo + hi) / 2, hi)],
        band=" ".join(upper + lower),
        line=" ".join(f"{px(k):.1f},{py(m):.1f}" for k, m in means),
        dots=[_Dot(px(k), py(m), k, m) for k, m in means],
    )


@dataclass(frozen=True)
class CiBar:
    mean: float
    ci: tuple[float, float] | None  # x and width of the interval


def ci_bar(s: MetricSummary, scale: Scale) -> CiBar | None:
    """Mean and interval on a 100-wide strip over the scale; none for an unbounded scale.
    Values a hair outside the scale (float error: a BERTScore of 1.0000000213) are clipped
    into it, so the strip is drawn on the scale the metric declares."""
    if s.mean is None or scale.hi is None:
        return None
    lo, hi = scale.lo, scale.hi
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return 2 + 96 * (min(max(v, lo), hi) - lo) / span

    ci = None
    if s.ci_low is not None and s.ci_high is not None:
        ci = (x(s.ci_low), max(x(s.ci_high) - x(s.ci_low), 1))
    return CiBar(x(s.mean), ci)


def _anchor(x: float, width: int) -> str:
    return "start" if x < width * 0.1 else "end" if x > width * 0.9 else "middle"
