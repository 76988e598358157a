"""The evaluator contract: a user's class runs through Pipeline and YAML with any of the three
hooks (``score``, ``statistics``, its own run from ``prepare``); the base class does the
bookkeeping (missing inputs, the scatter, corpus rows, signatures); a broken class fails early."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import pytest
from numpy.typing import NDArray

from rag_judge import (
    EVALUATORS,
    ConfigError,
    Evaluator,
    EvaluatorResult,
    ExperimentConfig,
    Pipeline,
    RetrievalEvaluator,
    Sample,
    load_config,
)
from rag_judge._version import __version__
from rag_judge.evaluators.base import EvaluatorRun, Final, Statistics
from rag_judge.report.model import FailureKind, MetricKind, Signature
from tests.evaluators.custom import ExactMatch

SAMPLES = [
    Sample(id="a", answer="Paris", references=["Paris"]),
    Sample(id="b", answer="paris ", references=["Paris", "Lyon"]),
    Sample(id="c", answer="Rome", references=["Paris"]),
    Sample(id="d", references=["Paris"]),
]


def test_a_user_evaluator_runs_through_pipeline() -> None:
    # The defect: the config's evaluator union was frozen at import (union_tag_invalid).
    report = Pipeline([ExactMatch(casefold=True)]).run(SAMPLES).report
    assert [s.scores["exact_match"] for s in report.samples] == [1.0, 1.0, 0.0, None]
    failure = report.samples[3].errors["exact_match"]
    assert failure.kind is FailureKind.MISSING_INPUT
    assert failure.message == "field 'answer' is missing"
    summary = report.summary["exact_match"]
    assert summary.mean == pytest.approx(2 / 3) and summary.n == 3 and summary.errors == 1
    assert summary.kind is MetricKind.CUSTOM
    sig = report.signatures["exact_match"]
    assert sig.options == {"casefold": "yes", "version": __version__}
    assert (
        sig.render()
        == f"exact_match|casefold:yes|version:{__version__}|ci:bootstrap-1000@0.95|seed:0"
    )


def test_a_user_evaluator_named_by_import_path_in_yaml(tmp_path: Path) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(
        "evaluators:\n"
        "  - type: tests.evaluators.custom:ExactMatch\n"
        "    casefold: true\n"
        "  - type: retrieval\n"
        "    metrics: [mrr]\n"
    )
    loaded = load_config(config)
    assert isinstance(loaded.evaluators[0], ExactMatch) and loaded.evaluators[0].casefold
    result = Pipeline(loaded).run(SAMPLES)
    assert result.report.summary["exact_match"].mean == pytest.approx(2 / 3)
    # The recorded config validates again (the class registered itself under its type).
    assert result.report.config["evaluators"][0] == {"type": "exact_match", "casefold": True}
    try:
        assert Pipeline(type(loaded).model_validate(result.report.config)).evaluators[0] == (
            ExactMatch(casefold=True)
        )
    finally:
        EVALUATORS.pop("exact_match", None)


def test_registration_by_name_and_errors_name_the_legal_set(tmp_path: Path) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text("evaluators:\n  - type: exact_match\n")
    unknown = r"exp.yaml:2: evaluators\[0\].type: unknown evaluator type 'exact_match'; valid"
    with pytest.raises(ConfigError, match=unknown):
        load_config(config)
    EVALUATORS["exact_match"] = ExactMatch
    try:
        assert isinstance(load_config(config).evaluators[0], ExactMatch)
    finally:
        del EVALUATORS["exact_match"]
    config.write_text("evaluators:\n  - type: tests.evaluators.custom:Nope\n")
    with pytest.raises(ConfigError, match="cannot be imported"):
        load_config(config)
    config.write_text("evaluators:\n  - type: rag_judge:Sample\n")
    with pytest.raises(ConfigError, match=r"not a subclass of rag_judge\.Evaluator"):
        load_config(config)
    config.write_text("evaluators:\n  - type: tests.evaluators.custom:ExactMatch\n    casefld: 1\n")
    with pytest.raises(ConfigError, match=r"exp.yaml:3: evaluators\[0\].casefld: unknown key"):
        load_config(config)
    EVALUATORS.pop("exact_match", None)


def test_a_class_without_its_methods_fails_when_defined() -> None:
    with pytest.raises(TypeError, match="must implement: metric_names"):

        class NoNames(Evaluator):
            type: Literal["x"] = "x"

            def score(self, samples: Sequence[Sample]) -> dict[str, list[float]]:
                return {}

    with pytest.raises(TypeError, match=r"must implement score\(samples\), statistics"):

        class NoScore(Evaluator):
            type: Literal["y"] = "y"

            def metric_names(self) -> list[str]:
                return ["y"]


def test_a_class_that_overrides_evaluate_fails_when_defined() -> None:
    # Calls go one way (evaluate -> the run -> a hook); an override would turn them around.
    with pytest.raises(TypeError, match="OwnEvaluate overrides evaluate: implement score"):

        class OwnEvaluate(Evaluator):
            type: Literal["own"] = "own"

            def metric_names(self) -> list[str]:
                return ["own"]

            def score(self, samples: Sequence[Sample]) -> dict[str, list[float]]:
                return {"own": [1.0] * len(samples)}

            def evaluate(self, samples: Sequence[Sample], **run: object) -> EvaluatorResult:
                return EvaluatorResult.empty(len(samples), {})

    with pytest.raises(TypeError, match="OwnChunks overrides evaluate"):

        class OwnChunks(Evaluator):
            type: Literal["own"] = "own"

            def metric_names(self) -> list[str]:
                return ["own"]

            def score(self, samples: Sequence[Sample]) -> dict[str, list[float]]:
                return {"own": [1.0] * len(samples)}

            def evaluate_chunks(self, chunks: object, emit: object) -> None:
                return None


class Short(Evaluator):
    """Returns one value too few: the base class must refuse to scatter it."""

    type: Literal["short"] = "short"

    def metric_names(self) -> list[str]:
        return ["short"]

    def score(self, samples: Sequence[Sample]) -> dict[str, list[float]]:
        return {"short": [1.0] * (len(samples) - 1)}


class Whole(Evaluator):
    """Its own run, which makes each chunk's result itself, with its own signature."""

    type: Literal["whole"] = "whole"

    def metric_names(self) -> list[str]:
        return ["length"]

    def prepare(self) -> EvaluatorRun:
        return WholeRun(self)


class WholeRun(EvaluatorRun):
    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        result = EvaluatorResult.empty(
            len(samples), {"length": Signature.of("length", unit="chars")}
        )
        result.fill("length", range(len(samples)), [len(s.answer or "") for s in samples])
        return result


def test_a_short_column_is_an_error_not_a_silent_loss() -> None:
    report = Pipeline([Short(), Whole(), RetrievalEvaluator(metrics=["mrr"])]).run(SAMPLES).report
    assert all(s.scores["short"] is None for s in report.samples)
    message = report.samples[0].errors["short"].message
    assert "short evaluator failed" in message and "3 values for 4 samples" in message
    # The other evaluators are unaffected.
    assert [s.scores["length"] for s in report.samples] == [5.0, 6.0, 4.0, 0.0]
    assert report.signatures["length"].render().startswith("length|unit:chars|ci:")


def test_the_run_keeps_each_sample_as_evaluated() -> None:
    result = Pipeline([ExactMatch()]).run(SAMPLES)
    assert result.samples == SAMPLES
    assert [s.sample for s in result.report.samples] == SAMPLES


class LengthRatio(Evaluator):
    """A corpus metric through ``statistics``: the answers' characters over the first
    references', summed over the samples (not a mean of ratios)."""

    type: Literal["length_ratio"] = "length_ratio"
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")

    def metric_names(self) -> list[str]:
        return ["length_ratio"]

    def statistics(self, samples: Sequence[Sample]) -> Statistics:
        rows = np.array(
            [[len(s.answer or ""), len(s.references[0])] for s in samples], dtype=np.float64
        ).reshape(-1, 2)
        return Statistics(
            rows=rows,
            sentence=rows[:, 0] / rows[:, 1],
            score=_ratio,
            options={"refs": "first"},
            description="total answer length / total reference length",
        )


def _ratio(rows: NDArray[np.float64]) -> float:
    return float(rows[:, 0].sum() / rows[:, 1].sum())


def test_a_corpus_metric_with_only_statistics_runs_through_pipeline() -> None:
    report = Pipeline([LengthRatio()]).run(SAMPLES).report
    assert [s.scores["length_ratio"] for s in report.samples] == [1.0, 1.2, 0.8, None]
    assert report.samples[3].errors["length_ratio"].kind is FailureKind.MISSING_INPUT
    summary = report.summary["length_ratio"]
    assert summary.mean == 15 / 15  # the corpus score of the summed rows, not the mean of ratios
    assert summary.aggregate == "total answer length / total reference length"
    assert summary.n == 3 and summary.errors == 1 and summary.ci_low is not None
    assert report.signatures["length_ratio"].options == {"refs": "first", "version": __version__}


class Counted(Evaluator):
    """Its own run, with state across chunks: the signature says how many chunks it saw,
    which only the end of the run knows."""

    type: Literal["counted"] = "counted"

    def metric_names(self) -> list[str]:
        return ["counted"]

    def prepare(self) -> EvaluatorRun:
        return CountedRun(self)


class CountedRun(EvaluatorRun):
    def __init__(self, evaluator: Evaluator) -> None:
        super().__init__(evaluator)
        self.chunks = 0

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        self.chunks += 1
        result = EvaluatorResult.empty(len(samples), {"counted": Signature.of("counted")})
        result.fill("counted", range(len(samples)), [float(self.chunks)] * len(samples))
        return result

    def finish(self) -> Final:
        return Final(signatures={"counted": Signature.of("counted", chunks=str(self.chunks))})


def test_a_run_of_its_own_keeps_state_across_chunks_and_signs_at_the_end() -> None:
    config = ExperimentConfig(evaluators=[Counted()], chunk_size=3)
    report = Pipeline(config).run(SAMPLES).report
    assert [s.scores["counted"] for s in report.samples] == [1.0, 1.0, 1.0, 2.0]
    assert report.signatures["counted"].options["chunks"] == "2"
    # The config is never touched: each run starts afresh.
    assert Counted().prepare().evaluate_all(SAMPLES).signatures["counted"].options == {
        "chunks": "1"
    }
