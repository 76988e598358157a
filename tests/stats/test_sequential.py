"""The PrPl-EB confidence sequence (Waudby-Smith & Ramdas 2023, Theorem 2): the formula as the
paper writes it, its time-uniform coverage, its error under optional stopping at a true mean
equal to the threshold (against the naive bootstrap rule), and how soon it decides a real drop.

Every simulation is seeded numpy, vectorised over runs (each test takes about a second)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag_judge.stats.sequential import (
    confidence_sequence,
    decide,
    naive_bootstrap_stop,
    paired_confidence_sequence,
    sequential_stop,
)

ALPHA = 0.05
RUNS = 2000


def reference(x: list[float], alpha: float) -> tuple[float, float]:
    """Theorem 2 after the last value, one step at a time, without the running intersection."""
    mu_prev, s2_prev = 0.5, 0.25
    total = sq = lam_sum = lam_x = penalty = 0.0
    for t, xt in enumerate(x, start=1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (s2_prev * t * math.log(1 + t))), 0.5)
        penalty += 4 * (xt - mu_prev) ** 2 * (-math.log(1 - lam) - lam) / 4
        lam_sum += lam
        lam_x += lam * xt
        total += xt
        mu = (0.5 + total) / (t + 1)
        sq += (xt - mu) ** 2
        mu_prev, s2_prev = mu, (0.25 + sq) / (t + 1)
    half = (math.log(2 / alpha) + penalty) / lam_sum
    return lam_x / lam_sum - half, lam_x / lam_sum + half


def test_the_sequence_is_theorem_2_step_by_step() -> None:
    x = list(np.random.default_rng(3).beta(3, 2, 40))
    lower, upper = confidence_sequence(x, ALPHA)
    for t in (5, 17, 40):
        low, high = reference(x[:t], ALPHA)
        # The running intersection can only be narrower than the step's own interval.
        assert lower[t - 1] >= max(low, 0.0) - 1e-12 and upper[t - 1] <= min(high, 1.0) + 1e-12
    low, high = reference(x, ALPHA)
    assert lower[-1] == pytest.approx(max(np.clip(low, 0, 1), lower[-2]))
    assert upper[-1] == pytest.approx(min(np.clip(high, 0, 1), upper[-2]))


def test_a_known_range_is_mapped_to_the_unit_interval() -> None:
    x = np.random.default_rng(4).integers(1, 6, 50).astype(float)  # a judge's 1-5 scores
    lower, upper = confidence_sequence(x, ALPHA, lo=1.0, hi=5.0)
    unit_lower, unit_upper = confidence_sequence((x - 1) / 4, ALPHA)
    np.testing.assert_allclose(lower, 1 + 4 * unit_lower)
    np.testing.assert_allclose(upper, 1 + 4 * unit_upper)
    with pytest.raises(ValueError, match="outside"):
        confidence_sequence([0.5, 6.0], lo=1.0, hi=5.0)


@pytest.mark.parametrize("draw", ["bernoulli", "beta"])
def test_the_sequence_covers_the_mean_at_every_time_at_once(draw: str) -> None:
    rng = np.random.default_rng(5)
    shape = (RUNS, 500)
    x = (rng.random(shape) < 0.7).astype(float) if draw == "bernoulli" else rng.beta(7, 3, shape)
    lower, upper = confidence_sequence(x, ALPHA)
    ever_missed = ((lower > 0.7) | (upper < 0.7)).any(axis=1).mean()
    assert ever_missed <= ALPHA
    assert (upper[:, -1] - lower[:, -1]).mean() < 0.2  # and it narrows: not vacuous


@pytest.mark.slow  # a simulation: RUNS runs with a naive bootstrap at each look
def test_at_a_mean_equal_to_the_threshold_only_the_naive_rule_errs_beyond_alpha() -> None:
    """Any decision at mean == threshold is wrong. 2,000 runs of 400 Bernoulli(0.7) scores,
    looked at every 20 samples (5% chunks)."""
    rng = np.random.default_rng(6)
    x = (rng.random((RUNS, 400)) < 0.7).astype(float)
    looks = np.arange(20, 401, 20)
    sequential, _ = sequential_stop(x, ">=", 0.7, looks, ALPHA)
    naive, _ = naive_bootstrap_stop(x, ">=", 0.7, looks, ALPHA, resamples=200, seed=1)
    assert (sequential != 0).mean() <= ALPHA  # 0.0065 with this seed
    assert (naive != 0).mean() > 3 * ALPHA  # 0.28 with this seed (docs/sequential.md)


def test_a_three_point_drop_below_the_threshold_fails_at_the_median_within_40_percent() -> None:
    """Scores ~ Beta(4.15, 2.05): mean 0.67, sd 0.18; the gate is >= 0.70; N = 2,000."""
    n = 2000
    x = np.random.default_rng(7).beta(0.67 * 6.2, 0.33 * 6.2, (500, n))
    verdict, at = sequential_stop(x, ">=", 0.70, np.arange(n // 20, n + 1, n // 20), ALPHA)
    assert (verdict == 1).sum() == 0  # never a wrong PASS
    assert (verdict == -1).mean() > 0.95
    assert np.median(at) <= 0.4 * n  # 500 of 2,000 with this seed


@pytest.mark.slow  # a simulation: 400 paired runs of 5,000 verdicts
def test_a_paired_three_point_drop_fails_at_the_median_within_40_percent() -> None:
    """Pass/fail verdicts, base ~ Bernoulli(0.7); the new system loses 8.6% of the passes and
    gains 10% of the fails: mean(new - base) = -0.03. The gate allows no drop; N = 5,000."""
    n, rng = 5000, np.random.default_rng(8)
    base = (rng.random((400, n)) < 0.7).astype(float)
    flip = rng.random((400, n))
    new = np.where(base == 1, flip >= 0.0857, flip < 0.1).astype(float)
    lower, upper = paired_confidence_sequence(new, base, ALPHA)
    looks = np.arange(n // 20, n + 1, n // 20)
    verdict, at = sequential_stop(new - base, ">=", 0.0, looks, ALPHA, lo=-1.0, hi=1.0)
    np.testing.assert_allclose(lower[:, looks[-1] - 1], confidence_sequence(
        new - base, ALPHA, lo=-1.0, hi=1.0)[0][:, -1])  # fmt: skip
    assert (verdict == 1).sum() == 0
    assert np.median(at) <= 0.4 * n  # 1,250 of 5,000 with this seed
    assert upper.shape == new.shape


def test_decide_needs_the_whole_sequence_on_one_side() -> None:
    assert decide(0.61, 0.9, ">=", 0.6) == "pass"
    assert decide(0.2, 0.59, ">=", 0.6) == "fail"
    assert decide(0.6, 0.9, ">=", 0.6) == "undecided"  # touching the bound decides nothing
    assert decide(0.2, 0.59, "<=", 0.6) == "pass"
    assert decide(0.61, 0.9, "<", 0.6) == "fail"
    with pytest.raises(ValueError, match="=="):
        decide(0.1, 0.2, "==", 0.6)
