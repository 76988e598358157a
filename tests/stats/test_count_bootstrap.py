"""The mean's bootstrap through draw counts (rag_judge/stats/bootstrap.py): each resample's mean
is the column weighted by how often each row was drawn, summed pairwise in row order, over n.
Checked against that definition written out, against the drawn rows' mean where sums are exact,
and for values that are infinite."""

from __future__ import annotations

import numpy as np
import pytest

from rag_judge.stats import bootstrap
from rag_judge.stats.bootstrap import bootstrap_ci, bootstrap_cis, clustered_bootstrap_ci


def _by_definition(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    n = len(values)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    return np.array([(np.bincount(d, minlength=n) * values).sum() / n for d in draws])


def test_each_resample_mean_is_the_count_weighted_pairwise_sum() -> None:
    values = np.random.default_rng(5).normal(size=257)
    boot = _by_definition(values, 400, seed=9)
    alpha = (1.0 - 0.9) / 2.0  # as bootstrap_ci computes it (not exactly 0.05)
    want = tuple(float(q) for q in np.quantile(boot, [alpha, 1.0 - alpha]))
    assert bootstrap_ci(values, resamples=400, confidence=0.9, seed=9) == want


def test_integer_scores_give_the_drawn_rows_mean_bit_for_bit() -> None:
    # Sums of integers are exact in any order: the old gather of the drawn rows agrees exactly.
    scores = np.random.default_rng(2).integers(1, 6, size=1000).astype(np.float64)
    draws = np.random.default_rng(4).integers(0, 1000, size=(300, 1000))
    gathered = scores[draws].mean(axis=1)
    want = tuple(float(q) for q in np.quantile(gathered, [0.025, 0.975]))
    assert bootstrap_ci(scores, resamples=300, seed=4) == want


@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
def test_an_infinite_value_counts_only_where_it_is_drawn() -> None:
    values = np.array([1.0, 2.0, 3.0, np.inf])
    draws = np.random.default_rng(0).integers(0, 4, size=(200, 4))
    finite = np.array([1.0, 2.0, 3.0, 0.0])[draws].mean(axis=1)
    means = np.where((draws == 3).any(axis=1), np.inf, finite)
    assert np.isfinite(means).any() and np.isinf(means).any()  # both kinds of resample occur
    low, high = np.quantile(means, [0.025, 0.975])
    got = bootstrap_ci(values, resamples=200, seed=0)
    # No NaN from inf times a count of 0: the low end is finite, the high end what numpy's
    # quantile makes of infinite resamples (NaN, as before the draw counts).
    assert got[0] == low and np.isfinite(low) and np.array_equal(got[1], high, equal_nan=True)
    clustered = clustered_bootstrap_ci(values, [0, 1, 2, 3], resamples=200, seed=0)
    assert np.array_equal(clustered, got, equal_nan=True)
    both = bootstrap_cis([values, values], resamples=200, seed=0)
    assert np.array_equal(both, [got, got], equal_nan=True)


def test_a_nan_counts_only_where_it_is_drawn() -> None:
    # numpy's quantile turns any NaN resample into a NaN interval, so the resamples themselves
    # are checked: those that missed the NaN keep their mean.
    values = np.array([1.0, 2.0, np.nan, 4.0, 5.0, 6.0, 7.0, 8.0])
    counts = bootstrap._draw_counts(np.random.default_rng(3), 8, 50)
    boot = np.empty((1, 50))
    bootstrap._resampled_means([values], [False], [0], counts, np.empty((50, 8)), boot, 0)
    kept = counts[:, 2] == 0
    assert kept.any() and not kept.all()  # some resamples miss the NaN, some draw it
    want = np.where(kept, (counts * np.nan_to_num(values)).sum(axis=1) / 8, np.nan)
    assert np.array_equal(boot[0], want, equal_nan=True)


def test_a_mean_of_2d_values_is_refused() -> None:
    with pytest.raises(ValueError, match="1-D"):
        bootstrap_ci(np.ones((4, 4)))


def test_the_counts_of_a_chunk_are_each_resample_s_own() -> None:
    rng = np.random.default_rng(1)
    counts = bootstrap._draw_counts(rng, 5, 3)
    draws = np.random.default_rng(1).integers(0, 5, size=(3, 5))
    assert counts.tolist() == [np.bincount(d, minlength=5).tolist() for d in draws]
    assert (counts.sum(axis=1) == 5).all()


def test_the_benchmark_runs_and_finds_the_integer_columns_equal() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bootstrap.py"
    argv = [sys.executable, str(script), "--n", "3000", "--resamples", "30", "--rounds", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(integer columns: 4 of 4)" in done.stdout and "x" in done.stdout
