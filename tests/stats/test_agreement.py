"""Krippendorff's α (interval) for several coders with missing values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge.analysis.calibration import krippendorff_alpha_interval as two_coder_alpha
from rag_judge.stats.agreement import krippendorff_alpha_interval

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 observers x 12 units
# example with missing values; the paper gives α_interval = 0.849.
PAPER = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
).T


def test_the_papers_example() -> None:
    alpha = krippendorff_alpha_interval(PAPER)
    assert alpha == pytest.approx(0.849, abs=5e-4)


def test_by_hand_three_coders() -> None:
    # Units (1, 2, 3) and (2, 2): n = 5 pairable values; unit sums of squares 2 and 0, so
    # D_o = (2*3*2/2 + 0) / 5 = 1.2; pooled mean 2, S = 2, D_e = 2*2/4 = 1; α = 1 - 1.2.
    values = np.array([[1, 2, 3], [2, 2, nan], [5, nan, nan]])
    assert krippendorff_alpha_interval(values) == pytest.approx(-0.2)


def test_undefined_cases() -> None:
    assert krippendorff_alpha_interval(np.array([[1.0, nan], [nan, 2.0]])) is None  # unpairable
    assert krippendorff_alpha_interval(np.array([[3.0, 3.0], [3.0, 3.0]])) is None  # no spread
    with pytest.raises(ValueError, match="units x coders"):
        krippendorff_alpha_interval(np.array([1.0, 2.0]))


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=1, max_size=30))
def test_two_complete_coders_agree_with_the_calibration_formula(
    pairs: list[tuple[int, int]],
) -> None:
    a = np.array([p[0] for p in pairs], dtype=np.float64)
    b = np.array([p[1] for p in pairs], dtype=np.float64)
    many = krippendorff_alpha_interval(np.c_[a, b])
    two = two_coder_alpha(a, b)
    assert (many is None) == (two is None)
    if many is not None and two is not None:
        assert many == pytest.approx(two, abs=1e-12)
