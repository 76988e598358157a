"""PPI++ means and Rogan–Gladen rates: a seeded coverage simulation, hand-computed cases, the
reference package's formulas transcribed, and invariants."""

from __future__ import annotations

import math
from fractions import Fraction as F
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.errors import ConfigError
from rag_judge.stats import normal_mean_ci, power_tuned_lambda, ppi_mean, rogan_gladen

Z95 = 1.959963984540054

# ---- coverage: a biased judge, 10% labelled --------------------------------------------------

# Measured with the seed below (1,000 datasets): the PPI++ 95% interval covers the true mean in
# 94.2% of them with the small-sample method (t) and 93.6% with ppi_py's normal interval; the
# labels-only interval in 94.8% (t) and 94.5% (normal); the raw judge's in 0.0%. The mean λ is
# 0.653 under both (the estimate is the same) and the mean ESS gain 2.88 (t) and 2.90 (the 100
# labels are worth about 290 beside the judge). test_ppi_coverage.py varies the label count.
PPI_COVERAGE, CLASSICAL_COVERAGE, RAW_COVERAGE = (
    {"t": 0.942, "ppi_py": 0.936},
    {"t": 0.948, "ppi_py": 0.945},
    0.0,
)


@pytest.mark.parametrize("method", ["t", "ppi_py"])
def test_ppi_covers_the_truth_where_a_biased_judge_does_not(method: str) -> None:
    rng = np.random.default_rng(2023)
    datasets, size, labelled = 1000, 1000, 100
    p = np.array([0.10, 0.15, 0.25, 0.30, 0.20])  # the human labels' distribution on 1..5
    truth = float(np.arange(1, 6) @ p)  # 3.35
    y = rng.choice(np.arange(1.0, 6.0), size=(datasets, size), p=p)
    f = y + 0.8 + rng.normal(0.0, 0.75, size=(datasets, size))  # lenient by 0.8, noisy
    ppi = classical = raw = 0
    lams, gains = [], []
    for d in range(datasets):  # the first 10% of each (iid) dataset is the labelled slice
        r = ppi_mean(y[d, :labelled], f[d, :labelled], f[d, labelled:], method=method)
        assert r.ci_low is not None and r.ci_high is not None
        assert r.classical_ci_low is not None and r.classical_ci_high is not None
        ppi += r.ci_low <= truth <= r.ci_high
        classical += r.classical_ci_low <= truth <= r.classical_ci_high
        judge = normal_mean_ci(f[d])
        assert judge.low is not None and judge.high is not None
        raw += judge.low <= truth <= judge.high
        lams.append(r.lam)
        gains.append(r.ess_gain)
    assert (ppi / datasets, classical / datasets, raw / datasets) == (
        PPI_COVERAGE[method],
        CLASSICAL_COVERAGE[method],
        RAW_COVERAGE,
    )
    assert ppi / datasets >= 0.93 and raw / datasets < 0.10
    assert np.mean(lams) == pytest.approx(0.653, abs=5e-4)
    assert np.mean(gains) == pytest.approx({"t": 2.88, "ppi_py": 2.90}[method], abs=5e-3)


# ---- a hand-computed case --------------------------------------------------------------------


def test_a_small_case_by_hand() -> None:
    # y = 4 2 5 3 (mean 7/2), f on them = 5 3 5 4 (mean 17/4), f unlabelled = 4 5 3 4 5 3 (mean 4).
    # Cov(y, f), ddof 0: deviations (1/2, -3/2, 3/2, -1/2) · (3/4, -5/4, 3/4, -1/4) / 4 = 7/8.
    # Every f (10 values, sum 41, sum of squares 175): Var ddof 1 = (175 - 41²/10) / 9 = 23/30.
    # λ = (7/8) / ((1 + 4/6) · 23/30) = 63/92.
    lam = F(7, 8) / ((1 + F(4, 6)) * F(23, 30))
    assert lam == F(63, 92)
    # θ = λ·4 + 7/2 − λ·17/4
    theta = lam * 4 + F(7, 2) - lam * F(17, 4)
    assert theta == F(1225, 368)
    # Var(y) = 5/4, Var(f_lab) = 11/16, Var(f_unl) = 2/3 (all ddof 0):
    # se² = λ²·(2/3)/6 + (5/4 − 2λ·7/8 + λ²·11/16)/4
    var = lam**2 * F(2, 3) / 6 + (F(5, 4) - 2 * lam * F(7, 8) + lam**2 * F(11, 16)) / 4
    se = math.sqrt(var)
    r = ppi_mean([4, 2, 5, 3], [5, 3, 5, 4], [4, 5, 3, 4, 5, 3], method="ppi_py")
    assert r.lam == pytest.approx(63 / 92, abs=1e-15)
    assert r.estimate == pytest.approx(1225 / 368, abs=1e-14)
    assert r.se == pytest.approx(se, abs=1e-14)
    assert (r.ci_low, r.ci_high) == (
        pytest.approx(1225 / 368 - Z95 * se, abs=1e-13),
        pytest.approx(1225 / 368 + Z95 * se, abs=1e-13),
    )
    assert (r.n_labelled, r.n_unlabelled) == (4, 6)
    # labels alone: 7/2, se = √(5/4) / 2; ESS = (5/4) / se², its gain ESS / 4
    assert r.classical_mean == 3.5 and r.classical_se == pytest.approx(math.sqrt(5 / 16))
    assert r.ess == pytest.approx(float(F(5, 4) / var), abs=1e-12)
    assert r.ess_gain == pytest.approx(float(F(5, 4) / var / 4), abs=1e-12)
    assert float(var) < 5 / 16  # the judge helps: PPI's se is below the labels-only se


def test_the_small_sample_interval_by_hand() -> None:
    # The case above with method t: the same λ and estimate. λ was fitted to the labels, so the
    # rectifier's variance divides by n − 2 = 2: Σ(r − r̄)² = 4·(5/4 − 2λ·7/8 + λ²·11/16) (its
    # ddof-0 variance times n); the judge's variance is that of every f, ddof 1: 23/30, over N = 6.
    lam = F(63, 92)
    ss = 4 * (F(5, 4) - 2 * lam * F(7, 8) + lam**2 * F(11, 16))
    var = ss / 2 / 4 + lam**2 * F(23, 30) / 6
    se = math.sqrt(var)
    t2 = 0.95 * math.sqrt(2 / (1 - 0.95**2))  # t with 2 df: P(|T| ≤ t) = t / √(2 + t²)
    r = ppi_mean([4, 2, 5, 3], [5, 3, 5, 4], [4, 5, 3, 4, 5, 3])
    assert r.lam == pytest.approx(63 / 92, abs=1e-15)
    assert r.estimate == pytest.approx(1225 / 368, abs=1e-14)
    assert r.se == pytest.approx(se, abs=1e-14)
    assert (r.ci_low, r.ci_high) == (
        pytest.approx(1225 / 368 - t2 * se, abs=1e-12),
        pytest.approx(1225 / 368 + t2 * se, abs=1e-12),
    )
    # labels alone: Var (ddof 1) 5/3, se √(5/3 / 4), t with 3 df (3.182446305284263)
    assert r.classical_se == pytest.approx(math.sqrt(5 / 12), abs=1e-15)
    assert r.classical_ci_high == pytest.approx(3.5 + 3.182446305284263 * math.sqrt(5 / 12))
    assert r.ess == pytest.approx(float(F(5, 3) / var), abs=1e-12)
    # λ fixed: nothing fitted beyond the mean, n − 1 = 3 degrees of freedom; λ = 0 is the t
    # interval of the labels alone
    plain = ppi_mean([4, 2, 5, 3], [5, 3, 5, 4], [4, 5, 3, 4, 5, 3], lam=1.0)
    assert plain.se == pytest.approx(math.sqrt(1 / 4 / 4 + 23 / 30 / 6))  # Var(y − f) ddof 1
    assert plain.ci_high == pytest.approx(4 + 3.5 - 4.25 + 3.182446305284263 * plain.se)
    zero = ppi_mean([4, 2, 5, 3], [5, 3, 5, 4], [4, 5, 3, 4, 5, 3], lam=0.0)
    assert (zero.ci_low, zero.ci_high) == (r.classical_ci_low, r.classical_ci_high)
    # two labels: fitting λ would leave no degree of freedom, so λ is 0 (the labels' interval)
    two = ppi_mean([4, 2], [5, 3], [4, 5, 3])
    assert (two.lam, two.estimate, two.se) == (0.0, 3.0, two.classical_se)
    assert ppi_mean([4, 2], [5, 3], [4, 5, 3], method="ppi_py").lam == pytest.approx(0.6)


def test_fixed_lambda_and_the_degenerate_cases() -> None:
    plain = ppi_mean([4, 2, 5, 3], [5, 3, 5, 4], [4, 5, 3, 4, 5, 3], lam=1.0, method="ppi_py")
    assert plain.estimate == pytest.approx(4 + 3.5 - 4.25)  # plain PPI: mean f + mean(y − f)
    assert plain.se == pytest.approx(math.sqrt(2 / 3 / 6 + 0.1875 / 4))  # Var(y − f) = 3/16
    # no unlabelled sample: nothing to borrow, λ = 0 and the labels-only numbers
    alone = ppi_mean([4, 2, 5, 3], [5, 3, 5, 4], [], lam=1.0)
    assert (alone.lam, alone.estimate, alone.se) == (0.0, 3.5, alone.classical_se)
    # a constant judge: λ = 0; constant labels and judge: se 0, ESS undefined
    assert power_tuned_lambda([1, 5], [3, 3], [3, 3, 3]) == 0.0
    flat = ppi_mean([4, 4, 4], [4, 4, 4], [4, 4])
    assert (flat.estimate, flat.se, flat.ci_low, flat.ess, flat.ess_gain) == (4, 0, 4, None, None)
    # fewer than two labels: no PPI, the one label's mean alone
    one = ppi_mean([5], [4], [4, 3])
    assert (one.estimate, one.se, one.lam, one.ess) == (None, None, None, None)
    assert (one.classical_mean, one.classical_se, one.n_labelled, one.n_unlabelled) == (
        5,
        None,
        1,
        2,
    )
    assert ppi_mean([], [], [3.0]).classical_mean is None


def test_bad_input_is_named() -> None:
    with pytest.raises(
        ConfigError, match=r"confidence must be between 0 and 1 \(exclusive\), got 1"
    ):
        ppi_mean([1, 2], [1, 2], [3], confidence=1)
    with pytest.raises(ConfigError, match=r"lam must be a number in \[0, 1\], got 1.5"):
        ppi_mean([1, 2], [1, 2], [3], lam=1.5)
    with pytest.raises(ValueError, match=r"2 labels y_labelled for 3 judge scores f_labelled"):
        ppi_mean([1, 2], [1, 2, 3], [3])
    with pytest.raises(ValueError, match=r"f_unlabelled: every value must be finite"):
        ppi_mean([1, 2], [1, 2], [math.nan])


# ---- the reference package's formulas --------------------------------------------------------


def ppi_py_mean_ci(
    y: np.ndarray, yhat: np.ndarray, yhat_unl: np.ndarray, alpha: float
) -> tuple[float, float, float]:
    """ppi_py's ``ppi_mean_ci`` with ``lam=None`` (ppi_py/ppi.py, github.com/aangelopoulos/
    ppi_py), transcribed for one dimension: λ from ``_calc_lam_glm`` (clip=True) on the
    gradients of the squared loss at the plain-PPI estimate, then a z interval. (λ, low, high)."""
    n, big_n = len(y), len(yhat_unl)
    theta1 = yhat_unl.mean() + (y - yhat).mean()
    grads, grads_hat, grads_hat_unl = y - theta1, yhat - theta1, yhat_unl - theta1
    gc, ghc = grads - grads.mean(), grads_hat - grads_hat.mean()
    cov_grads = (1 / n) * (gc @ ghc + ghc @ gc)
    var_grads_hat = np.cov(np.concatenate([grads_hat, grads_hat_unl]))
    lam = float(np.clip(cov_grads / (2 * (1 + n / big_n) * var_grads_hat), 0, 1))
    est = (lam * yhat_unl).mean() + (y - lam * yhat).mean()
    std = math.sqrt(((lam * yhat_unl).std() / math.sqrt(big_n)) ** 2
                    + ((y - lam * yhat).std() / math.sqrt(n)) ** 2)  # fmt: skip
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return lam, est - z * std, est + z * std


labels = st.lists(st.integers(1, 5), min_size=2, max_size=30)
scores = st.lists(st.sampled_from([1, 1.5, 2, 2.25, 3, 3.5, 4, 4.75, 5]), min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(labels, st.data(), scores, st.sampled_from([0.8, 0.9, 0.95]))
def test_matches_the_reference_package(
    y: list[int], data: st.DataObject, unl: list[float], confidence: float
) -> None:
    f = data.draw(st.lists(st.sampled_from([1, 2, 3, 3.5, 4, 5]), min_size=len(y), max_size=len(y)))
    arr = [np.array(v, dtype=np.float64) for v in (y, f, unl)]
    if np.concatenate([arr[1], arr[2]]).var() == 0:
        return  # ppi_py divides by zero there; we take λ = 0
    lam, low, high = ppi_py_mean_ci(*arr, alpha=1 - confidence)
    r = ppi_mean(y, f, unl, confidence=confidence, method="ppi_py")
    assert r.lam == pytest.approx(lam, abs=1e-12)
    assert (r.ci_low, r.ci_high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))


@settings(max_examples=80, deadline=None)
@given(labels, st.data(), st.sampled_from(["t", "ppi_py"]))
def test_invariants(y: list[int], data: st.DataObject, method: str) -> None:
    f = data.draw(st.lists(st.sampled_from([1, 2, 3, 3.5, 4, 5]), min_size=len(y), max_size=len(y)))
    values = st.sampled_from([1, 1.5, 2, 2.25, 3, 3.5, 4, 4.75, 5])
    unl = data.draw(st.lists(values, min_size=len(y), max_size=3 * len(y)))
    r = ppi_mean(y, f, unl, method=method)
    assert r.lam is not None and 0.0 <= r.lam <= 1.0
    if len(y) > 2:  # the methods differ in the interval only (t takes λ = 0 with two labels)
        other = ppi_mean(y, f, unl, method="ppi_py" if method == "t" else "t")
        assert (other.lam, other.estimate) == (r.lam, r.estimate)
    # λ = 0 is the labels-only estimate, exactly
    zero = ppi_mean(y, f, unl, lam=0.0, method=method)
    assert (zero.estimate, zero.se) == (zero.classical_mean, zero.classical_se)
    assert (zero.ci_low, zero.ci_high) == (zero.classical_ci_low, zero.classical_ci_high)
    # A judge that agrees with every label is never worse than the labels alone, with at
    # least as many unlabelled samples as labelled (PPI's setting). The plug-in λ̂ is only
    # first-order optimal: with n > 2N it can overshoot (y = nine 1s and a 2, unlabelled 1
    # and 3: se 0.09523 against 0.09487), so that case is not claimed. With t, a fitted λ costs
    # the rectifier's variance a degree of freedom (n − 2 for n − 1), so the claim is up to
    # that factor: where λ̂ is near 0 (unlabelled scores unlike the labelled ones: y = 2, 2, 3,
    # 3, 3, unlabelled all 1) the labels alone are narrower by it.
    perfect = ppi_mean(y, y, unl, method=method)
    assert perfect.se is not None and perfect.classical_se is not None
    n = len(y)
    dof = math.sqrt((n - 1) / (n - 2)) if method == "t" and n > 2 else 1.0
    assert perfect.se <= perfect.classical_se * dof + 1e-12


def test_a_perfect_judge_can_lose_when_labels_outnumber_the_rest() -> None:
    r = ppi_mean([1] * 9 + [2], [1] * 9 + [2], [1, 3], method="ppi_py")
    assert r.se == pytest.approx(0.0952280162898776, abs=1e-12)
    assert r.classical_se == pytest.approx(0.0948683298050514, abs=1e-12)


# ---- Rogan–Gladen ----------------------------------------------------------------------------


def test_rogan_gladen_by_hand() -> None:
    # 20 scored, 12 passed by the judge: apparent 3/5. Of 8 labelled: 5 passed by a person, 4
    # of them by the judge (sens 4/5); 3 failed by a person, 2 of them by the judge (spec 2/3).
    # corrected = (3/5 + 2/3 − 1) / (4/5 + 2/3 − 1) = (4/15) / (7/15) = 4/7.
    every = [1] * 12 + [0] * 8
    judge = [1, 1, 1, 1, 0, 1, 0, 0]
    human = [1, 1, 1, 1, 1, 0, 0, 0]
    r = rogan_gladen(every, judge, human, seed=3)
    assert (r.apparent, r.sensitivity, r.specificity) == (0.6, 0.8, pytest.approx(2 / 3))
    assert r.corrected == pytest.approx(4 / 7, abs=1e-15)
    assert r.ci_low is not None and r.ci_high is not None
    assert 0.0 <= r.ci_low < 4 / 7 < r.ci_high <= 1.0
    assert rogan_gladen(every, judge, human, seed=3) == r  # seeded
    # corrected above 1 is clipped: apparent 0.95 with sens 0.8, spec 1
    assert rogan_gladen([1] * 19 + [0], [1, 1, 1, 1, 0, 0], [1] * 5 + [0]).corrected == 1.0


def test_rogan_gladen_undefined() -> None:
    chance = rogan_gladen([1, 0, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0])  # sens 1/2, spec 1/2
    assert (chance.sensitivity, chance.specificity, chance.corrected) == (0.5, 0.5, None)
    assert (chance.ci_low, chance.ci_high) == (None, None)
    no_fail = rogan_gladen([1, 0, 1], [1, 0], [1, 1])  # a class absent from the labels
    assert (no_fail.apparent, no_fail.sensitivity, no_fail.specificity) == (2 / 3, 0.5, None)
    assert no_fail.corrected is None
    assert rogan_gladen([], [], []).apparent is None


def test_rogan_gladen_interval_is_the_resampling_bootstrap() -> None:
    """The binomial/multinomial draws resample as drawing indices would: against an explicit
    index bootstrap, same percentile interval up to Monte Carlo error."""
    rng = np.random.default_rng(7)
    every = rng.random(300) < 0.55
    human = rng.random(60) < 0.6
    judge = np.where(rng.random(60) < 0.85, human, ~human)
    r = rogan_gladen(every, judge, human, resamples=20_000, seed=1)
    draws = []
    for _ in range(20_000):
        a = every[rng.integers(0, 300, 300)].mean()
        i = rng.integers(0, 60, 60)
        h, j = human[i], judge[i]
        sens, spec = j[h].mean(), (~j[~h]).mean()
        if sens + spec - 1 > 0:
            draws.append(min(1.0, max(0.0, (a + spec - 1) / (sens + spec - 1))))
    low, high = np.quantile(draws, [0.025, 0.975])
    assert r.ci_low == pytest.approx(low, abs=0.01)
    assert r.ci_high == pytest.approx(high, abs=0.01)
