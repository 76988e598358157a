"""The judge audit over a run's index in files (``data.column``): what it finds there is what
it finds in memory, a block at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rag_judge.analysis.audit import audit_report, modal_score
from rag_judge.stats import pages
from tests.analysis.test_audit import report_of


def test_the_mode_of_a_mapped_column_a_block_at_a_time() -> None:
    rng = np.random.default_rng(5)
    scores = np.round(rng.random(600_000) * 8 + 1) / 2  # 0.5 steps: halves round up
    column = pages.spilled(scores)
    assert pages.mapped(column) and len(column) > 2 * pages.BLOCK
    values, counts = np.unique(np.floor(scores + 0.5), return_counts=True)  # the whole way
    top = int(np.argmax(counts))
    assert modal_score(column) == (float(values[top]), float(counts[top]) / len(scores))


def test_the_audit_of_an_index_in_files_is_the_audit_in_memory(tmp_path: Path) -> None:
    """Past a few thousand samples a run's index maps files (``data.column``): the audit
    reads them where they are, and finds what it finds in memory."""
    from rag_judge.report.samples import SampleIndex

    rng = np.random.default_rng(2)
    n = 20_000
    scores: list[float | None] = [float(v) for v in rng.integers(1, 6, n)]
    lengths: list[int | None] = [int(v) for v in rng.integers(5, 80, n)]
    for i in rng.choice(n, 300, replace=False):
        scores[i] = None  # failed: left out
    for i in rng.choice(n, 200, replace=False):
        lengths[i] = None  # no answer: left out
    report = report_of(scores, lengths, generators=["llama-3"] * n)
    in_memory = audit_report(report, resamples=50, seed=1)
    spilled_index = SampleIndex(spill=tmp_path)
    for r in report.samples:
        spilled_index.add(r)
    assert pages.mapped(spilled_index.column("faith"))
    report._index = (id(report.samples), len(report.samples), spilled_index)
    assert audit_report(report, resamples=50, seed=1) == in_memory


def test_nan_is_one_value_of_the_mode_ranked_last_across_blocks() -> None:
    """As numpy's unique counts NaN: one value after every number, whichever block it is in."""
    scores = np.r_[np.full(150_000, 3.0), np.full(200_000, np.nan)]
    for column in (scores, pages.spilled(scores)):
        top, share = modal_score(column)
        assert top is not None and np.isnan(top) and share == 200_000 / 350_000
    assert modal_score(np.r_[scores, np.full(60_000, 3.0)]) == (3.0, 210_000 / 410_000)
    assert modal_score(np.array([np.nan, 1.0])) == (1.0, 0.5)  # a tie goes to the number
