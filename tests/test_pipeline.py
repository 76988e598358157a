"""Config validation with file:line errors, the Pipeline, and the Report it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge import ConfigError, Pipeline, Report, RetrievalEvaluator, Sample, load_config
from rag_judge.config import where
from rag_judge.evaluators import EVALUATORS, Evaluator
from rag_judge.resources import resource_dir

DEMO = resource_dir("configs") / "demo.yaml"


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ("evaluators:\n  - type: retrieval\n    metrics: [ndcg@10, ndgc@5]\n", 3,
         "evaluators[0].metrics: unknown retrieval metric 'ndgc@5'; valid metrics: precision@k"),
        ("evaluators:\n  - type: retrieval\n    metrics: [ndcg@0]\n", 3,
         "k must be a positive integer, got '0'"),
        ("evaluators:\n  - type: retrieval\n    metrics: [precision]\n", 3,
         "metric 'precision' needs a cut-off"),
        ("evaluators:\n  - type: retreival\n", 2,
         "unknown evaluator type 'retreival'; valid types: retrieval, rouge, bleu, chrf, ter, "
         "bertscore, judge"),
        ("evaluators:\n  - metrics: [map]\n", 2, "each evaluator needs a 'type'"),
        ("evaluators:\n  - type: retrieval\n    relevance_threshold: 0\n", 3,
         "relevance_threshold: Input should be greater than 0"),
        ("name: x\nseeed: 3\nevaluators: [{type: retrieval}]\n", 2, "seeed: unknown key 'seeed'"),
        ("evaluators: []\n", 1, "evaluators: give at least one evaluator; valid types: retrieval"),
        ("bootstrap:\n  confidence: 1.5\nevaluators: [{type: retrieval}]\n", 2,
         "bootstrap.confidence: Input should be less than 1"),
    ],
)  # fmt: skip
def test_config_errors_name_file_line_key_and_legal_values(
    tmp_path: Path, body: str, line: int, needle: str
) -> None:
    path = write_config(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    assert needle in str(err.value)


def test_two_evaluators_of_one_metric_fail_on_prepare_at_the_second_ones_line(
    tmp_path: Path,
) -> None:
    body = "evaluators:\n  - type: retrieval\n    metrics: [map]\n  - type: retrieval\n"
    path = write_config(tmp_path, body + "    metrics: [map]\n")
    config = load_config(path)  # a judge's names need its rubric files: checked on prepare
    with pytest.raises(ConfigError) as err:
        Pipeline(config).prepare()
    assert where(path, err.value.loc) == f"{path}:4"
    assert "metric 'map' is produced by evaluators[0] and evaluators[1]" in str(err.value)


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"exp.yaml:3: invalid YAML: expected .,. or .\]."):
        load_config(write_config(tmp_path, "evaluators:\n  - [unclosed\n"))
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml")


def test_constructor_validation_without_yaml() -> None:
    with pytest.raises(ValueError, match="unknown retrieval metric 'nope'"):
        RetrievalEvaluator(metrics=["nope"])
    with pytest.raises(ValueError, match="metric listed twice: ndcg@5"):
        RetrievalEvaluator(metrics=["ndcg@5", "NDCG@5"])


def test_registry_matches_each_evaluators_type() -> None:
    for name, cls in EVALUATORS.items():
        assert cls.model_fields["type"].default == name


def test_demo_config_runs_and_writes_the_report(tmp_path: Path) -> None:
    result = Pipeline.from_yaml(DEMO).run()
    report = result.report
    assert len(report.samples) >= 25
    assert report.summary["ndcg@5"].n == len(report.samples)
    assert [r.sample for r in report.samples] == result.samples  # each sample as evaluated
    paths = result.write(tmp_path)
    data = json.loads(paths["json"].read_text())
    assert set(data) >= {
        "summary",
        "samples",
        "signatures",
        "usage",
        "config",
        "created",
        "rag_judge_version",
    }
    assert set(data["summary"]["map"]) >= {"mean", "ci_low", "ci_high", "n", "errors", "kind"}
    assert data["summary"]["map"]["kind"] == "retrieval"
    assert Report.load(paths["json"]).summary == report.summary
    md = paths["md"].read_text()
    assert "| ndcg@5 |" in md and "ci:bootstrap-1000@0.95\\|seed:0" in md


SAMPLES = [
    Sample(id="a", contexts=({"id": "d1"}, {"id": "d2"}), relevance={"d2": 1}),  # type: ignore[arg-type]
    Sample(id="b", contexts=({"id": "d1"},), relevance={"d1": 2, "d5": 1}),  # type: ignore[arg-type]
    Sample(id="c", contexts=({"id": "d1"},)),  # type: ignore[arg-type]  no judgments
    Sample(id="d", contexts=({"text": "no id"},), relevance={"d1": 1}),  # type: ignore[arg-type]
]


def test_pipeline_records_per_sample_errors_and_exact_means() -> None:
    report = Pipeline([RetrievalEvaluator(metrics=["mrr", "recall@1"])]).run(SAMPLES).report
    by_id = {s.id: s for s in report.samples}
    assert by_id["a"].scores == {"mrr": 0.5, "recall@1": 0.0, "judged@1": 0.0}
    assert by_id["b"].scores == {"mrr": 1.0, "recall@1": 0.5, "judged@1": 1.0}
    assert by_id["c"].scores["mrr"] is None
    assert "no relevance judgments" in by_id["c"].errors["mrr"].message
    assert "field 'contexts[0]'" in by_id["d"].errors["mrr"].message
    mrr = report.summary["mrr"]
    assert (mrr.mean, mrr.n, mrr.errors) == (0.75, 2, 2)
    assert mrr.ci_low is not None and mrr.ci_high is not None
    assert mrr.ci_low <= mrr.mean <= mrr.ci_high


def test_bootstrap_is_seeded_and_the_seed_is_in_the_signature() -> None:
    from rag_judge import ExperimentConfig

    def run(seed: int) -> Report:
        cfg = ExperimentConfig(seed=seed, evaluators=[RetrievalEvaluator(metrics=["mrr"])])
        return (
            Pipeline(cfg)
            .run(
                SAMPLES[:2] * 1
                + [
                    Sample(id=f"x{i}", contexts=({"id": "d1"},), relevance={"d1": i % 2})  # type: ignore[arg-type]
                    for i in range(20)
                ]
            )
            .report
        )

    a, b, c = run(1), run(1), run(2)
    assert a.summary == b.summary
    assert a.summary["mrr"].ci_low != c.summary["mrr"].ci_low or (
        a.summary["mrr"].ci_high != c.summary["mrr"].ci_high
    )
    assert a.signatures["mrr"].render().endswith("|seed:1")
    assert c.signatures["mrr"].render().endswith("|seed:2")
    assert a.signatures["mrr"].run["seed"] == "1" and a.signatures["mrr"].same_metric(
        c.signatures["mrr"]
    )  # the interval's seed is a run setting, not an option of the metric


def test_a_crashing_evaluator_fails_only_its_own_metrics() -> None:
    class Boom(Evaluator):
        type: str = "boom"

        def metric_names(self) -> list[str]:
            return ["map"]

        def score(self, samples: object) -> dict[str, list[float]]:
            raise RuntimeError("kaput")

    report = Pipeline([RetrievalEvaluator(metrics=["mrr"]), Boom()]).run(SAMPLES[:2]).report
    assert report.summary["mrr"].n == 2
    assert report.summary["map"].errors == 2
    assert "kaput" in report.samples[0].errors["map"].message


def test_run_result_counts_failed_values_per_step(tmp_path: Path) -> None:
    """What `rag-judge run` checks max_error_rate against: per step (the target, each
    evaluator), failed values / all values; a judge rubric's normalised twin counts once."""
    from rag_judge import ExperimentConfig, JudgeEvaluator

    target = tmp_path / "flaky.py"
    target.write_text(
        "def answer(question):\n"
        "    if 'first' in question:\n"
        "        raise RuntimeError('down')\n"
        "    return {'answer': 'yes', 'contexts': [{'id': 'd1', 'text': 'yes'}]}\n"
    )
    samples = [
        Sample(id="a", question="the first", relevance={"d1": 1}),
        Sample(id="b", question="the second", relevance={"d1": 1}),
        Sample(id="c", question="the third"),  # no judgments: retrieval fails it
    ]
    config = ExperimentConfig(
        target=f"{target}:answer",
        evaluators=[
            RetrievalEvaluator(metrics=["mrr", "map"]),
            JudgeEvaluator(rubrics=["faithfulness"], cache=None),
        ],
    )
    result = Pipeline(config).run(samples)
    assert result.steps == {
        "target": ["latency_s"],
        "evaluators[0] (retrieval)": ["mrr", "map", "judged@10"],
        "evaluators[1] (judge)": ["faithfulness", "faithfulness_norm"],
    }
    # a: the target failed, so a has no answer and no contexts (an empty ranking scores 0,
    # faithfulness lacks its inputs); c has no relevance judgments
    assert result.failure_counts() == {
        "target": (1, 3),
        "evaluators[0] (retrieval)": (3, 9),
        "evaluators[1] (judge)": (1, 3),
    }
