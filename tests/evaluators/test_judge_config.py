"""JudgeEvaluator configuration: shape-only validation, prepare(), the cache folder, metric
info, dry runs and clients that lack capabilities."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rag_judge.config import load_config
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import DryRun
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.llm.base import Completion, CompletionRequest
from rag_judge.llm.providers.stub import StubClient
from rag_judge.report.model import MetricInfo, MetricKind
from tests.evaluators import judge_sample


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"rubrics": ["faithfullness"]}, "unknown rubric 'faithfullness'; built-in rubrics:"),
        ({"rubrics": ["fluency", "fluency"]}, "rubric name used twice: fluency"),
        ({"n": 3}, "need temperature > 0"),
        ({"n": 2, "temperature": 1.0, "logprobs": True}, "use n=1 with it"),
        ({"reask": 5}, "reask"),
        ({"rubrics": [{"name": "x", "criteria": "c"}]}, "'levels' (a description"),
        ({"client": {"provider": "gpt"}}, "client.provider"),
    ],
)
def test_invalid_configs_are_rejected_with_the_reason(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as err:
        JudgeEvaluator.model_validate({"type": "judge", "cache": None, **config})
    assert message in str(err.value)


def test_validation_reads_no_file_and_prepare_loads_the_templates(tmp_path: Path) -> None:
    # Validation checks the shape only: a template that is missing or broken fails in prepare.
    missing = JudgeEvaluator(rubrics=[{"name": "x", "template": "missing.j2"}], cache=None)
    assert missing.metric_names() == ["x", "x_norm"]
    with pytest.raises(ConfigError, match=r"'missing\.j2' not found"):
        missing.prepare()
    broken = tmp_path / "broken.j2"
    broken.write_text("{{ answer ", encoding="utf-8")
    judge = JudgeEvaluator(rubrics=[str(broken)], cache=None)  # the file is not read yet
    with pytest.raises(ConfigError, match=r"broken\.j2"):
        judge.prepare()
    with pytest.raises(ConfigError, match=r"broken\.j2"):
        judge.evaluate([judge_sample(1)])
    absent = JudgeEvaluator(rubrics=[str(tmp_path / "absent.yaml")], cache=None)
    with pytest.raises(ConfigError, match="rubric file not found"):
        absent.metric_names()  # names need the file: read when they are asked for
    good = JudgeEvaluator(rubrics=["fluency"], cache=None)
    good.prepare()
    good.prepare()  # idempotent


def test_inline_and_yaml_rubrics(tmp_path: Path) -> None:
    levels = {i: f"level {i}" for i in range(1, 6)}
    path = tmp_path / "tone.yaml"
    path.write_text(
        "name: tone\ninputs: [answer]\ncriteria: Polite.\nlevels: "
        + json.dumps(levels) + "\n", encoding="utf-8",
    )  # fmt: skip
    judge = JudgeEvaluator.model_validate(
        {
            "type": "judge", "cache": None,
            "rubrics": [{"name": "brevity", "inputs": ["answer"], "criteria": "Short.",
                         "levels": levels}, str(path)],
        }
    )  # fmt: skip
    assert judge.metric_names() == ["brevity", "brevity_norm", "tone", "tone_norm"]
    result = judge.evaluate(
        [judge_sample(1)], client=StubClient(lambda r: '{"reason":"r","score":2}')
    )
    assert result.scores["brevity"] == [2] and result.scores["tone_norm"] == [0.25]
    assert json.loads(judge.model_dump_json())["rubrics"][1] == str(path)


def test_dry_run_counts_prompts_and_skips() -> None:
    samples = [judge_sample(1), judge_sample(2, references=[], contexts=["a", "b", "c"])]
    judge = JudgeEvaluator(cache=None)  # faithfulness, answer_relevance, correctness, ctx rel.
    plan = judge.dry_run(samples)
    assert isinstance(plan, DryRun)
    assert plan.prompts == (3 + 1) + (2 + 3)
    assert plan.skipped == 1 and plan.requests == plan.prompts
    assert plan.prompt_tokens_estimate > 0 and plan.cost_estimate is None


def test_default_cache_follows_the_cache_folder_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = JudgeEvaluator(rubrics=["fluency"])
    assert judge.judge.cache == "default"
    monkeypatch.setenv("RAG_JUDGE_CACHE_DIR", str(tmp_path / "cache"))  # read at run time
    assert judge.judge.cache_path() == tmp_path / "cache" / "judge.sqlite"
    judge.evaluate([judge_sample(1)])
    assert (tmp_path / "cache" / "judge.sqlite").is_file()
    assert JudgeEvaluator(cache=None).judge.cache_path() is None


def test_metric_info_names_the_kind_the_scale_and_the_twin() -> None:
    judge = JudgeEvaluator(rubrics=["fluency"], cache=None)
    assert judge.metric_info("fluency") == MetricInfo(kind=MetricKind.JUDGE, scale=(1, 5))
    assert judge.metric_info("fluency_norm") == MetricInfo(
        kind=MetricKind.JUDGE, scale=(0, 1), normalises="fluency"
    )


def test_a_client_without_capabilities_is_a_clear_error() -> None:
    class Bare:
        provider, model, base_url = "bare", "bare-1", None

        async def complete(self, request: CompletionRequest) -> Completion:
            raise AssertionError("never called")

    with pytest.raises(ConfigError, match="lacks the capability attribute"):
        JudgeEvaluator(rubrics=["fluency"], cache=None).evaluate([judge_sample(1)], client=Bare())  # type: ignore[arg-type]


def test_a_relative_cache_path_in_a_config_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "experiments"
    folder.mkdir()
    config = folder / "judge.yaml"
    judges = [
        "  - {type: judge, rubrics: [fluency], cache: cache/judge.sqlite}",
        "  - {type: judge, rubrics: [coherence], cache: default}",
        f"  - {{type: judge, rubrics: [faithfulness], cache: {tmp_path / 'abs.sqlite'}}}",
        "  - {type: judge, rubrics: [correctness], cache: null}",
        "  - {type: judge, rubrics: [answer_relevance], cache: ~/judge.sqlite}",
    ]
    config.write_text("evaluators:\n" + "\n".join(judges) + "\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("RAG_JUDGE_CACHE_DIR", raising=False)

    relative, default, absolute, none, home = load_config(config).evaluators
    assert isinstance(relative, JudgeEvaluator) and isinstance(default, JudgeEvaluator)
    assert relative.judge.cache_path() == folder / "cache" / "judge.sqlite"
    assert default.judge.cache == "default"  # the default follows the working folder, as before
    assert default.judge.cache_path() == elsewhere / ".rag_judge_cache" / "judge.sqlite"
    assert isinstance(absolute, JudgeEvaluator) and absolute.judge.cache == tmp_path / "abs.sqlite"
    assert isinstance(none, JudgeEvaluator) and none.judge.cache is None
    assert isinstance(home, JudgeEvaluator) and home.judge.cache == Path("~/judge.sqlite")

    relative.evaluate([judge_sample(1)])  # the stub, cached next to the config
    assert (folder / "cache" / "judge.sqlite").is_file()
    assert not (elsewhere / "cache").exists()
    # A judge built in code is not a config: its relative path is the working folder's.
    assert JudgeEvaluator(cache=Path("c.sqlite")).judge.cache_path() == Path("c.sqlite")
