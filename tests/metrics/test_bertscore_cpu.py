"""BERTScore's fast fp32 CPU path: the sped-up model computes what the unchanged one does,
changes that fail the probe are undone, batches hold one length, and the batch tokenizer gives
the tokenizer's own ids. Scores against bert-score: test_bertscore.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from rag_judge.metrics.bertscore import encoder as E
from rag_judge.metrics.bertscore import models as M
from rag_judge.metrics.bertscore.encoder import _equal_length_batches

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
cpu = pytest.importorskip("rag_judge.metrics.bertscore.cpu")

TEXTS = [
    "A man is playing a guitar.",
    "A man plays the guitar.",
    "The cat is sleeping on the sofa.",
    "A cat sleeps on the couch.",
    "Heavy rain caused flooding in the city.",
    "The city was flooded after torrential rain.",
    "Paris is the capital of France.",
    "",
]


def _plain_model(attn: str = "sdpa") -> Any:
    from transformers import AutoModel

    folder = M.resolve_model_dir(M.DEFAULT_MODEL)
    model = AutoModel.from_pretrained(folder, local_files_only=True, attn_implementation=attn)
    model.pooler = None
    return model.eval()


def _ids(n: int, length: int, seed: int) -> Any:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(1000, 20000, (n, length), generator=gen)


@pytest.fixture
def precision() -> Iterator[None]:
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


needs_onednn = pytest.mark.skipif(not cpu.can_pack(), reason="oneDNN packed linear unavailable")


@pytest.mark.slow
@needs_onednn
def test_sped_up_model_computes_what_the_plain_one_does() -> None:
    plain, fast = _plain_model(), _plain_model(cpu.ATTENTION)
    assert cpu.speed_up(fast) == ["fast layers"]
    assert all(isinstance(layer, cpu.FastLayer) for layer in fast.encoder.layer)
    with torch.inference_mode():
        for n, length in ((1, 5), (7, 19), (64, 23)):
            x = _ids(n, length, seed=n)
            want, got = plain(input_ids=x)[0], fast(input_ids=x)[0]
            scale = float(want.abs().max())
            assert float((got - want).abs().max()) <= 1e-5 * scale


@needs_onednn
def test_a_change_that_fails_the_probe_is_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _plain_model(cpu.ATTENTION)
    original = list(model.encoder.layer)
    wrong = cpu.FastLayer.forward

    def off_by_a_bit(self: Any, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
        return wrong(self, hidden_states, *args, **kwargs) * 1.01

    monkeypatch.setattr(cpu.FastLayer, "forward", off_by_a_bit)
    kept = cpu.speed_up(model)
    assert "fast layers" not in kept and "packed linears" in kept  # the fallback still applies
    assert list(model.encoder.layer) == original  # the same layer objects, their linears packed
    assert isinstance(model.encoder.layer[0].attention.self.query, cpu.PackedLinear)


@needs_onednn
def test_a_model_of_another_shape_gets_packed_linears_only() -> None:
    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(50, 16)
            self.proj = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8))

        def get_input_embeddings(self) -> Any:
            return self.embed

        def forward(self, input_ids: Any) -> tuple[Any]:
            return (self.proj(self.embed(input_ids)),)

    model = Tiny().eval()
    x = _ids(2, 4, seed=0) % 50
    with torch.inference_mode():
        want = model(x)[0]
    assert cpu.speed_up(model) == ["packed linears"]
    assert all(isinstance(m, cpu.PackedLinear) for m in model.proj)
    with torch.inference_mode():
        np.testing.assert_allclose(model(x)[0].numpy(), want.numpy(), rtol=0, atol=1e-5)


def test_nothing_changes_where_fp32_products_may_lose_precision(precision: None) -> None:
    torch.set_float32_matmul_precision("medium")  # bf16 products allowed
    assert not cpu.can_pack()
    model = _plain_model(cpu.ATTENTION)
    assert cpu.speed_up(model) == []
    assert type(model.encoder.layer[0].attention.self.query) is torch.nn.Linear


def test_batches_hold_one_length_at_near_equal_sizes() -> None:
    lengths = np.array([5, 3, 5, 5, 3, 9] + [4] * 10, dtype=np.int64)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches = [b.tolist() for b in _equal_length_batches(order, lengths, 4)]
    assert [i for b in batches for i in b] == order  # every text once, in order
    for batch in batches:
        assert len(batch) <= 4 and len({int(lengths[i]) for i in batch}) == 1
    assert [len(b) for b in batches if lengths[b[0]] == 4] == [4, 3, 3]  # not 4, 4, 2
    assert list(_equal_length_batches([], lengths, 4)) == []


@pytest.mark.slow
def test_embeddings_do_not_depend_on_batch_size_or_order() -> None:
    runs = []
    for batch_size, texts in ((1, TEXTS), (3, TEXTS[::-1]), (64, TEXTS)):
        enc = E.Encoder.open(M.DEFAULT_MODEL, 6, "cpu", batch_size=batch_size,
                             runtime=E.EncoderRuntime())  # fmt: skip
        runs.append(enc.encode(texts))
    for other in runs[1:]:
        assert sorted(other) == sorted(runs[0])
        for text, emb in other.items():
            assert emb.ids.tolist() == runs[0][text].ids.tolist()
            np.testing.assert_allclose(emb.vectors, runs[0][text].vectors, rtol=0, atol=1e-6)


def _runtime(fast: bool) -> E.EncoderRuntime:
    runtime = E.EncoderRuntime()
    runtime.models.fast = fast  # False: transformers loads the tokenizer and the model
    return runtime


@pytest.mark.parametrize("fast", [True, False], ids=["fastbert", "transformers"])
def test_batch_tokenizer_gives_the_tokenizers_own_ids(fast: bool) -> None:
    enc = E.Encoder.open(M.DEFAULT_MODEL, 6, "cpu", runtime=_runtime(fast))
    tok = _runtime(False).models.tokenizer(enc.files.folder)  # transformers' own tokenizer
    long = "word " * 1000  # truncated to the model's length, [SEP] kept last
    texts = [*TEXTS, long, "  spaces  ", "naïve café — ünïcödé"]
    want = tok(texts, add_special_tokens=True, truncation=True, max_length=M.max_tokens(tok))
    shared = tok.backend_tokenizer.truncation
    got = enc.tokenize(texts)
    assert got == want["input_ids"]
    assert len(got[len(TEXTS)]) == M.max_tokens(tok) and got[len(TEXTS)][-1] == tok.sep_token_id
    assert tok.backend_tokenizer.truncation == shared  # ours is a private copy


def test_small_batches_run_on_one_thread_and_large_ones_on_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a busy machine every parallel operation of a small batch waits at its barrier for a
    # descheduled thread (issue 27, item 21): such batches, the probe and the weights' reorder
    # take one thread; a batch of SMALL_BATCH_TOKENS tokens or more keeps torch's threads.
    runtime = _runtime(False)  # the transformers path (its load runs speed_up)
    enc = E.Encoder.open(M.DEFAULT_MODEL, 6, "cpu", batch_size=64, runtime=runtime)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[tuple[int, int]] = []
        loading: list[int] = []
        speed_up = cpu.speed_up
        monkeypatch.setattr(
            cpu, "speed_up", lambda m: loading.append(torch.get_num_threads()) or speed_up(m)
        )
        model = runtime.models.model(enc.files, 6, "cpu", "fp32")
        forward = model.forward

        def counting(*args: Any, **kwargs: Any) -> Any:
            seen.append((int(kwargs["input_ids"].numel()), torch.get_num_threads()))
            return forward(*args, **kwargs)

        monkeypatch.setattr(model, "forward", counting)
        small = ["a short text", "another short one"]
        # 64 texts of one length: 64 x 18 tokens, above the threshold.
        large = [f"text number {i} " + "word " * 14 for i in range(64)]
        enc.encode(small + large)
        assert loading == [1] and torch.get_num_threads() == 2
        assert {threads for tokens, threads in seen if tokens < cpu.SMALL_BATCH_TOKENS} == {1}
        assert {threads for tokens, threads in seen if tokens >= cpu.SMALL_BATCH_TOKENS} == {2}
    finally:
        torch.set_num_threads(before)
