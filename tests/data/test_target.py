"""The target callable: resolving it, calling it concurrently, recording latency and failures."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rag_judge.data.jsonl import read_jsonl
from rag_judge.data.sample import Sample
from rag_judge.data.target import resolve_target, run_target, run_target_sync
from rag_judge.errors import ConfigError
from tests import REPO

ROOT = REPO
DEMO5 = read_jsonl(ROOT / "configs" / "data" / "demo.jsonl").samples[:5]


@pytest.mark.parametrize("name", ["answer", "aanswer"])
def test_toy_rag_fills_answers_and_ranked_contexts(name: str) -> None:
    target = resolve_target(f"examples/toy_rag.py:{name}", base_dir=ROOT)
    run = run_target_sync(target, DEMO5, concurrency=2)
    toy = resolve_target("examples/toy_rag.py:answer", base_dir=ROOT)
    assert run.errors == [None] * 5 and run.failures == 0
    assert all(t is not None and t > 0 for t in run.latency)
    for before, after in zip(DEMO5, run.samples):
        assert before.question is not None
        expected = toy(before.question)
        assert after.answer == expected["answer"] and after.answer
        assert [c.id for c in after.contexts] == [c["id"] for c in expected["contexts"]]
        scores = [c.score for c in after.contexts]
        assert len(scores) == 4 and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        # the gold data stays; the dataset's own contexts and answer are replaced
        assert (after.id, after.question) == (before.id, before.question)
        assert (after.references, after.relevance) == (before.references, before.relevance)
    # q02's toy answer, checked by hand against the corpus
    assert run.samples[1].answer.startswith("When a client exceeds its rate limit")  # type: ignore[union-attr]
    assert run.samples[1].contexts[0].id == "d012"


def test_module_spec_and_string_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    target = resolve_target("examples.toy_rag:aanswer")
    assert asyncio.iscoroutinefunction(target)
    run = asyncio.run(run_target("examples.toy_rag:answer", DEMO5[:2]))
    assert run.failures == 0 and run.samples[0].contexts


def questions(*qs: str) -> list[Sample]:
    return [Sample(id=f"s{i}", question=q, references=("ref",)) for i, q in enumerate(qs)]


async def flaky(question: str) -> tuple[str, list[str]]:
    if question == "boom":
        raise RuntimeError("index unavailable")
    if question == "slow":
        await asyncio.sleep(30)  # cancelled by the 0.2 s timeout
    await asyncio.sleep(0.01)
    return f"answer to {question}", [f"ctx of {question}"]


def test_a_raise_and_a_timeout_are_recorded_the_rest_run() -> None:
    start = time.perf_counter()
    run = run_target_sync(flaky, questions("a", "boom", "slow", "b"), timeout=0.2)
    assert time.perf_counter() - start < 5
    assert run.errors == [None, "RuntimeError: index unavailable", "timed out after 0.2 s", None]
    assert [s.answer for s in run.samples] == ["answer to a", None, None, "answer to b"]
    assert [len(s.contexts) for s in run.samples] == [1, 0, 0, 1]
    assert run.latency[1] is None and run.latency[2] is None
    assert run.latency[0] is not None and 0.01 <= run.latency[0] < 0.2
    assert [s.references for s in run.samples] == [("ref",)] * 4
    assert run.failures == 2


def test_sync_target_failure_and_missing_question() -> None:
    def target(question: str) -> dict[str, Any]:
        if question == "bad":
            raise KeyError("x")
        return {"answer": question.upper()}

    samples = [*questions("ok", "bad"), Sample(id="nq")]
    run = run_target_sync(target, samples)
    assert run.errors == [None, "KeyError: 'x'", "the sample has no question"]
    assert run.samples[0].answer == "OK" and run.samples[0].contexts == ()


@dataclass
class Output:
    answer: Any
    contexts: Any = None


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"answer": "a", "contexts": ["t"]}, None),
        (("a", [{"id": "d1", "text": "t", "score": 0.3}]), None),
        (Output("a", ["t"]), None),
        ("just a string", "target returned str; expected a dict {'answer'"),
        (("a", ["t"], 3), "target returned a tuple of 3; expected"),
        ({"answer": "a", "context": ["t"]}, "a dict with unknown key 'context'; expected"),
        ({"contexts": []}, "a dict with no 'answer' key"),
        (Output(42), "an answer of type int, not str"),
        (("a", "t"), "contexts of type str; expected a list"),
        (
            ("a", [{"id": "d1"}, {"id": "d1"}]),
            "invalid output: doc id 'd1' appears twice in the ranking of query 's0'",
        ),
        (("a", [{"id": "d1", "score": "high"}]), "invalid output: 'contexts[0].score'"),
    ],
)
def test_return_shapes(value: Any, error: str | None) -> None:
    run = run_target_sync(lambda q: value, questions("q"))
    if error is None:
        assert run.errors == [None] and run.samples[0].answer == "a"
        assert run.samples[0].contexts[0].text == "t"
    else:
        assert run.errors[0] is not None and error in run.errors[0]
        assert run.samples[0].answer is None and run.latency == [None]


def test_async_concurrency_never_exceeds_the_limit() -> None:
    in_flight = peak = 0

    async def target(question: str) -> tuple[str, list[str]]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return question, []

    run = run_target_sync(target, questions(*"abcdefghij"), concurrency=3)
    assert peak == 3 and [s.answer for s in run.samples] == list("abcdefghij")


def test_sync_concurrency_never_exceeds_the_limit() -> None:
    lock = threading.Lock()
    in_flight = peak = 0

    def target(question: str) -> tuple[str, list[str]]:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.03)
        with lock:
            in_flight -= 1
        return question, []

    run = run_target_sync(target, questions(*"abcdefgh"), concurrency=3)
    assert 1 < peak <= 3 and [s.answer for s in run.samples] == list("abcdefgh")
    run = run_target_sync(target, questions(*"abcd"), concurrency=1)
    assert peak <= 3 and run.failures == 0


def test_run_target_sync_inside_a_running_loop() -> None:
    async def main() -> list[str | None]:
        run = run_target_sync(flaky, questions("x", "y"))  # e.g. from a notebook cell
        return [s.answer for s in run.samples]

    assert asyncio.run(main()) == ["answer to x", "answer to y"]


def test_bad_settings() -> None:
    with pytest.raises(ConfigError, match="concurrency must be an integer >= 1, got 0"):
        run_target_sync(flaky, questions("a"), concurrency=0)
    with pytest.raises(ConfigError, match="timeout must be > 0 seconds or None, got -1"):
        run_target_sync(flaky, questions("a"), timeout=-1)


def test_bad_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.py").write_text("import not_a_module_zz\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('no config')\n")
    (tmp_path / "ok.py").write_text("VALUE = 3\ndef f(q):\n    return q, []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = {
        "no_colon": "expected 'package.module:function' or 'path/to/file.py:function'",
        "mod:": "expected 'package.module:function'",
        "no_such_mod_zz.sub:f": "no module named 'no_such_mod_zz' (is it installed",
        "broken:f": "importing broken failed: No module named 'not_a_module_zz'",
        "raises:f": "importing raises failed: RuntimeError: no config",
        "ok:g": "ok has no attribute 'g'",
        "ok:VALUE": "VALUE is a int, not callable",
        "missing.py:f": "missing.py not found",
        "raises.py:f": "raises.py failed: RuntimeError: no config",
    }
    for spec, needle in cases.items():
        with pytest.raises(ConfigError) as err:
            resolve_target(spec, base_dir=tmp_path)
        assert str(err.value).startswith(f"target {spec!r}: ") and needle in str(err.value), spec
    assert resolve_target("ok.py:f", base_dir=tmp_path)("q") == ("q", [])
    assert resolve_target("ok:f.__call__")("q") == ("q", [])  # a dotted attribute path


def test_a_timed_out_sync_call_is_abandoned_not_awaited() -> None:
    def target(question: str) -> tuple[str, list[str]]:
        time.sleep(0.6 if question == "slow" else 0.0)
        return question, []

    start = time.perf_counter()
    run = run_target_sync(target, questions("slow", "fast"), timeout=0.1)
    assert time.perf_counter() - start < 0.5  # the worker thread finishes in the background
    assert run.errors == ["timed out after 0.1 s", None]
