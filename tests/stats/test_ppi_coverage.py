"""How often the 95% PPI++ interval covers the true mean as the labelled slice shrinks: a seeded
simulation on two judge models, for the small-sample method (``t``, the default) and the
reference package's normal interval (``ppi_py``).

- ``docs``: the model of docs/judge-estimates.md and test_ppi.py: human labels on 1..5 with
  P = (0.10, 0.15, 0.25, 0.30, 0.20), a continuous judge lenient by 0.8 with N(0, 0.75) noise;
- ``discrete``: the same labels, a judge that answers 1..5 and whose bias depends on the true
  value (+1 on a 1 or 2, +0.5 on a 3, none on a 4 or 5: lenient on bad answers), plus N(0, 0.7)
  noise before rounding and clipping to 1..5;
- ``skewed`` (in the table only): the discrete judge on labels that are mostly 5s.

Each dataset has 1,000 samples; its first n are the labelled slice (the samples are iid, so that
is a random slice), the rest the judge alone scored. The table in docs/judge-estimates.md is
this module's output: ``.venv/bin/python -m tests.stats.test_ppi_coverage``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rag_judge.stats import mean_ci, ppi_mean

P = np.array([0.10, 0.15, 0.25, 0.30, 0.20])
TRUTH = float(np.arange(1, 6) @ P)  # 3.35
SIZE, DATASETS, SEED = 1000, 2000, 2027
LABELS = (10, 12, 15, 20, 30, 50, 100, 200)

Model = Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]


def docs_judge(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.choice(np.arange(1.0, 6.0), size=(DATASETS, SIZE), p=P)
    return y, y + 0.8 + rng.normal(0.0, 0.75, size=y.shape)


def discrete_judge(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.choice(np.arange(1.0, 6.0), size=(DATASETS, SIZE), p=P)
    bias = np.select([y <= 2, y == 3], [1.0, 0.5], 0.0)
    return y, np.clip(np.rint(y + bias + rng.normal(0.0, 0.7, size=y.shape)), 1.0, 5.0)


def skewed_judge(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The discrete judge on labels that are mostly 5s (P = 0.02, 0.03, 0.05, 0.15, 0.75): the
    case the ``few_labels_off_mode`` warning is for, where no normal or t interval holds."""
    y = rng.choice(np.arange(1.0, 6.0), size=(DATASETS, SIZE), p=SKEWED)
    bias = np.select([y <= 2, y == 3], [1.0, 0.5], 0.0)
    return y, np.clip(np.rint(y + bias + rng.normal(0.0, 0.7, size=y.shape)), 1.0, 5.0)


SKEWED = np.array([0.02, 0.03, 0.05, 0.15, 0.75])
MODELS: dict[str, Model] = {"docs": docs_judge, "discrete": discrete_judge}
TRUTHS = {"docs": TRUTH, "discrete": TRUTH, "skewed": float(np.arange(1, 6) @ SKEWED)}


def coverage(model: str, labels: tuple[int, ...] = LABELS) -> dict[int, dict[str, float]]:
    """Per label count: the share of datasets whose interval covers the truth, for PPI++ by
    ``t`` and ``ppi_py`` and for the labels alone by each (``labels_t``, ``labels_ppi_py``)."""
    y, f = {**MODELS, "skewed": skewed_judge}[model](np.random.default_rng(SEED))
    truth = TRUTHS[model]
    out = {}
    for n in labels:
        hits = dict.fromkeys(("t", "ppi_py", "labels_t", "labels_ppi_py"), 0)
        for d in range(DATASETS):
            for method in ("t", "ppi_py"):
                r = ppi_mean(y[d, :n], f[d, :n], f[d, n:], method=method)
                assert r.ci_low is not None and r.ci_high is not None
                hits[method] += r.ci_low <= truth <= r.ci_high
                alone = mean_ci(y[d, :n], method=method)
                assert alone.low is not None and alone.high is not None
                hits[f"labels_{method}"] += alone.low <= truth <= alone.high
        out[n] = {k: v / DATASETS for k, v in hits.items()}
    return out


# Measured with the seed above (2,000 datasets per cell); the module's output prints all of it.
MEASURED = {
    "docs": {15: (0.9455, 0.9015), 30: (0.95, 0.9365), 50: (0.95, 0.943), 100: (0.9475, 0.9405)},
    "discrete": {
        15: (0.9395, 0.8975),
        30: (0.941, 0.925),
        50: (0.9465, 0.937),
        100: (0.945, 0.9405),
    },
}  # label count: (t, ppi_py)


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_the_small_sample_interval_keeps_its_coverage_down_to_15_labels(model: str) -> None:
    measured = coverage(model, (15, 30, 50, 100))
    assert {n: (c["t"], c["ppi_py"]) for n, c in measured.items()} == MEASURED[model]
    assert all(c["t"] >= 0.93 for c in measured.values())
    assert measured[15]["ppi_py"] < 0.93  # the normal interval's shortfall with few labels


def table() -> str:
    """The coverage tables of docs/judge-estimates.md, as Markdown: the two models, and the
    skewed labels (the t method only)."""
    models = [*MODELS, "skewed"]
    results = {model: coverage(model) for model in models}
    cols = [(m, k) for m in MODELS for k in ("t", "ppi_py", "labels_t", "labels_ppi_py")]
    cols += [("skewed", "t"), ("skewed", "labels_t")]
    names = {"t": "PPI t", "ppi_py": "PPI ppi_py", "labels_t": "labels t",
             "labels_ppi_py": "labels normal"}  # fmt: skip
    rows = ["| labels | " + " | ".join(f"{m}: {names[k]}" for m, k in cols) + " |"]
    rows.append("|---:|" + "---:|" * len(cols))
    for n in LABELS:
        rows.append(f"| {n} | " + " | ".join(f"{results[m][n][k]:.1%}" for m, k in cols) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
