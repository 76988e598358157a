"""The slope's bootstrap from draw counts (``stats.slopes``): the same resamples as gathering
the drawn rows, the same intervals up to the last digits, single-length resamples dropped
exactly, and one set of draws shared by several responses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.analysis.audit import _slope_cis, slope_ci
from rag_judge.stats import bootstrap, pages
from rag_judge.stats import slopes as slopes_
from rag_judge.stats.slopes import grouped, ols_slopes, slope_cis


def gathered(x: np.ndarray, y: np.ndarray, resamples: int, confidence: float, seed: int):
    """The interval as gathering the drawn rows finds it (the audit's way before counts)."""
    n = len(x)
    xc, yc = x - x.mean(), y - y.mean()
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    slopes = ols_slopes(xc[idx], yc[idx])
    slopes = slopes[~np.isnan(slopes)]
    if not len(slopes):
        return None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(slopes, [alpha, 1 - alpha])
    return float(low), float(high)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=3, max_size=40),
    seed=st.integers(0, 2**32 - 1),
    chunk=st.sampled_from([7, 50, 2_000_000]),
    confidence=st.sampled_from([0.5, 0.9, 0.95]),
)
def test_counts_find_the_gathered_interval(
    lengths: list[int], seed: int, chunk: int, confidence: float
) -> None:
    x = np.array(lengths, dtype=np.float64)
    y = np.random.default_rng(seed).integers(1, 6, len(x)).astype(np.float64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bootstrap, "_CHUNK", chunk)  # chunk boundaries anywhere
        (found,) = slope_cis(x, [y], resamples=300, confidence=confidence, seed=seed)
    expected = gathered(x, y, 300, confidence, seed)
    if expected is None:  # every resample one length (few distinct lengths, few rows)
        assert found is None
    else:
        assert found == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_single_length_resamples_are_dropped_exactly() -> None:
    # 3 answers, 2 of one length: a resample drawing only those has no slope.
    x, y = np.array([10.0, 10.0, 30.0]), np.array([1.0, 2.0, 5.0])
    xc = x - x.mean()
    idx = np.random.default_rng(5).integers(0, 3, size=(1000, 3))
    flat = (xc[idx].min(axis=1) == xc[idx].max(axis=1)).sum()
    assert 100 < flat < 600  # many resamples are single-length
    found = slope_cis(x, [y], resamples=1000, confidence=0.95, seed=5)[0]
    assert found == pytest.approx(gathered(x, y, 1000, 0.95, 5), rel=1e-12)


def test_responses_on_one_regressor_share_the_draws() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(5, 200, 500).astype(np.float64)
    ys = [rng.integers(1, 6, 500).astype(np.float64) for _ in range(3)]
    together = slope_cis(x, ys, resamples=200, confidence=0.95, seed=9, per=100)
    alone = [slope_cis(x, [y], resamples=200, confidence=0.95, seed=9, per=100)[0] for y in ys]
    assert together == alone
    assert slope_ci(x, ys[1], resamples=200, seed=9) == together[1]
    assert slope_cis(x, ys, resamples=0, confidence=0.95, seed=9) == [None] * 3


def test_equal_regressors_are_grouped_in_order() -> None:
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0])
    groups = grouped({"f": a, "c": b, "r": a.copy(), "s": a[:2]})
    assert [(names, x.tolist()) for x, names in groups] == [
        (["f", "r"], [1.0, 2.0, 3.0]),
        (["c"], [1.0, 2.0, 4.0]),
        (["s"], [1.0, 2.0]),
    ]


def test_a_rubric_without_a_slope_leaves_the_others_their_intervals() -> None:
    x = np.array([10.0, 20.0, 30.0, 40.0, 55.0])
    good, bad = np.array([1.0, 2.0, 2.0, 4.0, 5.0]), np.array([1.0, np.nan, 2.0, 3.0, 4.0])
    found = _slope_cis(x, [bad, good], 200, 0.95, 1)
    assert found[0] is None and found[1] == slope_ci(x, good, resamples=200, seed=1)
    assert _slope_cis(np.array([5.0, 5.0, 5.0]), [good[:3]], 200, 0.95, 1) == [None]


def test_moments_kept_in_files_give_the_same_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(1, 60, 3_000).astype(np.float64)
    ys = [rng.integers(1, 6, 3_000).astype(np.float64), rng.random(3_000)]
    kept = slope_cis(x, ys, resamples=150, confidence=0.9, seed=2, per=100.0)
    monkeypatch.setattr(pages, "SPILL_BYTES", 0)  # every moment's column in a file
    mapped: list[bool] = []
    weighed = slopes_._weighed

    def watched(drawn: np.ndarray, column: np.ndarray, buf: np.ndarray) -> np.ndarray:
        mapped.append(isinstance(column, np.memmap))
        return weighed(drawn, column, buf)

    monkeypatch.setattr(slopes_, "_weighed", watched)
    assert slope_cis(x, ys, resamples=150, confidence=0.9, seed=2, per=100.0) == kept
    assert mapped and all(mapped)
    flat = np.full(3_000, 7.0)  # one length: each resample's flat check reads the file
    assert slope_cis(flat, ys, resamples=5, confidence=0.9, seed=2) == [None, None]
