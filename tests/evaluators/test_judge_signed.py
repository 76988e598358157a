"""What a judge's signature and dry run claim is what holds: one ``seed`` in a rendered judge
signature (the bootstrap's; the judge's is ``judge_seed``), and a dry run that needs no API key
and leaves no cache file behind (issue 27, items 13, 15 and 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge.evaluators.grounding import GroundingEvaluator
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.llm import ClientConfig
from rag_judge.llm.base import Completion
from rag_judge.llm.cache import SqliteCache
from rag_judge.llm.providers import no_calls
from rag_judge.llm.providers.stub import StubClient
from rag_judge.pipeline import Pipeline
from tests.evaluators import judge_sample

SAMPLES = [judge_sample(i) for i in range(1, 4)]
NO_KEY = {"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "RAG_JUDGE_NO_KEY"}


def _keys(rendered: str) -> list[str]:
    return [part.split(":", 1)[0] for part in rendered.split("|")[1:]]


def test_a_rendered_judge_signature_names_one_seed() -> None:
    judge = JudgeEvaluator(rubrics=["fluency"], cache=None, seed=3)
    grounding = GroundingEvaluator(cache=None, seed=5)
    report = Pipeline([judge, grounding]).run(SAMPLES).report
    for metric, judge_seed in (("fluency", "3"), ("fluency_norm", "3"), ("claim_support", "5")):
        signature = report.signatures[metric]
        assert _keys(signature.render()).count("seed") == 1, signature.render()
        assert signature.options["judge_seed"] == judge_seed and "seed" not in signature.options
        assert signature.run["seed"] == "0"  # the bootstrap's, last in the rendered form


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_JUDGE_NO_KEY", raising=False)


@pytest.mark.parametrize(
    "make",
    [
        lambda cache: JudgeEvaluator(rubrics=["fluency"], cache=cache, client=NO_KEY),
        lambda cache: JudgeEvaluator(
            rubrics=["fluency"], cache=cache, judges=[NO_KEY, {"provider": "stub"}]
        ),
        lambda cache: GroundingEvaluator(cache=cache, client=NO_KEY),
    ],
    ids=["judge", "jury", "grounding"],
)
def test_a_dry_run_needs_no_key_and_creates_no_cache(make, tmp_path: Path, no_key: None) -> None:
    cache = tmp_path / "new" / "judge.sqlite"
    evaluator = make(cache)
    with no_calls() as unchecked:
        estimate = evaluator.dry_run(SAMPLES)
    assert estimate is not None and estimate.requests > 0 and estimate.cache_hits == 0
    assert unchecked and "RAG_JUDGE_NO_KEY is not set" in unchecked[0]
    assert not (tmp_path / "new").exists()
    estimate = evaluator.dry_run(SAMPLES)  # alone, outside any no_calls block, too
    assert estimate.requests > 0 and not (tmp_path / "new").exists()
    with pytest.raises(Exception, match="RAG_JUDGE_NO_KEY is not set"):
        evaluator.prepare()  # a real run still stops before any call


def test_a_dry_run_reads_an_existing_cache_and_leaves_the_folder_as_it_was(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "judge.sqlite"
    judge = JudgeEvaluator(rubrics=["fluency"], cache=cache, client=ClientConfig())
    judge.evaluate(SAMPLES[:2])  # two of the three verdicts cached
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    estimate = judge.dry_run(SAMPLES)
    assert (estimate.requests, estimate.cache_hits) == (1, 2)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
    assert SqliteCache.existing(tmp_path / "absent.sqlite") is None
    assert not (tmp_path / "absent.sqlite").exists()


def test_a_jury_signs_n_as_each_juror_s_server_honoured_it() -> None:
    def replies(count: int) -> StubClient:
        verdict = json.dumps({"reason": "r", "score": 4})
        return StubClient(lambda request: Completion([verdict] * count), model=f"n{count}")

    jurors = [{"provider": "stub", "model": "n3"}, {"provider": "stub", "model": "n1"}]
    judge = JudgeEvaluator(rubrics=["fluency"], cache=None, judges=jurors, n=3, temperature=0.7)
    result = judge.evaluate(SAMPLES, client=[replies(3), replies(1)])
    assert result.signatures["fluency"].options["n"] == "3+3→1"
    assert result.signatures["fluency"].options["judge"] == "jury[stub/n3,stub/n1]"
