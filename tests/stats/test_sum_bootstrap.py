"""A statistic of column sums (corpus BLEU, chrF) is bootstrapped from each resample's draw
counts times the rows: over integer counts, the same interval bit for bit as scoring each
resample's gathered rows, and the rows gathered as before for anything else."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rag_judge.metrics.sacrebleu import corpus_bleu_from_rows, corpus_bleu_from_sums
from rag_judge.stats import bootstrap
from rag_judge.stats.bootstrap import SumStatistic, bootstrap_ci, bootstrap_cis, exact_sums


def _ratio(sums: list[float]) -> float:
    return sums[0] / sums[1] if sums[1] else 0.0


def _ratio_of_rows(rows: np.ndarray) -> float:
    return _ratio(rows.sum(axis=0).tolist())


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 40), st.just(2)), elements=st.integers(0, 50)),
    st.integers(0, 2**31),
)
def test_the_same_interval_as_gathering_the_rows(rows: np.ndarray, seed: int) -> None:
    rows[:, 1] += rows[:, 0]  # a share of something
    by_counts = bootstrap_ci(rows, resamples=50, seed=seed, statistic=SumStatistic(_ratio))
    gathered = bootstrap_ci(rows, resamples=50, seed=seed, statistic=_ratio_of_rows)
    assert by_counts == gathered


def test_corpus_bleu_rows_bootstrap_as_before() -> None:
    rng = np.random.default_rng(3)
    totals = rng.integers(5, 40, size=(300, 1)).astype(np.float64)
    matches = np.floor(totals * rng.uniform(0.2, 1.0, size=(300, 4)))
    counts = np.concatenate([matches, np.maximum(totals - np.arange(4), 1)], axis=1)
    rows = np.concatenate([totals, totals + rng.integers(-3, 4, size=(300, 1)), counts], axis=1)
    by_counts = bootstrap_ci(rows, seed=7, statistic=SumStatistic(corpus_bleu_from_sums))
    gathered = bootstrap_ci(rows, seed=7, statistic=functools.partial(corpus_bleu_from_rows))
    assert by_counts == gathered and by_counts[0] is not None
    assert SumStatistic(corpus_bleu_from_sums)(rows) == corpus_bleu_from_rows(rows)


def test_rows_whose_sums_may_not_be_exact_are_gathered() -> None:
    assert exact_sums(np.array([[1.0, 2.0], [3.0, 0.0]]))
    assert not exact_sums(np.array([[1.5, 2.0]]))  # a fraction: sums depend on their order
    assert not exact_sums(np.array([[np.nan, 2.0]]))
    assert not exact_sums(np.array([[2.0**52, 1.0], [1.0, 1.0]]))  # past 2**53 when summed
    assert not exact_sums(np.array([1.0, 2.0]))  # one column: not rows
    fractions = np.random.default_rng(0).uniform(0, 1, size=(50, 2))
    by_counts = bootstrap_ci(fractions, resamples=40, statistic=SumStatistic(_ratio))
    assert by_counts == bootstrap_ci(fractions, resamples=40, statistic=_ratio_of_rows)


@settings(max_examples=25, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 60), st.just(2)), elements=st.integers(0, 50)),
    st.integers(0, 2**31),
    st.sampled_from([7, 100, 2_000_000]),
)
def test_sums_share_the_means_draws_and_keep_their_interval(
    rows: np.ndarray, seed: int, chunk: int
) -> None:
    rows[:, 1] += rows[:, 0]
    column = rows[:, 0] / 7.0
    stat = SumStatistic(_ratio)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bootstrap, "_CHUNK", chunk)  # resamples drawn a few at a time, or all
        both = bootstrap_cis([column], resamples=60, seed=seed, sums=[(rows, stat)])
        alone = bootstrap_ci(rows, resamples=60, seed=seed, statistic=stat)
        only = bootstrap_cis([], resamples=60, seed=seed, sums=[(rows, stat)])
    assert both == [bootstrap_cis([column], resamples=60, seed=seed)[0], alone]
    assert only == [alone]


@pytest.mark.parametrize("n", [1, 7, 1_000])
def test_counts_drawn_ahead_in_a_thread_are_the_same_draws(
    monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    monkeypatch.setattr(bootstrap, "_CHUNK", 3 * n)  # 3 resamples a chunk
    here = list(bootstrap.count_chunks(n, 10, seed=8))
    ahead = list(bootstrap.count_chunks(n, 10, seed=8, ahead=True))
    assert [s for s, _ in here] == [s for s, _ in ahead] == [0, 3, 6, 9]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(here, ahead, strict=True))
