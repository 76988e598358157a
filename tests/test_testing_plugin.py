"""rag_judge.testing: ``evaluate`` and ``assert_gates`` in a user's suite, run with pytester.

The inner suites evaluate examples/pytest/rag_quality.yaml (the demo's 34 questions, an
OpenAI judge): a test that runs it without the stub fails for want of a key, so each check
of the marker can fail.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

import pytest

from rag_judge import ExperimentConfig, load_dataset
from rag_judge.errors import ConfigError
from rag_judge.llm.providers import ClientConfig
from rag_judge.pipeline import Pipeline, RunResult
from rag_judge.testing import (
    assert_gates,
    cache_info,
    clear_cache,
    evaluate,
    stub_judges,
    with_stub_judges,
)
from tests import REPO

pytest_plugins = ["pytester"]

EXAMPLE = REPO / "examples" / "pytest"
CONFIG = EXAMPLE / "rag_quality.yaml"
DEMO = REPO / "configs" / "data" / "demo.jsonl"
PLUGIN = "rag_judge.testing.plugin"


def _installed() -> bool:
    """Whether the installed package declares the entry point (an editable install made
    before the table was added does not: such a run names the plugin with -p)."""
    found = importlib.metadata.entry_points(group="pytest11", name="rag_judge")
    return any(ep.value == PLUGIN for ep in found)


# -p and the entry point together would register the module twice, which pytest refuses.
LOAD = [] if _installed() else ["-p", PLUGIN]
ARGS = [*LOAD, "-p", "no:cacheprovider"]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    clear_cache()


def _suite(pytester: pytest.Pytester, body: str) -> None:
    head = (
        "import pytest\n"
        "from rag_judge.errors import ConfigError\n"
        "from rag_judge.testing import assert_gates, evaluate\n"
        f"CONFIG = {str(CONFIG)!r}\n"
    )
    pytester.makepyfile(test_quality=head + body)


# ---- the plugin in a user's suite -------------------------------------------------------------


def test_the_worked_example_passes_with_two_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/pytest.md's example, run where it lies (its config is found beside it). The
    # session runs in this process, so the pipeline's runs are counted here.
    runs: list[str] = []
    original = Pipeline.run

    def counted(self: Pipeline, *args: Any, **kwargs: Any) -> RunResult:
        runs.append(self.config.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "run", counted)
    result = pytester.runpytest(*ARGS, str(EXAMPLE / "test_rag_quality.py"))
    result.assert_outcomes(passed=3)
    assert runs == ["rag-quality", "rag-quality"]


def _fence(page: str, start: str) -> str:
    """The fenced block of ``page`` whose first line starts with ``start``."""
    blocks = re.findall(r"^```\w*\n(.*?)^```$", page, re.M | re.S)
    found = [b for b in blocks if b.startswith(start)]
    assert len(found) == 1, f"{len(found)} blocks start with {start!r}"
    return str(found[0])


def test_the_doc_shows_the_example_and_its_failure_as_they_are() -> None:
    page = (REPO / "docs" / "pytest.md").read_text(encoding="utf-8")
    example = (EXAMPLE / "test_rag_quality.py").read_text(encoding="utf-8")
    assert _fence(page, '"""rag-judge gates inside') == example
    shown = _fence(page, "AssertionError: ").removeprefix("AssertionError: ").rstrip("\n")
    with stub_judges():
        report = evaluate(CONFIG)
    with pytest.raises(AssertionError) as failed:
        assert_gates(report, {"ndcg@5": ">= 0.9", "mrr": ">= 0.5"})
    assert str(failed.value) == shown


def test_a_failed_gate_names_metric_value_interval_threshold_and_samples(
    pytester: pytest.Pytester,
) -> None:
    _suite(
        pytester,
        "pytestmark = pytest.mark.rag_judge_stub\n"
        "def test_passes():\n"
        "    assert_gates(evaluate(CONFIG), {'mrr': '>= 0.5', 'faithfulness': '>= 4'})\n"
        "def test_fails():\n"
        "    assert_gates(evaluate(CONFIG), {'ndcg@5': '>= 0.9', 'mrr': '>= 0.5'})\n",
    )
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: 1 of 2 rag-judge gates failed",
            "*FAIL ndcg@5 = 0.5607 (needs >= 0.9)",
            "*95% CI [[]0.4667, 0.6445] over 34 samples (0 failed)",
            "*worst samples: q11=0, q24=0, q31=0",
            "*PASS mrr = 0.6961 (needs >= 0.5)",
        ]
    )


def test_a_config_runs_once_per_session(pytester: pytest.Pytester) -> None:
    # The conftest counts the pipeline's runs; the last test reads the count.
    pytester.makeconftest(
        "from rag_judge.pipeline import Pipeline\n"
        "RUNS = []\n"
        "ORIGINAL = Pipeline.run\n"
        "def counted(self, *args, **kwargs):\n"
        "    RUNS.append(self.config.name)\n"
        "    return ORIGINAL(self, *args, **kwargs)\n"
        "def pytest_configure(config):\n"
        "    Pipeline.run = counted\n"
        "def pytest_unconfigure(config):\n"
        "    Pipeline.run = ORIGINAL\n"
    )
    _suite(
        pytester,
        "from conftest import RUNS\n"
        "pytestmark = pytest.mark.rag_judge_stub\n"
        "def test_one():\n"
        "    assert_gates(evaluate(CONFIG), {'mrr': '>= 0.5'})\n"
        "def test_two(rag_judge_run):\n"
        "    assert rag_judge_run(CONFIG) is evaluate(CONFIG)\n"
        "def test_three_ran_once():\n"
        "    assert RUNS == ['rag-quality']\n"
        "def test_an_override_is_another_run():\n"
        "    assert evaluate(CONFIG, seed=1).config['seed'] == 1\n"
        "    assert RUNS == ['rag-quality', 'rag-quality']\n",
    )
    pytester.runpytest(*ARGS).assert_outcomes(passed=4)


def test_the_marker_runs_every_judge_on_the_stub(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        "@pytest.fixture(scope='module')\n"
        "def report():\n"
        "    return evaluate(CONFIG)\n"
        "def test_unmarked_needs_the_key():\n"
        "    with pytest.raises(ConfigError, match='OPENAI_API_KEY is not set'):\n"
        "        evaluate(CONFIG)\n"
        "@pytest.mark.rag_judge_stub\n"
        "def test_marked_fixture_runs_on_the_stub(report):\n"
        "    assert report.stub_judged() == {\n"
        "        'a lexical word-overlap heuristic': ['faithfulness', 'answer_relevance']\n"
        "    }\n"
        "def test_unmarked_again_gets_no_stub_report():\n"
        "    with pytest.raises(ConfigError, match='OPENAI_API_KEY'):\n"
        "        evaluate(CONFIG)\n",
    )
    pytester.runpytest(*ARGS).assert_outcomes(passed=3)


def test_the_option_runs_the_whole_session_on_the_stub(pytester: pytest.Pytester) -> None:
    _suite(
        pytester,
        "def test_unmarked():\n    assert evaluate(CONFIG).stub_judged()\n",
    )
    pytester.runpytest(*ARGS).assert_outcomes(failed=1)
    pytester.runpytest(*ARGS, "--rag-judge-stub").assert_outcomes(passed=1)


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*ARGS, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.rag_judge_stub: every judge of a config*"])


# ---- the entry point and the cost of the plugin -----------------------------------------------


def test_pyproject_declares_the_entry_point() -> None:
    # Read by pattern: tomllib is not in Python 3.10's library.
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    table = re.search(r"^\[project\.entry-points\.pytest11\]\n((?:[^\[\n].*\n)*)", text, re.M)
    assert table is not None
    assert table.group(1).strip() == f'rag_judge = "{PLUGIN}"'


def test_the_entry_point_loads_the_plugin_and_no_layer(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pyproject table as an installed package would carry it: pytest finds the plugin
    # with no -p, and a suite that never evaluates imports none of rag-judge's layers.
    site = pytester.mkdir("site")
    info = site / "rag_judge_entry-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rag-judge-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[pytest11]\nrag_judge = {PLUGIN}\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makepyfile(
        test_plain=(
            "import sys\n"
            "def test_plugin_loaded(pytestconfig):\n"
            "    assert pytestconfig.pluginmanager.has_plugin('rag_judge')\n"
            "def test_no_layer_imported():\n"
            "    loaded = sorted(m for m in sys.modules if m.startswith('rag_judge'))\n"
            "    assert loaded == ['rag_judge', 'rag_judge._lazy', 'rag_judge._version',\n"
            "                      'rag_judge.testing', 'rag_judge.testing._stub',\n"
            "                      'rag_judge.testing.plugin']\n"
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


# ---- evaluate and assert_gates as functions ---------------------------------------------------


def _retrieval(**options: object) -> ExperimentConfig:
    retrieval = {"type": "retrieval", "metrics": ["mrr", "ndcg@5"]}
    return ExperimentConfig.model_validate(
        {"evaluators": [retrieval], "bootstrap": {"resamples": 200}, **options}
    )


def test_the_key_is_the_config_and_the_data() -> None:
    samples = list(load_dataset(DEMO).samples)
    first = evaluate(_retrieval(), samples)
    assert evaluate(_retrieval(), samples) is first
    assert evaluate(_retrieval(), DEMO) is not first  # the file: the same data, another key
    assert evaluate(_retrieval(), DEMO).summary == first.summary
    edited = [samples[0].model_copy(update={"relevance": None}), *samples[1:]]
    assert evaluate(_retrieval(), edited).summary["mrr"].errors == 1
    assert evaluate(_retrieval(seed=3), samples).config["seed"] == 3
    assert cache_info().runs == 4 and cache_info().hits == 2


def test_overrides_of_a_config_object_are_validated() -> None:
    with pytest.raises(ValueError, match="max_error_rate"):
        evaluate(_retrieval(dataset=DEMO), max_error_rate=2)


def test_a_regression_names_the_samples_that_got_worse() -> None:
    samples = list(load_dataset(DEMO).samples)
    base = evaluate(_retrieval(), samples)
    # q01's ranking reversed: its relevant passage falls from the top.
    worse = [samples[0].model_copy(update={"contexts": samples[0].contexts[::-1]}), *samples[1:]]
    new = evaluate(_retrieval(), worse)
    with pytest.raises(AssertionError) as failed:
        assert_gates(new, baseline=base, max_drop=0.001, metrics=["mrr"])
    message = str(failed.value)
    assert message.startswith("1 of 1 rag-judge gates failed\nFAIL mrr = ")
    assert "(baseline 0.6961, paired n=34, max_drop 0.001: dropped" in message
    assert "most regressed: q01 1 -> " in message
    assert_gates(new, baseline=base, max_drop=0.05, metrics=["mrr"])  # within the allowance


def test_failed_samples_come_with_their_reasons() -> None:
    samples = list(load_dataset(DEMO).samples)
    unjudged = samples[0].model_copy(update={"relevance": None})
    report = evaluate(_retrieval(), [unjudged, *samples[1:]])
    with pytest.raises(AssertionError) as failed:
        assert_gates(report, {"error_rate": "<= 0", "mrr.ci_low": ">= 0.9"})
    lines = str(failed.value).splitlines()
    assert lines[1].startswith("FAIL error_rate = 0.0294 (needs <= 0)")
    assert lines[2].startswith("     failed samples: q01 (no relevance judgments")
    assert lines[3].startswith("FAIL mrr.ci_low = ")
    assert lines[4].startswith("     mrr = 0.6869, 95% CI [")  # the gate reads a bound: named
    assert lines[6].startswith("     no value: q01 (no relevance judgments")


def test_the_config_gates_serve_when_none_are_given() -> None:
    report = evaluate(_retrieval(dataset=DEMO, gates={"mrr": ">= 0.99"}))
    with pytest.raises(AssertionError, match=r"FAIL mrr = 0.6961 \(needs >= 0.99\)"):
        assert_gates(report)
    with pytest.raises(ConfigError, match="no such metric; did you mean 'mrr'"):
        assert_gates(report, {"mr": ">= 0.5"})
    no_gates = evaluate(_retrieval(dataset=DEMO))
    with pytest.raises(ConfigError, match="no gates to check"):
        assert_gates(no_gates)


# ---- the stub switch ------------------------------------------------------------------------


def test_every_client_moves_to_the_stub() -> None:
    config = ExperimentConfig.model_validate(
        {
            "target": "tests.nowhere:answer",
            "conversation": {"mode": "simulate", "user": {"provider": "openai", "model": "u"}},
            "evaluators": [
                {
                    "type": "judge",
                    "rubrics": ["faithfulness"],
                    "judges": [
                        {"provider": "openai", "model": "a"},
                        {"provider": "openai", "model": "b", "stub": "fixed", "stub_score": 2},
                    ],
                },
                {"type": "grounding", "client": {"provider": "openai", "model": "c"}},
            ],
        }
    )
    stubbed = with_stub_judges(config)
    judge, grounding = stubbed.evaluators
    assert judge.judges == (  # type: ignore[attr-defined]
        ClientConfig(),
        ClientConfig(stub="fixed", stub_score=2),
    )
    assert judge.judge.cache is None  # type: ignore[attr-defined]
    assert grounding.judge.client == ClientConfig()  # type: ignore[attr-defined]
    assert grounding.judge.cache is None  # type: ignore[attr-defined]
    assert stubbed.conversation is not None and stubbed.conversation.user == ClientConfig()
    assert config.evaluators[1].judge.client.provider == "openai"  # type: ignore[attr-defined]


def test_a_stub_config_is_left_as_it_is() -> None:
    config = _retrieval(evaluators=[{"type": "judge", "rubrics": ["faithfulness"], "cache": None}])
    assert with_stub_judges(config) is config
    with stub_judges():
        assert evaluate(config, list(load_dataset(DEMO).samples)[:3]).stub_judged()


def test_a_jury_of_models_runs_on_the_stub() -> None:
    jurors = [{"provider": "openai", "model": "a"}, {"provider": "openai", "model": "b"}]
    config = _retrieval(
        evaluators=[{"type": "judge", "rubrics": ["faithfulness"], "judges": jurors}]
    )
    samples = list(load_dataset(DEMO).samples)[:5]
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        evaluate(config, samples)
    with stub_judges():
        report = evaluate(config, samples)
    assert list(report.jury) == ["faithfulness"]
    assert report.stub_judged()
