"""A BERT encoder for the GPU with little Python per forward pass, the same arithmetic.

On an H100 a forward pass of transformers' BertModel over 64 texts of 40 tokens took 3.4-5.5
ms, nearly all of it Python and kernel launches: the GPU's work is a fraction of a millisecond.
1,000 prose pairs need 67 passes (texts of one length per pass, see ``encoder.py``), so the
module's own code, not the model, set the pace. :class:`GpuBert` runs the same operations
(Q, K and V in one product, ``scaled_dot_product_attention`` as transformers' SDPA path calls
it, exact GELU, LayerNorm) in 2.1-2.3 ms per pass (``benchmarks/gpu_probe.py``). Its weights
come straight from the safetensors file (:mod:`fastbert` checks the folder), so a cold run
imports no transformers either.

Its vectors equal transformers' on the CPU, where the tests compare them, and differed by at
most 2.1e-7 on the H100. It is built from an fp32 weight file only, cast to fp32, fp16 or bf16
as transformers casts it; a file in another dtype, or one that lacks a tensor, leaves the model
to transformers.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

__all__ = ["GpuBert", "build"]

# One layer's tensors in the order GpuBert.forward unpacks them.
_LAYER_TENSORS = (
    "qkv.weight", "qkv.bias", "attention.output.dense.weight", "attention.output.dense.bias",
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "intermediate.dense.weight", "intermediate.dense.bias", "output.dense.weight",
    "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias",
)  # fmt: skip


class GpuBert(torch.nn.Module):
    """A BERT encoder on unmasked input (equal-length batches), called as a transformers model
    is (``model(input_ids=ids)[0]``): embeddings summed as transformers sums them (word, token
    type 0, position), LayerNorm, then per layer self-attention and the feed-forward block,
    each followed by its residual addition and LayerNorm."""

    def __init__(
        self, embeddings: list[torch.Tensor], layers: list[list[torch.Tensor]], heads: int,
        eps: float,
    ) -> None:  # fmt: skip
        super().__init__()
        word, self.token_type, self.position, self.norm_w, self.norm_b = embeddings
        # The one registered parameter: the encoder reads the model's device from it. The other
        # tensors are plain (unpacked per layer without module lookups); build() places them.
        self.word = torch.nn.Parameter(word, requires_grad=False)
        self.layers, self.heads, self.eps = layers, heads, eps

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor]:
        b, n = input_ids.shape
        dim, h, eps = self.word.shape[1], self.heads, self.eps
        x = self.word[input_ids] + self.token_type + self.position[:n]
        x = F.layer_norm(x, (dim,), self.norm_w, self.norm_b, eps)
        for qw, qb, ow, ob, n1w, n1b, uw, ub, dw, db, n2w, n2b in self.layers:
            q, k, v = F.linear(x, qw, qb).view(b, n, 3, h, dim // h).permute(2, 0, 3, 1, 4)
            context = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, dim)
            x = F.layer_norm(F.linear(context, ow, ob) + x, (dim,), n1w, n1b, eps)
            up = F.gelu(F.linear(x, uw, ub))
            x = F.layer_norm(F.linear(up, dw, db) + x, (dim,), n2w, n2b, eps)
        return (x,)


def build(
    config: dict[str, Any], weights: dict[str, torch.Tensor], layer: int, device: str,
    dtype: torch.dtype,
) -> GpuBert:  # fmt: skip
    """The encoder cut at ``layer`` on ``device`` in ``dtype``, from a BERT checkpoint's
    tensors (names without a task prefix). A missing tensor raises KeyError."""

    def put(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=device, dtype=dtype)

    w = weights
    layers = []
    for i in range(layer):
        p = f"encoder.layer.{i}."
        parts = [f"{p}attention.self.{n}" for n in ("query", "key", "value")]
        tensors = {
            "qkv.weight": torch.cat([w[f"{q}.weight"] for q in parts]),
            "qkv.bias": torch.cat([w[f"{q}.bias"] for q in parts]),
        }
        layers.append([put(tensors[k] if k in tensors else w[p + k]) for k in _LAYER_TENSORS])
    embeddings = [
        put(w["embeddings.word_embeddings.weight"]),
        put(w["embeddings.token_type_embeddings.weight"][0]),
        put(w["embeddings.position_embeddings.weight"]),
        put(w["embeddings.LayerNorm.weight"]),
        put(w["embeddings.LayerNorm.bias"]),
    ]
    heads = int(config["num_attention_heads"])
    if embeddings[0].shape[1] % heads:
        raise ValueError("hidden size not a multiple of the heads")
    return GpuBert(embeddings, layers, heads, float(config.get("layer_norm_eps", 1e-12)))
