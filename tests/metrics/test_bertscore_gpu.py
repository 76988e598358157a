"""BERTScore's GPU encoder (rag_judge/metrics/bertscore/gpu.py): the same vectors as
transformers' BertModel, built from the weight file for any non-CPU device and dtype, and a
folder it cannot build from loads through transformers. It runs on the CPU too, which is
where CI compares it; the CUDA test skips without a GPU."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_judge.data.sample import Sample
from rag_judge.evaluators.bertscore import METRICS, BERTScoreEvaluator
from rag_judge.metrics.bertscore import encoder as E
from rag_judge.metrics.bertscore import fastbert
from rag_judge.metrics.bertscore import models as M

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
gpu = pytest.importorskip("rag_judge.metrics.bertscore.gpu")


SHAPES = [(1, 3), (7, 19), (64, 40), (2, 512)]


@pytest.fixture(scope="module")
def transformers_states() -> list[tuple[object, tuple[object, ...]]]:
    """Per shape, token ids and transformers' hidden states for them (0: the embeddings'
    output, k: layer k's), from one pass of the whole BertModel."""
    from transformers import AutoModel

    folder = M.resolve_model_dir(M.DEFAULT_MODEL)
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    gen = torch.Generator().manual_seed(0)
    out = []
    with torch.inference_mode():
        for shape in SHAPES:
            ids = torch.randint(999, 30000, shape, generator=gen)
            ids[:, 0], ids[:, -1] = 101, 102
            out.append((ids, model(input_ids=ids, output_hidden_states=True).hidden_states))
    return out


@pytest.mark.parametrize("layer", [0, 1, 6])
def test_gpu_bert_embeds_as_transformers(
    transformers_states: list[tuple[object, tuple[object, ...]]], layer: int
) -> None:
    folder = M.resolve_model_dir(M.DEFAULT_MODEL)
    ours = fastbert.load_gpu_model(folder, layer, "cpu", torch.float32)
    assert isinstance(ours, gpu.GpuBert) and len(ours.layers) == layer
    with torch.inference_mode():
        for (ids, states), shape in zip(transformers_states, SHAPES, strict=True):
            got, want = ours(input_ids=ids)[0], states[layer]
            assert got.shape == want.shape == (*shape, 384)  # type: ignore[attr-defined]
            assert (got - want).abs().max().item() <= 1e-5


def _copy_with(tmp: Path, edit: str) -> Path:
    from safetensors.torch import load_file, save_file

    folder = tmp / "model"
    shutil.copytree(M.resolve_model_dir(M.DEFAULT_MODEL), folder)
    weights = load_file(str(folder / "model.safetensors"))
    if edit == "fp16 weights":
        weights = {k: v.half() if v.is_floating_point() else v for k, v in weights.items()}
    else:
        del weights["encoder.layer.0.attention.self.key.bias"]
    save_file(weights, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("edit", ["fp16 weights", "missing tensor"])
def test_a_file_it_cannot_build_from_is_left_to_transformers(tmp_path: Path, edit: str) -> None:
    folder = _copy_with(tmp_path, edit)
    assert fastbert.load_gpu_model(folder, 6, "cpu", torch.float32) is None


def test_the_store_builds_it_for_other_devices_in_each_dtype() -> None:
    # "meta" stands in for a GPU: it takes the non-CPU branch without one (shapes, no data).
    store = M.ModelStore()
    files = store.locate(M.DEFAULT_MODEL)
    for dtype in M.DTYPES:
        model = store.model(files, 6, "meta", dtype)
        assert isinstance(model, gpu.GpuBert)
        weight = next(model.parameters())
        assert weight.device.type == "meta" and weight.dtype == getattr(torch, M.DTYPES[dtype])
        assert len(model.layers) == 6
    assert not isinstance(store.model(files, 6, "cpu", "fp32"), gpu.GpuBert)
    slow = M.ModelStore(fast=False)
    assert not isinstance(slow.model(slow.locate(M.DEFAULT_MODEL), 6, "meta", "fp32"), gpu.GpuBert)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_it_scores_as_transformers() -> None:
    pairs = [
        ("Invoices are issued on the first day of each period.", "Invoices go out on day one."),
        ("SEPA direct debit is available to customers in the EU only.", "Only EU customers."),
        ("", "An empty answer scores zero."),
    ]
    samples = [Sample(id=str(i), answer=a, references=[r]) for i, (a, r) in enumerate(pairs)]

    def scores(fast: bool, dtype: str) -> np.ndarray:
        runtime = E.EncoderRuntime()
        runtime.models.fast = fast
        ev = BERTScoreEvaluator(device="cuda", dtype=dtype, disk_cache=False)
        result = ev.prepare(runtime=runtime).evaluate(samples)
        files = runtime.models.locate(M.DEFAULT_MODEL)
        model = runtime.models.model(files, 6, "cuda", dtype)  # the one the run loaded
        assert isinstance(model, gpu.GpuBert) == fast and runtime.stats.model_loads == 1
        return np.array([result.scores[m] for m in METRICS], dtype=np.float64)

    assert np.abs(scores(True, "fp32") - scores(False, "fp32")).max() <= 1e-6
    assert np.abs(scores(True, "fp16") - scores(False, "fp16")).max() <= 2e-3
    assert np.abs(scores(True, "bf16") - scores(False, "bf16")).max() <= 1e-2
