"""The summaries' bootstrap of the mean: draw counts against gathering the drawn rows.

    .venv/bin/python benchmarks/bootstrap.py                      # 1,000,000 rows, 23 columns
    .venv/bin/python benchmarks/bootstrap.py --n 100000 --resamples 1000

Both sides find the percentile interval of the mean of every column, with one seed and so the
same row draws, in chunks of 2,000,000 drawn rows and with the columns spread over threads:

* ``counts``: ``stats.bootstrap_cis`` as it ships. Each resample's mean is the column
  weighted by how often each row was drawn, each row summed pairwise, over n.
* ``gather``: the way before it, written out here. The drawn rows are gathered and averaged.

The columns are 19 of floats in [0, 1) and 4 of integer scores 1-5, as a scale run's 23 metrics
(its judge scores and their ``_norm`` twins are the integer ones). It prints each side's
seconds (best of ``--rounds``, interleaved), the ratio, and how many intervals are equal bit
for bit. The integer columns must be, since their sums are exact in any order; a float column's
interval may differ in the last digits.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_judge.stats.bootstrap import bootstrap_cis

_CHUNK = 2_000_000


def gathered_cis(
    columns: list[NDArray[np.float64]], resamples: int, seed: int
) -> list[tuple[float, float]]:
    """The previous build's ``bootstrap_cis``: the drawn rows gathered, then averaged."""
    n = len(columns[0])
    rng = np.random.default_rng(seed)
    stats: list[list[NDArray[np.float64]]] = [[] for _ in columns]
    per_chunk = max(1, _CHUNK // n)
    workers = min(len(columns), 4, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        for start in range(0, resamples, per_chunk):
            rows = rng.integers(0, n, size=(min(per_chunk, resamples - start), n))
            means = pool.map(lambda c, rows=rows: c[rows].mean(axis=1), columns)
            for out, mean in zip(stats, means, strict=True):
                out.append(mean)
    alpha = (1.0 - 0.95) / 2.0
    return [
        (float(low), float(high))
        for low, high in (np.quantile(np.concatenate(s), [alpha, 1.0 - alpha]) for s in stats)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--resamples", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    columns = [rng.random(args.n) for _ in range(19)]
    columns += [rng.integers(1, 6, args.n).astype(np.float64) for _ in range(4)]
    seconds: dict[str, list[float]] = {"counts": [], "gather": []}
    found: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for side in ("gather", "counts"):
            start = time.perf_counter()
            if side == "counts":
                found[side] = bootstrap_cis(columns, resamples=args.resamples, seed=0)  # type: ignore[assignment]
            else:
                found[side] = gathered_cis(columns, args.resamples, seed=0)
            seconds[side].append(time.perf_counter() - start)
    best = {side: min(times) for side, times in seconds.items()}
    same = [a == b for a, b in zip(found["counts"], found["gather"], strict=True)]
    print(
        f"{args.n:,} rows, 23 columns, {args.resamples} resamples, {os.cpu_count()} cores "
        f"(best of {args.rounds}):"
    )
    print(f"  counts {best['counts']:.2f} s, gather {best['gather']:.2f} s -> "
          f"{best['gather'] / best['counts']:.2f}x")  # fmt: skip
    print(
        f"  intervals equal bit for bit: {sum(same)} of 23 (integer columns: {sum(same[19:])} of 4)"
    )
    if not all(same[19:]):
        raise SystemExit("an integer column's interval differs: its sums should be exact")


if __name__ == "__main__":
    main()
