"""rag-judge gates inside a team's own pytest suite (docs/pytest.md walks through it).

    pytest examples/pytest

The config's judge is an OpenAI model; the marker below runs it on the offline stub, so this
suite needs no key and no network (drop the marker where the key is set).
"""

from collections.abc import Callable
from pathlib import Path

import pytest

from rag_judge import Report
from rag_judge.testing import assert_gates, evaluate

CONFIG = Path(__file__).with_name("rag_quality.yaml")

pytestmark = pytest.mark.rag_judge_stub  # every test of this module


def test_retrieval_finds_the_passages() -> None:
    report = evaluate(CONFIG)
    assert_gates(report, {"ndcg@5": ">= 0.5", "recall@3": ">= 0.45", "mrr": ">= 0.6"})


def test_answers_are_faithful() -> None:
    # The same config on the same data: the report of the test above, not a second run.
    report = evaluate(CONFIG)
    assert_gates(report, {"faithfulness": ">= 4", "unscored_rate": "<= 0.05"})


def test_a_tighter_interval(rag_judge_run: Callable[..., Report]) -> None:
    # Overrides make another config, so another run: 90% intervals from 2000 resamples.
    report = rag_judge_run(CONFIG, bootstrap={"resamples": 2000, "confidence": 0.9})
    assert report.confidence == 0.9
    assert_gates(report, {"ndcg@5.ci_low": ">= 0.45"})
