"""BERTScore precision / recall / F1 of each sample's ``answer`` against its ``references``.

bert-score 0.3.13's definition (``rag_judge.metrics.bertscore.kernel`` says where and why the
numbers differ: no padding in the similarity matrix, empty texts score 0 without crashing),
all-MiniLM-L6-v2 at layer 6 by default, loaded offline. Scores do not depend on batch size or
order (within 1e-6), and each unique text is encoded once (in-process LRU, SQLite disk cache).
Validation checks the options' shape only; ``prepare()`` finds the model (and checks the
layer against its config.json), reads the rescaling baseline and fingerprints the model files.
Why layer 6, the batch-invariance guarantees and every option: ``docs/bertscore.md``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from rag_judge import _progress as progress
from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorResult, EvaluatorRun, pick
from rag_judge.metrics.bertscore.baseline import find_baseline, load_baseline
from rag_judge.metrics.bertscore.cache import EmbeddingCache
from rag_judge.metrics.bertscore.encoder import Encoder, EncoderRuntime, default_runtime
from rag_judge.metrics.bertscore.kernel import (
    IdfTable,
    idf_table,
    is_empty,
    max_over_references,
    rescale,
    score_pairs,
    token_weights,
)
from rag_judge.metrics.bertscore.models import (
    DEFAULT_MODEL,
    PACKAGED_DEPTHS,
    ModelFiles,
    model_depth,
)
from rag_judge.report.model import MetricKind, Signature

__all__ = ["DEFAULT_LAYERS", "METRICS", "BERTScoreEvaluator", "find_baseline", "load_baseline"]

log = logging.getLogger(__name__)

METRICS = ("bertscore_precision", "bertscore_recall", "bertscore_f1")
DEFAULT_LAYERS = {DEFAULT_MODEL: 6, "all-MiniLM-L6-v2": 6}
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_LANG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z]+)?$")
_CHUNK = 1024  # samples embedded and scored at a time: bounds memory on large datasets


class BERTScoreEvaluator(Evaluator):
    """BERTScore P/R/F1 (bert-score 0.3.13's definition, batch-invariant, cached embeddings)."""

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    type: Literal["bertscore"] = "bertscore"
    kind: ClassVar[MetricKind] = MetricKind.EMBEDDING
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
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
    def _consistent(self) -> BERTScoreEvaluator:
        # Shape only, no I/O: the model folder and the baseline file are prepare()'s.
        if self.num_layers is None and self.model_type not in DEFAULT_LAYERS:
            raise ValueError(
                f"num_layers is required for model {self.model_type!r} (a default is known only "
                f"for {', '.join(DEFAULT_LAYERS)}; bert-score's model2layers lists tuned layers "
                "for many models)"
            )
        depth = PACKAGED_DEPTHS.get(self.model_type)
        if depth is not None and self.layer > depth:
            raise ValueError(self._too_deep(depth))
        if self.baseline_path is not None and not self.rescale_with_baseline:
            raise ValueError("baseline_path is set but rescale_with_baseline is false")
        if self.device == "cpu" and self.dtype != "fp32":
            raise ValueError(
                f"dtype {self.dtype!r} needs a CUDA device, but the device is cpu; use dtype "
                "'fp32' on CPU"
            )
        return self

    def _too_deep(self, depth: int) -> str:
        return (
            f"num_layers {self.layer} for model {self.model_type!r}: must be between 0 and "
            f"{depth} (its config.json)"
        )

    @property
    def layer(self) -> int:
        return self.num_layers if self.num_layers is not None else DEFAULT_LAYERS[self.model_type]

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def _disk(self) -> EmbeddingCache | None:
        return EmbeddingCache(self.cache_dir) if self.disk_cache else None

    def prepare(self, *, runtime: EncoderRuntime | None = None) -> BERTScoreRun:
        """Find the model's folder (a ConfigError says where it looked), check the layer
        against its config.json, fingerprint its files and read the rescaling baseline.
        ``runtime`` holds loaded models and remembered embeddings (default: the process's,
        shared by every encoder)."""
        runtime = runtime if runtime is not None else default_runtime()
        files = self._files(runtime)
        depth = model_depth(files.folder)
        if depth is not None and self.layer > depth:
            raise ConfigError(self._too_deep(depth))
        baseline = None
        if self.rescale_with_baseline:
            path = find_baseline(self.model_type, self.lang, self.baseline_path)
            baseline = load_baseline(path, self.layer)
        return BERTScoreRun(self, files, baseline, runtime)

    def _files(self, runtime: EncoderRuntime) -> ModelFiles:
        """The model's folder and its files' fingerprint (remembered by the runtime)."""
        disk = self._disk()
        try:
            return runtime.models.locate(self.model_type, disk)
        finally:
            if disk is not None:
                disk.close()

    @property
    def shardable(self) -> bool:
        """idf weights count every reference of the batch: with idf, never shard it."""
        return not self.idf

    def wants_gpu(self) -> bool:
        return True  # an encoder: a cluster's GPU pays, though it runs on CPU too

    def signature(self, metric: str, fingerprint: str | None = None) -> Signature:
        """Every option that changes ``metric``'s number, the model files' fingerprint among
        them (``fingerprint``, default: the model's as found now)."""
        if fingerprint is None:
            fingerprint = self._files(default_runtime()).fingerprint
        if not self.rescale_with_baseline:
            rescaled = "no"
        else:
            rescaled = "custom" if self.baseline_path is not None else self.lang
        options = {
            "model": self.model_type,
            "rev": fingerprint[:12],
            "layer": str(self.layer),
            "idf": "yes" if self.idf else "no",
            "rescale": rescaled,
            "multiref": "max",
            "dtype": self.dtype,
            "version": __version__,
        }
        return Signature(name=metric, options=options)


class BERTScoreRun(EvaluatorRun):
    """A run of :class:`BERTScoreEvaluator`: what ``prepare()`` found (the model's files, the
    baseline row, the runtime), and the scoring of a chunk."""

    evaluator: BERTScoreEvaluator

    def __init__(
        self,
        evaluator: BERTScoreEvaluator,
        files: ModelFiles,
        baseline: np.ndarray | None,
        runtime: EncoderRuntime,
    ) -> None:
        super().__init__(evaluator)
        self.files = files
        self.baseline = baseline
        self.runtime = runtime

    def signatures(self) -> dict[str, Signature]:
        ev = self.evaluator
        return {m: ev.signature(m, self.files.fingerprint) for m in ev.metric_names()}

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        ev = self.evaluator
        result = EvaluatorResult.empty(len(samples), self.signatures())
        usable = result.require(samples, ev.missing)
        if not usable:
            return result
        disk = ev._disk()
        try:
            encoder = Encoder(
                self.files, ev.layer, ev.device, ev.dtype, ev.batch_size, disk, self.runtime
            )
            self._score(samples, usable, encoder, result)
        finally:
            if disk is not None:
                disk.close()
        return result

    def _score(
        self,
        samples: Sequence[Sample],
        usable: list[int],
        encoder: Encoder,
        result: EvaluatorResult,
    ) -> None:
        idf = None
        if self.evaluator.idf:  # every reference occurrence of these samples, as bert-score
            refs = [r for i in usable for r in samples[i].references]
            ids = encoder.token_ids(refs)
            idf = idf_table(ids[r.strip()] for r in refs)
        zero = encoder.zero_ids()
        empty: list[str] = []
        chunks = [usable[start : start + _CHUNK] for start in range(0, len(usable), _CHUNK)]
        counter = progress.task("encoding", sum(len(_texts(samples, c)) for c in chunks), "texts")
        for indices in chunks:
            prf, chunk_empty = _score_chunk(samples, indices, encoder, zero, idf, counter)
            if self.baseline is not None:
                prf = rescale(prf, self.baseline)
            empty += chunk_empty
            for name, column in zip(METRICS, prf.T):
                if name in result.scores:
                    result.fill(name, indices, column)
        counter.close()
        if empty:
            log.warning(
                "BERTScore: %d sample(s) with an empty answer or reference, scored 0 "
                "against it: %s", len(empty), ", ".join(empty[:20]),
            )  # fmt: skip


def _texts(samples: Sequence[Sample], indices: list[int]) -> set[str]:
    """The unique (stripped) texts of these samples: their answers and references."""
    return {t.strip() for i in indices for t in (samples[i].answer or "", *samples[i].references)}


def _score_chunk(
    samples: Sequence[Sample],
    indices: list[int],
    encoder: Encoder,
    zero: list[int],
    idf: IdfTable | None,
    counter: progress.Task,
) -> tuple[np.ndarray, list[str]]:
    """(P, R, F) per sample (max over its references) and the ids of samples with an empty
    text; each unique text is weighted once."""
    chunk = [samples[i] for i in indices]
    embs = encoder.embed(_texts(samples, indices), counter)
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
    return max_over_references(prf, firsts), empty
