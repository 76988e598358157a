"""bert-score's rescaling baselines: finding a baseline file and reading one layer's row."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np

from rag_judge.errors import ConfigError

__all__ = ["find_baseline", "load_baseline"]


def find_baseline(model_type: str, lang: str, baseline_path: str | None = None) -> Path:
    """The rescaling baseline file, found as bert-score finds it, or a ConfigError saying where
    it looked."""
    if baseline_path is not None:
        path = Path(baseline_path).expanduser()
        if path.is_file():
            return path
        raise ConfigError(f"baseline_path {baseline_path!r}: no such file")
    spec = importlib.util.find_spec("bert_score")
    if spec is None or spec.origin is None:
        raise ConfigError(
            "rescale_with_baseline uses the baseline files that the bert-score package ships, "
            "and it is not installed (pip install bert-score), or give baseline_path"
        )
    root = Path(spec.origin).parent / "rescale_baseline"
    path = root / f"{lang}/{model_type}.tsv"  # as bert-score joins it (a path model stays inside)
    if path.is_file():
        return path
    langs = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    raise ConfigError(
        f"no rescaling baseline for model {model_type!r} in language {lang!r}: looked for "
        f"{path} (bert-score ships baselines for languages {', '.join(langs) or 'none'} under "
        f"{root}); set rescale_with_baseline: false, or give baseline_path"
    )


def load_baseline(path: Path, layer: int) -> np.ndarray:
    """(P, R, F) baseline of one layer: row ``layer`` of the file (bert-score's ``iloc``)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if len(rows) < 2 or [c.strip() for c in rows[0][1:4]] != ["P", "R", "F"]:
        raise ConfigError(f"{path}: not a baseline file (header LAYER,P,R,F expected)")
    if layer + 1 >= len(rows):
        raise ConfigError(f"{path}: no baseline for layer {layer} ({len(rows) - 1} rows)")
    return np.array([float(v) for v in rows[layer + 1][1:4]], dtype=np.float64)
