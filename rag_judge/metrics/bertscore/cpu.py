"""fp32 encoding on the CPU at the speed of the hardware, with the same arithmetic.

Imported when a model is loaded (it imports torch); :func:`speed_up` changes a model loaded for
the CPU in fp32 in how it computes, not in what: fp32 products and sums, exact softmax and
GELU. Its embeddings agree with the unchanged model's within float rounding (~1e-6; the tests
check the scores against bert-score within 1e-5), and each change is kept only after the model
has reproduced its unchanged output on a probe batch.

* Matrix products go through oneDNN on weights reordered once, at load, into its blocked layout
  (:class:`PackedLinear`). ``F.linear`` calls MKL's sgemm, which packs the weights again on
  every call and on AMD CPUs takes a slower code path than oneDNN (which dispatches on the
  instruction set, not the vendor): ~185 against ~220 GFLOP/s on two EPYC cores for BERT's
  shapes, near the cores' peak. These products are ~80 % of a forward pass.
* A BERT-style layer (BERT, RoBERTa, MiniLM, ELECTRA, ...) becomes a :class:`FastLayer`: Q, K
  and V in one product, GELU inside the feed-forward product's epilogue (no separate pass over
  its activations), the attention in two batched products, the residual additions in place
  (oneDNN's binary post-op measured slower than a separate addition). The encoder never
  passes an attention mask (it groups texts of equal length), so the layer takes none.
* Other layers keep their code, with the eager attention (:data:`ATTENTION`): SDPA's flash
  kernel is about twice as slow on short unmasked sequences.
* Small work runs on one thread (:func:`threads_for`): the probe, the weights' reorder and any
  batch under :data:`SMALL_BATCH_TOKENS` tokens. Each parallel operation ends at a barrier
  where every thread must arrive; on a busy machine a descheduled thread holds the others for
  a time slice, and a small batch's many short operations pay that wait far more often than
  its second thread saves (``docs/bertscore.md``: 34 pairs took 1.5-2.5x bert-score's time).

Nothing changes where torch may compute fp32 products in lower precision
(``torch.set_float32_matmul_precision``, oneDNN's ``fp32_precision``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

__all__ = [
    "ATTENTION",
    "SMALL_BATCH_TOKENS",
    "FastBert",
    "FastLayer",
    "PackedLinear",
    "can_pack",
    "speed_up",
    "threads_for",
]

ATTENTION = "eager"  # the attention implementation a CPU model is loaded with (see above)
_PROBE_TOLERANCE = 1e-4  # of the output's scale: float rounding passes, a wrong kernel does not
_ROWS_HINT = 2048  # rows per product the weights' layout is chosen for (any count works)
# Below this many tokens (texts x length) a batch runs on one thread; see the module's notes.
SMALL_BATCH_TOKENS = 512


@contextmanager
def threads_for(tokens: int) -> Iterator[None]:
    """torch's intra-op threads for a forward pass over ``tokens`` tokens: one thread below
    :data:`SMALL_BATCH_TOKENS`, else as configured; restored on exit. torch's thread count is
    the process's, so this assumes no other thread computes with torch meanwhile."""
    have = torch.get_num_threads()
    want = 1 if tokens < SMALL_BATCH_TOKENS else have
    if want == have:
        yield
        return
    torch.set_num_threads(want)
    try:
        yield
    finally:
        torch.set_num_threads(have)


def can_pack() -> bool:
    """Whether oneDNN's packed fp32 products are available and keep fp32 precision."""
    mkldnn = torch.backends.mkldnn
    if not (mkldnn.is_available() and mkldnn.enabled):  # type: ignore[no-untyped-call]
        return False
    if torch.get_float32_matmul_precision() != "highest":
        return False
    if getattr(getattr(mkldnn, "matmul", None), "fp32_precision", "none") not in ("none", "ieee"):
        return False
    try:
        ops = torch.ops.mkldnn
        return callable(ops._linear_pointwise) and callable(ops._reorder_linear_weight)
    except (AttributeError, RuntimeError):
        return False


class PackedLinear(torch.nn.Module):
    """``x @ weight.T + bias`` through oneDNN, the weight reordered once for it; optionally
    with exact GELU applied to the result inside the product (``gelu=True``)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, gelu: bool = False):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _ROWS_HINT)
        self.bias = None if bias is None else bias.detach()
        self.post, self.algorithm = ("gelu", "none") if gelu else ("none", "")

    @classmethod
    def of(cls, linear: torch.nn.Linear, gelu: bool = False) -> PackedLinear:
        return cls(linear.weight, linear.bias, gelu)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
            x, self.packed, self.bias, self.post, [], self.algorithm
        )
        return out

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.post}"


def _exact_gelu(act: Any) -> bool:
    """Whether ``act`` is the erf GELU (transformers' "gelu", torch's default GELU)."""
    if isinstance(act, torch.nn.GELU):
        return act.approximate == "none"
    return type(act).__name__ == "GELUActivation" and (
        getattr(act, "act", None) is torch.nn.functional.gelu
    )


class FastLayer(torch.nn.Module):
    """A post-LayerNorm BERT-style encoder layer on unmasked input in four packed products:
    self-attention (Q, K, V in one product), add & norm, feed-forward (GELU fused), add & norm."""

    def __init__(self, layer: Any) -> None:
        super().__init__()
        attn, attn_out = layer.attention.self, layer.attention.output
        projections = (attn.query, attn.key, attn.value)
        biases = [p.bias for p in projections]
        act = layer.intermediate.intermediate_act_fn
        fused = _exact_gelu(act)
        self._set(
            PackedLinear(
                torch.cat([p.weight for p in projections]),
                None if any(b is None for b in biases) else torch.cat(biases),
            ),
            PackedLinear.of(attn_out.dense), attn_out.LayerNorm,
            PackedLinear.of(layer.intermediate.dense, gelu=fused), None if fused else act,
            PackedLinear.of(layer.output.dense), layer.output.LayerNorm,
            int(attn.num_attention_heads), int(attn.attention_head_size),
            float(getattr(attn, "scaling", int(attn.attention_head_size) ** -0.5)),
        )  # fmt: skip

    @classmethod
    def of_parts(
        cls, qkv: PackedLinear, attn_out: PackedLinear, norm1: torch.nn.LayerNorm,
        up: PackedLinear, act: Callable[[torch.Tensor], torch.Tensor] | None,
        down: PackedLinear, norm2: torch.nn.LayerNorm, heads: int, head_dim: int,
    ) -> FastLayer:  # fmt: skip
        """A layer from its parts (``fastbert`` builds them from the weight file)."""
        out = cls.__new__(cls)
        torch.nn.Module.__init__(out)
        out._set(qkv, attn_out, norm1, up, act, down, norm2, heads, head_dim, head_dim**-0.5)
        return out

    def _set(
        self, qkv: PackedLinear, attn_out: PackedLinear, norm1: torch.nn.LayerNorm,
        up: PackedLinear, act: Callable[[torch.Tensor], torch.Tensor] | None,
        down: PackedLinear, norm2: torch.nn.LayerNorm, heads: int, head_dim: int,
        scaling: float,
    ) -> None:  # fmt: skip
        self.heads, self.head_dim, self.scaling = heads, head_dim, scaling
        self.qkv, self.attn_out, self.norm1 = qkv, attn_out, norm1
        self.up, self.act, self.down, self.norm2 = up, act, down, norm2

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: Any = None, *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        if attention_mask is not None or kwargs.get("encoder_hidden_states") is not None:
            raise ValueError("FastLayer computes unmasked self-attention only")
        b, n, dim = hidden_states.shape
        h, d = self.heads, self.head_dim
        x = hidden_states.reshape(b * n, dim)
        qkv = self.qkv(x).view(b, n, 3, h, d).permute(2, 0, 3, 1, 4).reshape(3, b * h, n, d)
        q, k, v = qkv.unbind(0)
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(self.scaling)  # as eager: scale after
        context = torch.bmm(scores.softmax(-1), v)
        context = context.view(b, h, n, d).transpose(1, 2).reshape(b * n, dim)
        x = self.norm1(self.attn_out(context).add_(x))
        up = self.up(x)
        if self.act is not None:
            up = self.act(up)
        out: torch.Tensor = self.norm2(self.down(up).add_(x))
        return out.view(b, n, dim)


class FastBert(torch.nn.Module):
    """A BERT encoder of :class:`FastLayer` s on unmasked input, called as a transformers model
    is (``model(input_ids=ids)[0]``): embeddings summed as transformers sums them (word, then
    token type 0, then position), LayerNorm, the layers."""

    def __init__(
        self, word: torch.Tensor, position: torch.Tensor, token_type: torch.Tensor,
        norm: torch.nn.LayerNorm, layers: list[FastLayer],
    ) -> None:  # fmt: skip
        super().__init__()
        self.word = torch.nn.Embedding.from_pretrained(word)  # type: ignore[no-untyped-call]
        self.position, self.token_type, self.norm = position, token_type, norm
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor]:
        n = input_ids.shape[1]
        x: torch.Tensor = self.norm(self.word(input_ids) + self.token_type + self.position[:n])
        for layer in self.layers:
            x = layer(x)
        return (x,)


def _is_bert_layer(module: Any) -> bool:
    """The module tree of a BERT-style layer, self-attention only (the probe checks the math)."""
    try:
        attn = module.attention.self
        parts = (attn.query, attn.key, attn.value, module.attention.output.dense,
                 module.intermediate.dense, module.output.dense)  # fmt: skip
        norms = (module.attention.output.LayerNorm, module.output.LayerNorm)
        int(attn.num_attention_heads), int(attn.attention_head_size)
    except (AttributeError, TypeError):
        return False
    if getattr(module, "add_cross_attention", False) or getattr(module, "is_decoder", False):
        return False
    return all(type(p) is torch.nn.Linear for p in parts) and all(
        type(n) is torch.nn.LayerNorm for n in norms
    )


Swap = tuple[torch.nn.Module, str, torch.nn.Module]  # (parent, child's name, original child)


def _swap(model: Any, make: Callable[[Any], torch.nn.Module | None]) -> list[Swap]:
    """Replace every child for which ``make`` gives a module; the replaced ones, for undoing."""
    done: list[Swap] = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = make(child)
            if new is not None:
                setattr(parent, name, new)
                done.append((parent, name, child))
    return done


def _undo(swaps: list[Swap]) -> None:
    for parent, name, child in reversed(swaps):
        setattr(parent, name, child)


def _output(model: Any, probe: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        out: torch.Tensor = model(input_ids=probe)[0]
    return out


def _agrees(model: Any, probe: torch.Tensor, want: torch.Tensor) -> bool:
    try:
        got = _output(model, probe)
    except (RuntimeError, ValueError, TypeError):
        return False
    scale = float(want.abs().max()) or 1.0
    return got.shape == want.shape and float((got - want).abs().max()) <= _PROBE_TOLERANCE * scale


def speed_up(model: Any) -> list[str]:
    """Apply the changes above to ``model`` (fp32, on the CPU, in eval mode), each kept only if
    the model still gives its unchanged output on a probe batch; the names of those kept."""
    if not can_pack():
        return []
    try:
        vocab = int(model.get_input_embeddings().num_embeddings)
        probe = torch.randint(0, vocab, (3, 11), generator=torch.Generator().manual_seed(0))
        want = _output(model, probe)
    except (AttributeError, NotImplementedError, RuntimeError, TypeError, ValueError):
        return []  # a model this cannot probe is left as it is
    kept: list[str] = []
    changes: list[tuple[str, Callable[[Any], torch.nn.Module | None]]] = [
        ("fast layers", lambda m: FastLayer(m) if _is_bert_layer(m) else None),
        ("packed linears", lambda m: PackedLinear.of(m) if type(m) is torch.nn.Linear else None),
    ]
    for name, make in changes:
        swaps = _swap(model, make)
        if not swaps:
            continue
        if _agrees(model, probe, want):
            kept.append(name)
        else:
            _undo(swaps)
    return kept
