"""A gate that names no metric is bad input found before any work: exit 2 with the closest
names, not exit 1 ("quality failed") after a paid run (issue 27, item 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_judge.cli import main
from rag_judge.cli.run import check_gate_names_of
from rag_judge.config import load_config
from rag_judge.errors import ConfigError
from tests import REPO
from tests.fake_openai_server import FakeOpenAIServer

DEMO = REPO / "configs" / "data" / "demo.jsonl"


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def _config(tmp_path: Path, judge_url: str, gates: str = "") -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ndataset: {DEMO}\n{gates}"
        "evaluators:\n"
        "  - type: retrieval\n    metrics: [ndcg@5, map]\n"
        "  - type: judge\n    rubrics: [faithfulness]\n    cache: null\n"
        f"    client: {{provider: openai, model: m, base_url: '{judge_url}'}}\n"
    )
    return path


@pytest.mark.usefixtures("api_key")
def test_a_misspelled_config_gate_stops_the_run_before_any_call(tmp_path, capsys) -> None:
    with FakeOpenAIServer() as srv:
        path = _config(tmp_path, srv.base_url, "gates:\n  ndcg@5: '>= 0.5'\n  ndgc@5: '>= 0.5'\n")
        code = main(["run", "--quiet", str(path), "--out", str(tmp_path / "r")])
        assert srv.received == 0  # not one judge call paid for
    assert code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(
        f"rag-judge: error: {path}:5: gates.ndgc@5: no such metric; did you mean 'ndcg@5'? "
        "(the metrics: ndcg@5, map, judged@5, faithfulness, faithfulness_norm, unscored_rate, "
        "error_rate; or <metric>.ci_low/.ci_high, <judge metric>_ppi[.ci_low/.ci_high])"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.usefixtures("api_key")
def test_a_misspelled_fail_under_stops_the_run_before_any_call(tmp_path, capsys) -> None:
    with FakeOpenAIServer() as srv:
        path = _config(tmp_path, srv.base_url)
        argv = ["run", "--quiet", str(path), "--fail-under", "faithfulnes=4", "--dry-run"]
        assert main(argv) == 2  # a dry run checks them too
        assert main(argv[:-1]) == 2
        assert srv.received == 0
    err = capsys.readouterr().err
    assert "rag-judge: error: --fail-under 'faithfulnes': no such metric; did you mean " in err
    assert "did you mean 'faithfulness'? (the metrics: " in err


def test_every_name_a_run_will_report_is_a_legal_gate(tmp_path) -> None:
    # latency_s (target), <rubric>_answered (grounding's conditioned), bounds and PPI forms
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"dataset: {DEMO}\ntarget: {REPO / 'examples' / 'toy_rag.py'}:answer\n"
        "evaluators:\n  - type: judge\n    rubrics: [faithfulness]\n"
        "  - type: grounding\n    split: sentences\n    conditioned: [faithfulness]\n"
    )
    config = load_config(path)
    good = ["latency_s", "faithfulness_answered", "claims.ci_low", "faithfulness_ppi.ci_high",
            "over_refusal_rate", "unscored_rate", "error_rate", "faithfulness_norm"]  # fmt: skip
    check_gate_names_of(path, "", config, dict.fromkeys(good, ">= 0"))
    with pytest.raises(ConfigError, match=r"did you mean 'latency_s'\?"):
        check_gate_names_of(path, "", config, {"latency": "<= 1"})
    # only a judge metric has a PPI estimate; correctness is not judged here
    with pytest.raises(ConfigError, match=r"--fail-under 'correctness_ppi': no such metric"):
        check_gate_names_of(path, "", config, {"correctness_ppi": ">= 4"})
    with pytest.raises(ConfigError, match=r"--fail-under 'latency_s_ppi': no such metric"):
        check_gate_names_of(path, "", config, {"latency_s_ppi": ">= 4"})


def test_the_gate_command_refuses_a_misspelled_name_with_exit_2(tmp_path, capsys) -> None:
    path = _config(tmp_path, "http://127.0.0.1:9/v1")
    path.write_text(path.read_text().replace("provider: openai", "provider: stub"))
    assert main(["run", "--quiet", str(path), "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "r"), "--fail-under", "mpa=0.1"]) == 2
    assert "rag-judge: error: gate 'mpa': no such metric; did you mean 'map'?" in (
        capsys.readouterr().err
    )
    assert main(["gate", str(tmp_path / "r"), "--baseline", str(tmp_path / "r"), "--metric", "mpa"])
    assert "regression gate 'mpa': no such metric; did you mean 'map'?" in capsys.readouterr().err
