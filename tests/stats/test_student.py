"""Student's t quantile against closed forms and scipy (installed with pytrec-eval-terrier)."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from rag_judge.errors import ConfigError
from rag_judge.stats.student import t_coverage, t_value


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_closed_forms(confidence: float) -> None:
    # 1 df is Cauchy: t = tan(π·c/2); 2 df: P(|T| ≤ t) = t / √(2 + t²), so t = c·√(2 / (1 − c²))
    assert t_value(confidence, 1) == pytest.approx(math.tan(math.pi * confidence / 2), rel=1e-13)
    assert t_value(confidence, 2) == pytest.approx(
        confidence * math.sqrt(2 / (1 - confidence**2)), rel=1e-13
    )


@pytest.mark.parametrize("df", [1, 2, 2.5, 3, 5, 8, 13, 14, 30, 100, 1000])
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_matches_scipy(df: float, confidence: float) -> None:
    assert t_value(confidence, df) == pytest.approx(stats.t.ppf(0.5 + confidence / 2, df), rel=1e-9)
    assert t_coverage(1.7, df) == pytest.approx(2 * stats.t.cdf(1.7, df) - 1, abs=1e-12)


def test_bad_input_is_named() -> None:
    assert t_value(0.95, 14) == pytest.approx(2.1447866879169273, abs=1e-12)
    with pytest.raises(ConfigError, match=r"confidence must be between 0 and 1 \(exclusive\)"):
        t_value(1.0, 3)
    with pytest.raises(ValueError, match=r"degrees of freedom must be a positive number, got 0"):
        t_value(0.95, 0)
