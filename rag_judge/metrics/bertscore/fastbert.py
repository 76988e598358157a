"""A BERT encoder for the CPU without transformers: the weights straight from safetensors, the
tokenizer from tokenizer.json through the ``tokenizers`` library alone.

A cold BERTScore run in a new process paid ~1 s to import transformers for its tokenizer and
~2.5 s more to import its BERT code, build the model, load its weights and probe it; the
encoding itself runs in :mod:`~rag_judge.metrics.bertscore.cpu`'s fused layers anyway. This
module builds those layers from the weight file directly.

It serves only a folder it can read exactly (:func:`eligible`): a BERT config (absolute
positions, exact GELU, an encoder only), ``model.safetensors`` in fp32, a ``tokenizer.json``
whose normaliser says what ``tokenizer_config.json`` says, and oneDNN's packed fp32 products
(:func:`~rag_judge.metrics.bertscore.cpu.can_pack`). Anything else loads through transformers.
Its embeddings equal the transformers path's within float rounding; tests check the F1 within
1e-6 on the packaged MiniLM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BertTokenizerFiles", "eligible", "load_gpu_model", "load_model", "load_tokenizer"]

_TOKENIZER_CLASSES = {None, "BertTokenizer", "BertTokenizerFast"}
_HUGE = 100_000  # transformers' "no limit" sentinel is far above any real model length


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def eligible(folder: Path) -> bool:
    """Whether ``folder`` holds a model this module loads exactly as transformers would."""
    config = _json(folder / "config.json")
    tok_config = _json(folder / "tokenizer_config.json")
    tok = _json(folder / "tokenizer.json")
    if not (folder / "model.safetensors").is_file() or not tok:
        return False
    plain_bert = (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and not config.get("is_decoder") and not config.get("add_cross_attention")
    )  # fmt: skip
    norm = tok.get("normalizer") or {}
    same_norm = (
        norm.get("type") == "BertNormalizer"
        and norm.get("lowercase") == tok_config.get("do_lower_case", True)
        and norm.get("strip_accents") == tok_config.get("strip_accents")
        and norm.get("handle_chinese_chars") == tok_config.get("tokenize_chinese_chars", True)
    )
    return (
        plain_bert and same_norm and _bert_pieces(tok) and _standard_specials(folder, tok_config)
        and tok_config.get("tokenizer_class") in _TOKENIZER_CLASSES
        and tok_config.get("truncation_side", "right") == "right"
    )  # fmt: skip


# transformers builds a BERT tokenizer from vocab.txt and tokenizer_config.json and ignores
# tokenizer.json's pre-tokenizer, post-processor and WordPiece settings: they must be BERT's own
# for tokenizer.json to give its ids.
_WORDPIECE = {
    "unk_token": "[UNK]",
    "continuing_subword_prefix": "##",
    "max_input_chars_per_word": 100,
}
_SPECIALS = {"cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]", "pad_token": "[PAD]"}


def _bert_pieces(tok: dict[str, Any]) -> bool:
    """tokenizer.json's pre-tokenizer, WordPiece model and post-processor are BERT's:
    ``[CLS] $A [SEP]`` with the vocabulary's own ids of those tokens."""
    model = tok.get("model") or {}
    vocab = model.get("vocab") or {}
    if model.get("type") != "WordPiece" or any(model.get(k) != v for k, v in _WORDPIECE.items()):
        return False
    if (tok.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
        return False
    post = tok.get("post_processor") or {}
    cls, sep = vocab.get("[CLS]"), vocab.get("[SEP]")
    if post.get("type") == "BertProcessing":
        return post.get("cls") == ["[CLS]", cls] and post.get("sep") == ["[SEP]", sep]
    if post.get("type") != "TemplateProcessing":
        return False
    single = [
        ("S", part["SpecialToken"].get("id"))
        if "SpecialToken" in part
        else ("A", (part.get("Sequence") or {}).get("id"))
        for part in post.get("single") or []
        if isinstance(part, dict)
    ]
    specials = post.get("special_tokens") or {}
    return single == [("S", "[CLS]"), ("A", "A"), ("S", "[SEP]")] and all(
        (specials.get(name) or {}).get("ids") == [vocab.get(name)] for name in ("[CLS]", "[SEP]")
    )


def _standard_specials(folder: Path, tok_config: dict[str, Any]) -> bool:
    """BERT's own special tokens in both files that may name them (transformers and this
    module could otherwise read different ones)."""
    for names in (tok_config, _json(folder / "special_tokens_map.json")):
        for key, standard in _SPECIALS.items():
            value = names.get(key, standard)
            if (value.get("content") if isinstance(value, dict) else value) != standard:
                return False
    return True


@dataclass(frozen=True)
class BertTokenizerFiles:
    """What the encoder reads from a tokenizer: the Rust tokenizer and the special ids."""

    backend_tokenizer: Any  # tokenizers.Tokenizer, set up: no padding, truncation
    cls_token_id: int | None
    sep_token_id: int | None
    model_max_length: int
    is_fast: bool = True
    truncation_side: str = "right"


def load_tokenizer(folder: Path) -> BertTokenizerFiles:
    """The tokenizer of an :func:`eligible` folder: truncated at the model's length as
    transformers' ``tok(texts, truncation=True, max_length=...)`` does, never padded."""
    from tokenizers import Tokenizer

    tok_config = _json(folder / "tokenizer_config.json")
    special = {**_json(folder / "special_tokens_map.json"), **tok_config}
    limit = tok_config.get("model_max_length")
    limit = int(limit) if isinstance(limit, (int, float)) and limit < _HUGE else 512
    backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    backend.no_padding()
    backend.enable_truncation(limit, stride=0, strategy="longest_first", direction="right")

    def token_id(name: str, default: str) -> int | None:
        value = special.get(name, default)
        text = value.get("content") if isinstance(value, dict) else value
        found = backend.token_to_id(str(text))
        return None if found is None else int(found)

    return BertTokenizerFiles(
        backend, token_id("cls_token", "[CLS]"), token_id("sep_token", "[SEP]"), limit
    )


def load_model(folder: Path, layer: int) -> Any | None:
    """The encoder cut at ``layer``, fp32 on the CPU, its layers fused and packed; None when the
    weight file lacks a tensor this needs (the caller then loads through transformers)."""
    import torch

    from rag_judge.metrics.bertscore import cpu

    if not cpu.can_pack():
        return None
    checkpoint = _checkpoint(folder)
    if checkpoint is None:
        return None
    config, weights = checkpoint
    try:
        with cpu.threads_for(0):  # one reorder per weight: small work
            return _build(torch, cpu, config, weights, layer).eval()
    except (KeyError, ValueError, TypeError):
        return None


def load_gpu_model(folder: Path, layer: int, device: str, dtype: Any) -> Any | None:
    """The encoder cut at ``layer`` on ``device`` (a GPU; any torch device works) in ``dtype``
    (a torch dtype) as :class:`~rag_judge.metrics.bertscore.gpu.GpuBert`; None when the weight
    file is not fp32 or lacks a tensor this needs (the caller then loads through
    transformers)."""
    from rag_judge.metrics.bertscore import gpu

    checkpoint = _checkpoint(folder)
    if checkpoint is None:
        return None
    config, weights = checkpoint
    try:
        model = gpu.build(config, weights, layer, device, dtype)
    except (KeyError, ValueError, TypeError):
        return None
    return model.eval()


def _checkpoint(folder: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """config.json and the encoder's tensors from model.safetensors, task prefix removed; None
    when a floating tensor is not fp32 (transformers' own loading decides how it converts)."""
    import torch
    from safetensors.torch import load_file

    weights = load_file(str(folder / "model.safetensors"))
    for prefix in ("bert.", "model."):  # task checkpoints keep the encoder under a prefix
        if f"{prefix}embeddings.word_embeddings.weight" in weights:
            weights = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
    if any(t.dtype != torch.float32 for t in weights.values() if t.is_floating_point()):
        return None
    return _json(folder / "config.json"), weights


def _build(torch: Any, cpu: Any, config: dict[str, Any], w: dict[str, Any], layer: int) -> Any:
    eps = float(config.get("layer_norm_eps", 1e-12))
    heads = int(config["num_attention_heads"])

    def norm(prefix: str) -> Any:
        out = torch.nn.LayerNorm(w[prefix + ".weight"].shape[0], eps=eps)
        out.weight.data, out.bias.data = w[prefix + ".weight"], w[prefix + ".bias"]
        return out

    def linear(prefix: str, gelu: bool = False) -> Any:
        return cpu.PackedLinear(w[prefix + ".weight"], w[prefix + ".bias"], gelu)

    layers = []
    for i in range(layer):
        p = f"encoder.layer.{i}."
        q, k, v = (f"{p}attention.self.{n}" for n in ("query", "key", "value"))
        qkv = cpu.PackedLinear(
            torch.cat([w[q + ".weight"], w[k + ".weight"], w[v + ".weight"]]),
            torch.cat([w[q + ".bias"], w[k + ".bias"], w[v + ".bias"]]),
        )
        dim = w[q + ".weight"].shape[0]
        layers.append(
            cpu.FastLayer.of_parts(
                qkv,
                linear(p + "attention.output.dense"),
                norm(p + "attention.output.LayerNorm"),
                linear(p + "intermediate.dense", gelu=True),
                None,
                linear(p + "output.dense"),
                norm(p + "output.LayerNorm"),
                heads,
                dim // heads,
            )
        )
    return cpu.FastBert(
        w["embeddings.word_embeddings.weight"], w["embeddings.position_embeddings.weight"],
        w["embeddings.token_type_embeddings.weight"][0], norm("embeddings.LayerNorm"), layers,
    )  # fmt: skip
