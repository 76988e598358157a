"""`rag-judge run` is loud when values fail: a stderr summary with the first distinct reasons,
and exit status 3 when an evaluator failed beyond ``max_error_rate`` (or produced nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_judge.cli import main
from rag_judge.cli.run import EXIT_EVALUATOR_FAILED, MAX_REASONS, failure_summary
from rag_judge.config import load_config
from rag_judge.pipeline import RunResult
from rag_judge.report.model import Failure, FailureKind, MetricSummary, Report, SampleResult
from tests import REPO

DEMO = REPO / "configs" / "data" / "demo.jsonl"

# A judge at a port nothing listens on (9, discard): every call fails at once.
DOWN = """
  - type: judge
    rubrics: [faithfulness, correctness]
    cache: null
    client: {provider: openai, model: judge-model, base_url: "http://127.0.0.1:9/v1",
             max_attempts: 1, timeout: 2}
"""
STUB = """
  - type: judge
    rubrics: [faithfulness, correctness]
    cache: null
"""


def dataset(tmp_path: Path, n: int = 3, without_references: int = 0) -> Path:
    """The first ``n`` demo samples; the first ``without_references`` of them lose their
    references (so ``correctness`` has no input for them)."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()[:n]]
    for row in rows[:without_references]:
        row.pop("references", None)
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def config(tmp_path: Path, judge: str, extra: str = "", **data: int) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ndataset: {dataset(tmp_path, **data)}\nbootstrap: {{resamples: 20}}\n{extra}"
        f"evaluators:\n  - type: retrieval\n    metrics: [map]\n{judge}"
    )
    return str(path)


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.usefixtures("api_key")
def test_an_unreachable_judge_server_fails_the_run_with_its_reason(tmp_path, capsys) -> None:
    code, out, err = run(capsys, config(tmp_path, DOWN), "--out", str(tmp_path / "r"))
    assert code == EXIT_EVALUATOR_FAILED == 3
    lines = err.splitlines()
    assert lines[0] == "rag-judge: 6 of 12 values failed; 6 model calls failed"
    # one distinct reason (deduplicated over samples and rubrics), naming the server
    reasons = [ln for ln in lines if ln.startswith("  error ")]
    assert len(reasons) == 1
    assert reasons[0].startswith("  error ×6 (faithfulness, correctness): http://127.0.0.1:9/v1")
    assert "connection" in reasons[0]
    assert (
        "rag-judge: evaluators[1] (judge) failed: 6 of 6 values failed (100%), no value at all"
        in lines
    )
    assert "sk-test-not-a-real-key" not in out + err
    # the report is still written, and the retrieval metric still measured
    report = Report.load(tmp_path / "r")
    assert report.summary["map"].n == 3
    assert report.summary["faithfulness"].errors == 3


@pytest.mark.usefixtures("api_key")
def test_no_value_at_all_fails_whatever_max_error_rate_and_before_gates(tmp_path, capsys) -> None:
    path = config(tmp_path, DOWN, extra="max_error_rate: 1.0\n")
    code, _, err = run(capsys, path, "--out", str(tmp_path / "r"), "--fail-under", "map=0.99")
    assert code == 3  # an evaluator that measured nothing outranks a failed gate (1)
    assert "no value at all" in err
    code, _, err = run(capsys, path, "--out", str(tmp_path / "r"), "--max-error-rate", "1")
    assert code == 3


def test_a_normal_run_exits_0_and_prints_no_failure_summary(tmp_path, capsys) -> None:
    code, out, err = run(capsys, config(tmp_path, STUB), "--out", str(tmp_path / "r"))
    assert code == 0
    assert err == ""
    assert "| faithfulness |" in out


def test_failures_below_the_threshold_are_reported_but_pass(tmp_path, capsys) -> None:
    # one sample of three lacks references: 1 of 6 judge values fails (17%)
    path = config(tmp_path, STUB, without_references=1)
    code, _, err = run(capsys, path, "--out", str(tmp_path / "r"))
    assert code == 0
    lines = err.splitlines()
    assert lines[0] == "rag-judge: 1 of 12 values failed"
    assert lines[1].startswith("  missing_input ×1 (correctness): field 'references'")
    assert not any("failed:" in ln for ln in lines)  # no evaluator over the limit


@pytest.mark.parametrize(
    ("rate", "code"), [("0.2", 0), ("0.1", 3), ("0", 3)]
)  # fmt: skip
def test_max_error_rate_in_the_config(tmp_path, capsys, rate, code) -> None:
    path = config(tmp_path, STUB, extra=f"max_error_rate: {rate}\n", without_references=1)
    got, _, err = run(capsys, path, "--out", str(tmp_path / "r"))
    assert got == code
    verdict = f"evaluators[1] (judge) failed: 1 of 6 values failed (17%), more than max_error_rate {float(rate):g}"  # noqa: E501
    assert (verdict in err) == (code == 3)


def test_max_error_rate_on_the_command_line_overrides_the_config(tmp_path, capsys) -> None:
    path = config(tmp_path, STUB, extra="max_error_rate: 0.5\n", without_references=1)
    assert run(capsys, path, "--out", str(tmp_path / "r"), "--max-error-rate", "0.05")[0] == 3
    with pytest.raises(SystemExit) as exc:
        main(["run", path, "--max-error-rate", "1.5"])
    assert exc.value.code == 2
    assert "'1.5' is not a number between 0 and 1" in capsys.readouterr().err


@pytest.mark.parametrize("rate", ["1.5", "-0.1", ".nan"])
def test_max_error_rate_out_of_range_is_a_config_error(tmp_path, capsys, rate) -> None:
    path = config(tmp_path, STUB, extra=f"max_error_rate: {rate}\n")
    code, _, err = run(capsys, path, "--out", str(tmp_path / "r"))
    assert code == 2
    assert f"{path}:4: max_error_rate: max_error_rate must be between 0 and 1" in err


def test_max_error_rate_defaults_to_1() -> None:
    assert load_config(REPO / "configs" / "demo.yaml").max_error_rate == 1.0


@pytest.mark.usefixtures("api_key")
def test_each_matrix_variant_is_summarised_under_its_name(tmp_path, capsys) -> None:
    path = config(tmp_path, DOWN)
    text = Path(path).read_text() + (
        "matrix:\n  judge:\n    up: {evaluators.1.client.provider: stub}\n    down: {}\n"
    )
    Path(path).write_text(text)
    code, _, err = run(capsys, path, "--out", str(tmp_path / "r"))
    assert code == 3
    assert err.startswith("rag-judge: judge=down: 6 of 12 values failed")
    assert "judge=up" not in err
    assert "rag-judge: judge=down: evaluators[1] (judge) failed:" in err


def test_summary_orders_distinct_reasons_errors_first_and_caps_them() -> None:
    failures = [
        ("m", Failure(kind=FailureKind.MISSING_INPUT, message="field 'answer' is missing")),
        ("m", Failure(message="timeout")),
        ("m", Failure(message="HTTP 404: model 'x' not found")),
        ("m", Failure(message="HTTP 404: model 'x' not found")),
        ("m", Failure(kind=FailureKind.UNSCORED, message="no score in the reply")),
        ("m", Failure(message="HTTP 500")),
        ("m_norm", Failure(message="HTTP 500")),  # a normalised twin: not counted again
        ("m", None),
    ]
    samples = [
        SampleResult(id=f"q{i}", scores={"m": None if f else 1.0}, errors={k: f} if f else {})
        for i, (k, f) in enumerate(failures)
    ]
    report = Report(
        summary={"m": MetricSummary(mean=1.0, n=1, errors=6),
                 "m_norm": MetricSummary(mean=1.0, n=7, errors=1, normalises="m")},
        samples=samples, signatures={},
    )  # fmt: skip
    result = RunResult(report, [], {"evaluators[0] (x)": ["m", "m_norm"]})
    text = failure_summary(result, {}, 1.0)
    lines = text.splitlines()
    assert lines[0] == "6 of 7 values failed"
    assert lines[1 : 1 + MAX_REASONS] == [
        "  error ×2 (m): HTTP 404: model 'x' not found",
        "  error ×1 (m): timeout",
        "  error ×1 (m): HTTP 500",
    ]
    assert lines[1 + MAX_REASONS] == "  … and 2 more distinct reasons"
    assert failure_summary(RunResult(report.model_copy(update={"samples": []}), []), {}, 1) == ""


def test_failed_model_calls_alone_are_reported() -> None:
    report = Report(summary={}, samples=[], signatures={})
    report.usage.failures = 2
    assert failure_summary(RunResult(report, []), {}, 1.0) == "2 model calls failed"
