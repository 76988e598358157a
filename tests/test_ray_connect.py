"""How ``executor: ray`` finds its cluster, against a stand-in for the ``ray`` module (no
cluster): a new local one without an address, a one-line ConfigError naming ``ray.address``
when a cluster does not answer or refuses the token, and how the judges' limits are shared."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rag_judge.config import RayConfig
from rag_judge.errors import ConfigError
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.llm import ClientConfig
from rag_judge.pipeline._ray import connect


class AuthenticationError(Exception):
    """Named as Ray's (``ray.exceptions.AuthenticationError``), which connect recognises."""


def _ray(init: Any) -> Any:
    return SimpleNamespace(is_initialized=lambda: False, init=init)


def test_without_an_address_a_new_local_cluster_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    asked: list[Any] = []
    connect(_ray(lambda **kw: asked.append(kw["address"])), RayConfig())
    assert asked == ["local"]  # Ray's own default (None) joins any cluster on the machine
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    connect(_ray(lambda **kw: asked.append(kw["address"])), RayConfig())
    assert asked == ["local", "head:6379"]


def test_a_cluster_that_does_not_answer_is_a_one_line_error_naming_the_address() -> None:
    release = threading.Event()
    hanging = _ray(lambda **kw: release.wait(30))
    try:
        with pytest.raises(ConfigError) as caught:
            connect(hanging, RayConfig(address="head:6379", connect_timeout=0.05))
    finally:
        release.set()
    message = str(caught.value)
    assert message.startswith("ray.address 'head:6379': no Ray cluster answered within 0.05 s")
    assert "RAY_AUTH_TOKEN" in message and "\n" not in message


def test_a_refused_token_or_a_failed_join_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(**kw: Any) -> None:
        try:
            try:
                raise AuthenticationError("RPC error: InvalidAuthToken: token is missing")
            except AuthenticationError as exc:
                raise RuntimeError("Failed to connect to GCS") from exc
        except RuntimeError:
            raise ConnectionError("Failed to connect to Ray cluster at head:6379") from None

    def failed(**kw: Any) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at head:6379.\nMore lines")

    with pytest.raises(ConfigError) as caught:
        connect(_ray(refused), RayConfig(address="head:6379"))
    assert str(caught.value).startswith(
        "ray.address 'head:6379': the Ray cluster refused this process's token"
    )
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    with pytest.raises(ConfigError) as caught:
        connect(_ray(failed), RayConfig())
    assert str(caught.value) == (
        "RAY_ADDRESS 'head:6379': could not join the Ray cluster: ConnectionError: "
        "Failed to connect to Ray cluster at head:6379."
    )


def test_a_judges_concurrency_is_shared_among_the_shards_in_whole_calls() -> None:
    client = ClientConfig(provider="stub", concurrency=8, rpm=90)
    judge = JudgeEvaluator(rubrics=["faithfulness"], client=client, cache=None)
    copies = [judge.for_shard(3, k) for k in range(3)]
    assert [c.judge.client.concurrency for c in copies] == [3, 3, 2]
    assert {c.judge.client.rpm for c in copies} == {30.0}
    # More shards than calls: one call each, the least a shard can run with.
    many = [judge.for_shard(10, k) for k in range(10)]
    assert {c.judge.client.concurrency for c in many} == {1}


def test_the_readme_ray_example_is_a_valid_ray_config() -> None:
    import yaml

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in readme.split("```yaml\n")[1:] if b.startswith("executor: ray\n")]
    data = yaml.safe_load(block.split("```", 1)[0])
    assert RayConfig.model_validate(data["ray"]) == RayConfig(
        address="ray://head:10001", shards=8, connect_timeout=60, retries=3
    )


def test_the_shards_signatures_merge_option_by_option() -> None:
    from rag_judge.evaluators.base import EvaluatorResult, merged_signature
    from rag_judge.evaluators.sacrebleu import BleuEvaluator
    from rag_judge.report.model import Signature
    from tests.evaluators import judge_sample

    logprobs = Signature(name="m", options={"judge": "x", "scoring": "logprobs", "n": "1"})
    integer = Signature(name="m", options={"judge": "x", "scoring": "integer", "n": "1"})
    assert merged_signature([logprobs, integer]).options == {
        "judge": "x", "scoring": "mixed", "n": "1"
    }  # fmt: skip
    assert merged_signature([logprobs, logprobs]) == logprobs
    # sacrebleu's own word for shards with different reference counts, as over every sample
    two = [judge_sample(i, references=[f"ref {i}", "other"]) for i in (1, 2)]
    one = [judge_sample(i) for i in (3, 4)]
    bleu = BleuEvaluator()
    whole = bleu.evaluate(two + one)
    assert "nrefs:var" in whole.signatures["bleu"].render()
    joined = EvaluatorResult.concat(
        [bleu.evaluate(two), bleu.evaluate(one)], merge=bleu.merge_signature
    )
    assert joined.signatures == whole.signatures
