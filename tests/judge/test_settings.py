"""The Judge every judged family holds: flat config keys in, flat dumps out, errors named as the
user wrote them, one session per run, limits shared among shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_judge import ConfigError, load_config
from rag_judge.evaluators import GroundingEvaluator, JudgeEvaluator
from rag_judge.judge.pairwise import PairwiseJudge
from rag_judge.judge.settings import Judge
from rag_judge.llm import ClientConfig
from rag_judge.llm.providers.stub import StubClient, fixed
from rag_judge.report.model import JudgeName, Signature, stub_method


def test_the_flat_keys_make_the_judge_and_dump_back_flat() -> None:
    ev = JudgeEvaluator(rubrics=["fluency"], client={"provider": "stub"}, temperature=0.5, n=2)
    assert ev.judge == Judge(client=ClientConfig(provider="stub"), temperature=0.5)
    dumped = ev.model_dump(mode="json")
    assert "judge" not in dumped
    assert dumped["temperature"] == 0.5 and dumped["client"]["provider"] == "stub"
    assert dumped["max_tokens"] == 512 and dumped["cache"] == "default"
    assert JudgeEvaluator.model_validate(dumped) == ev
    # a nested judge is taken as it is
    nested = JudgeEvaluator(
        rubrics=["fluency"], n=2, judge={"temperature": 0.5, "client": {"provider": "stub"}}
    )
    assert nested == ev


def test_a_family_keeps_its_own_judge_defaults() -> None:
    assert GroundingEvaluator().judge.max_tokens == 1024
    assert GroundingEvaluator(temperature=0.3).judge.max_tokens == 1024  # not the Judge default
    assert JudgeEvaluator().judge.max_tokens == 512


def test_pairwise_holds_a_judge_and_keeps_its_seed() -> None:
    pair = PairwiseJudge(client={"provider": "stub"}, cache=None, reask=2, seed=7)
    assert pair.judge.reask == 2 and pair.judge.cache is None and pair.seed == 7
    dumped = pair.model_dump(mode="json")
    assert {"client", "cache", "reask", "max_tokens", "seed"} <= set(dumped)
    assert "temperature" not in dumped and "judge" not in dumped
    with pytest.raises(ValueError, match="temperature"):
        PairwiseJudge(temperature=0.5)  # pairwise asks at 0: not a key of its


def test_an_error_in_a_flat_key_is_named_as_written(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "dataset: d.jsonl\nevaluators:\n  - type: judge\n    rubrics: [fluency]\n"
        "    temperature: 5\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert "evaluators[0].temperature" in message and "judge.temperature" not in message
    assert "c.yaml:5" in message


def test_the_judges_limits_are_shared_among_shards() -> None:
    judge = Judge(client=ClientConfig(provider="stub", concurrency=8, rpm=90))
    shares = [judge.divided(3, k).client for k in range(3)]
    assert [c.concurrency for c in shares] == [3, 3, 2] and {c.rpm for c in shares} == {30.0}


def test_signatures_name_their_judges_structured() -> None:
    ev = JudgeEvaluator(rubrics=["fluency"], client={"provider": "stub"}, cache=None)
    sig = ev.signature("fluency")
    assert sig.judged_by == (JudgeName(provider="stub", model="stub-lexical-support", stub=True),)
    assert sig.options["judge"] == "stub/stub-lexical-support"
    assert stub_method(sig) == "a lexical word-overlap heuristic"
    jury = JudgeEvaluator(
        rubrics=["fluency"],
        judges=[{"provider": "stub"}, {"provider": "stub", "stub": "fixed", "stub_score": 4}],
        cache=None,
    )
    names = jury.signature("fluency").judged_by
    assert [n.text for n in names] == ["stub/stub-lexical-support", "stub/stub-fixed-4"]
    assert all(n.stub for n in names)


def test_a_model_that_is_not_a_stub_is_not_called_one() -> None:
    client = StubClient(fixed(3), model="gpt-judge")
    client.provider = "openai"
    client.is_stub = False
    assert not Judge().open(client).name.stub
    sig = JudgeEvaluator(rubrics=["fluency"], cache=None).prepare(client=client).signatures()
    assert stub_method(sig["fluency"]) is None


def test_a_signature_from_before_structured_judges_reads_them_from_its_text() -> None:
    old = Signature.parse("coherence|judge:jury[stub/stub-lexical-support,openai/gpt-4o]|n:1")
    assert [(n.text, n.stub) for n in old.judged_by] == [
        ("stub/stub-lexical-support", True), ("openai/gpt-4o", False),
    ]  # fmt: skip
    assert "judged_by" not in Signature(name="bleu", options={"tok": "13a"}).model_dump()
