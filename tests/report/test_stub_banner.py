"""A stub judge's scores are said to be a heuristic: on the terminal and in report.html."""

from __future__ import annotations

from rag_judge import ExperimentConfig, JudgeEvaluator, Pipeline, RetrievalEvaluator
from rag_judge.cli.run import run_header
from rag_judge.llm import ClientConfig
from rag_judge.report.html import render_html
from rag_judge.report.model import JudgeName, Report, Signature
from tests.evaluators import judge_sample

SAMPLES = [judge_sample(i, relevance={f"d{i}": 1}) for i in (1, 2)]


def _report() -> Report:
    judge = JudgeEvaluator(rubrics=["faithfulness"], cache=None)  # the stub is the default
    return Pipeline([RetrievalEvaluator(metrics=["mrr"]), judge]).run(SAMPLES).report


def test_a_stub_judged_run_says_so_on_the_terminal_and_in_the_page() -> None:
    report = _report()
    assert report.stub_judged() == {"a lexical word-overlap heuristic": ["faithfulness"]}
    judge = JudgeEvaluator(rubrics=["faithfulness"], cache=None)
    # Said before the run's first step, from the config.
    lines = run_header(ExperimentConfig(evaluators=[RetrievalEvaluator(metrics=["mrr"]), judge]))
    assert lines[0] == "rag-judge: evaluators: retrieval, judge · judge: stub/stub-lexical-support"
    assert "faithfulness scored by the stub judge, a lexical word-overlap heuristic" in lines[1]
    page = render_html(report)
    assert (
        "<b>Stub judge.</b> faithfulness was scored by the stub provider: a lexical word-overlap "
        "heuristic, for offline runs and CI" in page
    )


def test_a_fixed_stub_is_named_as_a_fixed_score() -> None:
    judge = JudgeEvaluator(
        rubrics=["faithfulness", "correctness"],
        client=ClientConfig(provider="stub", stub="fixed", stub_score=5),
        cache=None,
    )
    report = Pipeline([judge]).run(SAMPLES).report
    assert report.stub_judged() == {"a fixed score of 5": ["faithfulness", "correctness"]}
    assert (
        "faithfulness, correctness scored by the stub judge, a fixed score of 5"
        in run_header(ExperimentConfig(evaluators=[judge]))[1]
    )
    assert "faithfulness, correctness were scored by the stub provider: a fixed score of 5" in (
        render_html(report)
    )


def test_a_model_judged_run_has_no_stub_banner() -> None:
    report = _report()
    sig = report.signatures["faithfulness"]
    options = {**sig.options, "judge": "openai/gpt-4o-mini"}
    model = (JudgeName(provider="openai", model="gpt-4o-mini"),)
    report.signatures["faithfulness"] = sig.model_copy(
        update={"options": options, "judged_by": model}
    )
    assert report.stub_judged() == {}
    server = "http://127.0.0.1:9/v1"  # a local server needs no key; nothing is called
    model = JudgeEvaluator(
        rubrics=["faithfulness"],
        client=ClientConfig(provider="openai", model="gpt-4o-mini", base_url=server),
    )
    assert run_header(ExperimentConfig(evaluators=[model])) == [
        "rag-judge: evaluators: judge · judge: openai/gpt-4o-mini"
    ]
    assert "Stub judge." not in render_html(report)
    assert isinstance(report.signatures["faithfulness"], Signature)


def test_a_jury_with_stub_judges_says_so() -> None:
    judges = (
        ClientConfig(provider="stub"),
        ClientConfig(provider="stub", stub="fixed", stub_score=2),
        ClientConfig(provider="stub", stub="fixed", stub_score=5),
    )
    judge = JudgeEvaluator(rubrics=["faithfulness"], judges=judges, cache=None)
    report = Pipeline([judge]).run(SAMPLES).report
    assert report.signatures["faithfulness"].judges() == [
        "stub/stub-lexical-support",
        "stub/stub-fixed-2",
        "stub/stub-fixed-5",
    ]
    way = "a lexical word-overlap heuristic and a fixed score of 2 and a fixed score of 5"
    assert report.stub_judged() == {way: ["faithfulness"]}
    # One model on the jury is enough for the banner to say which rubrics a stub touched.
    sig = report.signatures["faithfulness"]
    jury = "jury[openai/gpt-4o-mini,stub/stub-fixed-2]"
    jurors = (
        JudgeName(provider="openai", model="gpt-4o-mini"),
        JudgeName(provider="stub", model="stub-fixed-2", stub=True),
    )
    report.signatures["faithfulness"] = sig.model_copy(
        update={"options": {**sig.options, "judge": jury}, "judged_by": jurors}
    )
    assert report.stub_judged() == {"a fixed score of 2": ["faithfulness"]}
