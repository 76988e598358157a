"""Token embeddings for BERTScore: padding-free encoding behind two caches.

* Encoding never pads: only texts of identical token length share a forward pass (no
  attention mask), so a text's embedding does not depend on its batch mates beyond BLAS
  rounding (see ``docs/bertscore.md``). Vectors are L2-normalised once, at encoding. The
  texts are tokenised in one call and their ids gathered per batch from one array: no
  per-text Python work around the model (on the CPU in fp32, ``cpu`` speeds the model up).
* Each unique text is encoded once: an in-process LRU (:class:`EmbeddingLRU`) and a disk
  cache (:class:`EmbeddingCache`: an SQLite index, vectors in segment files) keyed by model
  fingerprint (a content hash of the model files), layer, dtype and text hold float32 vectors
  plus token ids (for idf). A fully cached run loads no model (and imports no torch).
* What a process keeps between runs (loaded models and tokenizers, fingerprints, the LRU and
  the counters) lives in one :class:`EncoderRuntime`; :func:`default_runtime` is the
  process's, and an :class:`Encoder` is given one explicitly or takes that one.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_judge import _progress as progress
from rag_judge.errors import ConfigError
from rag_judge.metrics.bertscore.cache import EmbeddingCache, TokenEmbeddings
from rag_judge.metrics.bertscore.models import (
    DTYPES,
    ModelFiles,
    ModelStore,
    import_torch,
    max_tokens,
)

__all__ = [
    "MEMORY_BYTES",
    "EmbeddingLRU",
    "Encoder",
    "EncoderRuntime",
    "EncoderStats",
    "default_runtime",
]

MEMORY_BYTES = 512 * 2**20  # the in-process LRU's default budget
_CACHE_SCHEMA = "unit-f32-v1"  # what a disk-cache row holds: L2-normalised float32 vectors

MemoryKey = tuple[str, int, str, str]  # (model fingerprint, layer, dtype, stripped text)


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


class EmbeddingLRU:
    """Token embeddings in memory, least recently stored or reused first out, within a byte
    budget (vectors plus ids)."""

    def __init__(self, budget_bytes: int = MEMORY_BYTES) -> None:
        self.budget_bytes = budget_bytes
        self.nbytes = 0
        self._entries: OrderedDict[MemoryKey, TokenEmbeddings] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: MemoryKey) -> TokenEmbeddings | None:
        return self._entries.get(key)

    def put(self, key: MemoryKey, emb: TokenEmbeddings) -> None:
        """Store ``emb`` (or mark it just used, if stored); evict the oldest over budget."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        self._entries[key] = emb
        self.nbytes += _size(emb)
        while self.nbytes > self.budget_bytes and self._entries:
            _, old = self._entries.popitem(last=False)
            self.nbytes -= _size(old)

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0


def _equal_length_batches(
    order: list[int], lengths: NDArray[np.int64], size: int
) -> Iterable[NDArray[np.int64]]:
    """Runs of ``order`` (indices sorted by length) of one length, at most ``size`` each: a
    length's texts in as few batches as that allows, of near-equal sizes (no small remainder
    batch, whose matrix products run far below the CPU's peak)."""
    if not order:
        return
    ordered = np.asarray(order, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(lengths[ordered])) + 1
    for group in np.split(ordered, bounds):
        yield from np.array_split(group, -(-len(group) // size))


def _unchanged(tokens: int) -> AbstractContextManager[None]:
    return nullcontext()


def _size(emb: TokenEmbeddings) -> int:
    return int(emb.vectors.nbytes + emb.ids.nbytes)


class EncoderRuntime:
    """What a process keeps for encoding between runs: the loaded models (``models``), the
    embedding LRU (``memory``) and the counters (``stats``)."""

    def __init__(self, memory_bytes: int = MEMORY_BYTES) -> None:
        self.stats = EncoderStats()
        self.models = ModelStore(self.stats)
        self.memory = EmbeddingLRU(memory_bytes)

    def clear(self, models: bool = True) -> None:
        """Forget in-process embeddings (and loaded models, tokenizers and fingerprints): a
        fresh process, minus the imports. The counters are left alone."""
        self.memory.clear()
        if models:
            self.models.clear()


_DEFAULT_RUNTIME = EncoderRuntime()


def default_runtime() -> EncoderRuntime:
    """The process's runtime, shared by every encoder not given its own."""
    return _DEFAULT_RUNTIME


class Encoder:
    """One model at one layer and dtype on one device: tokenises and encodes lazily, through
    the runtime's LRU and the optional disk cache (``disk``)."""

    def __init__(
        self, files: ModelFiles, layer: int, device: str = "auto", dtype: str = "fp32",
        batch_size: int = 64, disk: EmbeddingCache | None = None,
        runtime: EncoderRuntime | None = None,
    ) -> None:  # fmt: skip
        if dtype not in DTYPES:
            raise ConfigError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        self.files, self.layer, self.device, self.dtype = files, layer, device, dtype
        self.batch_size, self.disk = batch_size, disk
        self.runtime = runtime if runtime is not None else default_runtime()

    @classmethod
    def open(
        cls, model: str, layer: int, device: str = "auto", dtype: str = "fp32",
        batch_size: int = 64, disk: EmbeddingCache | None = None,
        runtime: EncoderRuntime | None = None,
    ) -> Encoder:  # fmt: skip
        """An encoder for ``model`` by name: its folder is found and fingerprinted here."""
        runtime = runtime if runtime is not None else default_runtime()
        files = runtime.models.locate(model, disk)
        return cls(files, layer, device, dtype, batch_size, disk, runtime)

    @property
    def fingerprint(self) -> str:
        return self.files.fingerprint

    @property
    def stats(self) -> EncoderStats:
        return self.runtime.stats

    def key(self, text: str) -> str:
        """The disk cache's key of ``text`` (stripped) under this model, layer and dtype."""
        raw = f"{_CACHE_SCHEMA}\0{self.fingerprint}\0{self.layer}\0{self.dtype}\0{text}"
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()

    def _memory_key(self, text: str) -> MemoryKey:
        return (self.fingerprint, self.layer, self.dtype, text)

    @property
    def tokenizer(self) -> Any:
        return self.runtime.models.tokenizer(self.files.folder)

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
        torch = import_torch(transformers=False)
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

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with special tokens, truncated to the model's length (as bert-score)."""
        backend = self.runtime.models.backend(self.files.folder)
        if backend is not None:  # one call into Rust for the batch, ids only
            encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
            return [e.ids for e in encode(list(texts), add_special_tokens=True)]
        tok = self.tokenizer
        out = tok(list(texts), add_special_tokens=True, truncation=True, max_length=max_tokens(tok))
        ids: list[list[int]] = out["input_ids"]
        return ids

    def encode(
        self, texts: Sequence[str], counter: progress.Task | None = None
    ) -> dict[str, TokenEmbeddings]:
        """Embeddings of ``texts``, computed (no cache read): same-length groups, sorted, no
        padding, inference mode; each batch goes to the disk cache's writer once done, and
        is counted on ``counter``."""
        torch = import_torch(transformers=False)
        model = self.runtime.models.model(
            self.files, self.layer, self.resolved_device(), self.dtype
        )
        token_ids = self.tokenize(texts)
        lengths = np.fromiter(map(len, token_ids), np.int64, len(token_ids))
        # All ids in one array: each batch is gathered from it, not built from Python lists.
        flat = np.fromiter(chain.from_iterable(token_ids), np.int64, int(lengths.sum()))
        starts = np.cumsum(lengths) - lengths
        order = sorted(range(len(texts)), key=lambda i: (lengths[i], texts[i]))
        out: dict[str, TokenEmbeddings] = {}
        device = next(model.parameters()).device
        threads: Callable[[int], AbstractContextManager[None]] = _unchanged
        if device.type == "cpu":  # small batches on one thread (see cpu.threads_for)
            from rag_judge.metrics.bertscore import cpu

            threads = cpu.threads_for
        with torch.inference_mode():
            for batch in _equal_length_batches(order, lengths, self.batch_size):
                ids = flat[starts[batch][:, None] + np.arange(lengths[batch[0]])]
                x = torch.from_numpy(ids).to(device)
                with threads(ids.size):
                    hidden = model(input_ids=x)[0].float()
                    vectors = torch.nn.functional.normalize(hidden, dim=-1).cpu().numpy()
                self.stats.forward_calls += 1
                self.stats.texts_encoded += len(batch)
                done = [
                    (texts[i], TokenEmbeddings(ids[row], vectors[row]))
                    for row, i in enumerate(batch.tolist())
                ]
                if self.disk is not None:
                    self.disk.put_later([(self.key(t), e) for t, e in done])
                out.update(done)
                if counter is not None:
                    counter.update(done=len(batch))
        return out

    def embed(
        self, texts: Iterable[str], counter: progress.Task | None = None
    ) -> dict[str, TokenEmbeddings]:
        """Token embeddings of every text, keyed by the stripped text (bert-score strips too).

        Each unique text is looked up in memory, then on disk; only the rest is encoded. The
        unique texts are counted on ``counter`` (those found as cached) as they are done.
        """
        memory, stats = self.runtime.memory, self.stats
        wanted = sorted({t.strip() for t in texts})
        counter = counter if counter is not None else progress.Task("encoding", len(wanted), "")
        found: dict[str, TokenEmbeddings] = {}
        for text in wanted:
            hit = memory.get(self._memory_key(text))
            if hit is not None:
                found[text] = hit
        stats.memory_hits += len(found)
        missing = [t for t in wanted if t not in found]
        if missing and self.disk is not None:
            keys = [self.key(t) for t in missing]
            stored = self.disk.get_many(keys)
            found.update((t, stored[k]) for t, k in zip(missing, keys) if k in stored)
            stats.disk_hits += len(stored)
            missing = [t for t in missing if t not in found]
        counter.update(done=len(found), cached=len(found))
        if missing:
            found.update(self.encode(missing, counter))
        for text in wanted:
            memory.put(self._memory_key(text), found[text])
        return found

    def token_ids(self, texts: Iterable[str]) -> dict[str, NDArray[np.int64]]:
        """Token ids of every (stripped) text without encoding: from memory, disk, or the
        tokenizer."""
        wanted = sorted({t.strip() for t in texts})
        out: dict[str, NDArray[np.int64]] = {}
        for text in wanted:
            hit = self.runtime.memory.get(self._memory_key(text))
            if hit is not None:
                out[text] = hit.ids
        rest = [t for t in wanted if t not in out]
        if rest and self.disk is not None:
            keys = [self.key(t) for t in rest]
            stored = self.disk.get_many(keys, vectors=False)
            out.update((t, stored[k].ids) for t, k in zip(rest, keys) if k in stored)
            rest = [t for t in rest if t not in out]
        if rest:
            ids = self.tokenize(rest)
            out.update(zip(rest, (np.asarray(i, dtype=np.int64) for i in ids)))
        return out
