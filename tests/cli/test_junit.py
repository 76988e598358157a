"""``--junit FILE`` on ``rag-judge run`` and ``rag-judge gate``: a testsuite per experiment, a
testcase per gate, a failure element on a failed gate, validated against Jenkins' JUnit schema
(tests/cli/junit-10.xsd) by lxml's XML Schema validator (lxml comes with sacrebleu, a
dependency of rag-judge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from rag_judge.analysis.gates import GateCheck, GateResult
from rag_judge.analysis.junit import JUnitSuite, junit_xml
from rag_judge.cli import main
from tests import REPO
from tests.cli.test_run_failures import DOWN, config

SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).with_name("junit-10.xsd"))))
MATRIX = REPO / "configs" / "matrix.yaml"


def _valid(xml: bytes) -> etree._Element:
    """The parsed document, after the schema says it is valid (with the schema's reasons)."""
    root = etree.fromstring(xml)
    assert SCHEMA.validate(root), SCHEMA.error_log
    return root


def test_the_schema_rejects_what_it_should() -> None:
    # the validator is live: a testsuite without its required counts is refused
    bad = b'<testsuites><testsuite name="x"><testcase name="t"/></testsuite></testsuites>'
    assert not SCHEMA.validate(etree.fromstring(bad))


def test_run_writes_a_testsuite_per_variant_and_a_testcase_per_gate(tmp_path, capsys) -> None:
    junit = tmp_path / "out" / "junit.xml"
    argv = ["run", "--quiet", str(MATRIX), "--out", str(tmp_path / "m"), "--junit", str(junit)]
    # faithfulness=4.5 replaces the config's faithfulness gate: the heuristic judge misses it
    assert main([*argv, "--fail-under", "faithfulness=4.5"]) == 1
    printed = capsys.readouterr().out
    root = _valid(junit.read_bytes())
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "judge=heuristic,relevant=grade1", "judge=heuristic,relevant=grade2",
        "judge=fixed,relevant=grade1", "judge=fixed,relevant=grade2",
    ]  # fmt: skip
    for suite in suites:
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [
            "ndcg@5 >= 0.55", "faithfulness >= 4.5", "unscored_rate <= 0.02",
        ]  # fmt: skip
        failed = [c for c in cases if c.find("failure") is not None]
        assert suite.get("tests") == "3" and suite.get("failures") == str(len(failed))
        heuristic = "heuristic" in suite.get("name", "")
        assert [c.get("name") for c in failed] == (["faithfulness >= 4.5"] if heuristic else [])
        for case in failed:  # the message is the one the run printed
            message = case.find("failure").get("message")
            assert message.startswith("faithfulness = 4.3529") and f"FAIL {message}" in printed
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("12", "2", "0")


def test_gate_writes_threshold_and_regression_testcases(tmp_path, capsys) -> None:
    runs = tmp_path / "m"
    assert main(["run", "--quiet", str(MATRIX), "--out", str(runs)]) == 0
    base, new = runs / "judge-fixed_relevant-grade1", runs / "judge-heuristic_relevant-grade1"
    junit = tmp_path / "gate.xml"
    argv = ["gate", str(new), "--fail-under", "ndcg@5=0.5", "--baseline", str(base)]
    argv.append("--allow-judge-change")  # the variants differ by their judge (issue 33)
    assert main([*argv, "--max-drop", "0.02", "--junit", str(junit)]) == 1
    printed = capsys.readouterr().out
    (suite,) = _valid(junit.read_bytes()).findall("testsuite")
    assert suite.get("name") == str(new)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert "ndcg@5 >= 0.5" in cases and "faithfulness regression" in cases
    assert cases["ndcg@5 >= 0.5"].find("failure") is None  # passed: its message in system-out
    assert cases["ndcg@5 >= 0.5"].findtext("system-out").startswith("PASS ndcg@5 = 0.5607")
    failure = cases["faithfulness regression"].find("failure")
    assert failure.get("type") == "regression" and f"FAIL {failure.get('message')}" in printed
    assert suite.get("failures") == str(printed.count("FAIL "))


def test_an_evaluator_that_failed_is_an_error_testcase(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    junit = tmp_path / "junit.xml"
    path = config(tmp_path, DOWN, extra="gates: {map: '>= 0'}\n")
    assert main(["run", "--quiet", path, "--out", str(tmp_path / "r"), "--junit", str(junit)]) == 3
    (suite,) = _valid(junit.read_bytes()).findall("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("errors")) == ("t", "2", "1")
    error = suite.find("testcase/error")
    assert error is not None and error.get("type") == "max_error_rate"
    assert error.get("message").startswith("evaluators[1] (judge): 6 of 6 values failed")


def test_markup_and_control_characters_stay_text() -> None:
    name = 'a<b>&"c\x1b\x00'
    check = GateCheck(name, 0.1, 0.5, f"{name} = 0.1000 (needs >= 0.5)", ">=", False)
    xml = junit_xml([JUnitSuite(f"exp {name}", GateResult([check]))])
    case = _valid(xml.encode()).find("testsuite/testcase")
    assert case.get("name") == 'a<b>&"c\ufffd\ufffd >= 0.5'
    assert case.find("failure").get("message").startswith('a<b>&"c\ufffd\ufffd = 0.1000')


def test_a_dry_run_writes_no_junit(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    junit = tmp_path / "junit.xml"
    argv = ["run", "--quiet", str(MATRIX), "--dry-run", "--junit", str(junit)]
    assert main(argv) == 0
    assert not junit.exists()  # a dry run writes nothing


@pytest.mark.parametrize("command", ["run", "gate"])
def test_both_commands_document_the_option(command, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--junit FILE" in capsys.readouterr().out
