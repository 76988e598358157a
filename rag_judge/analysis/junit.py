"""Gate verdicts as JUnit XML (``--junit FILE`` on ``rag-judge run`` and ``rag-judge gate``),
the format CI systems show as test results (GitHub test reporters, GitLab, Jenkins).

One ``testsuite`` per experiment (a matrix run has several) and one ``testcase`` per gate: a
failed gate carries a ``failure`` element with the gate's message, a passed one its message in
``system-out``. A step of a run that failed beyond ``max_error_rate`` (exit status 3) is a
testcase with an ``error`` element, so that the results read red when the numbers are missing.
The output validates against Jenkins' junit-10.xsd (tests/cli/junit-10.xsd).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_judge.analysis.gates import GateCheck, GateResult

__all__ = ["JUnitSuite", "junit_xml", "step_errors", "testcase_name", "write_junit"]

# XML 1.0 forbids most control characters even as character references; such a character from
# data (a metric name, a path) is written as U+FFFD so that the file stays well formed.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class JUnitSuite:
    """One experiment's gates, and the steps that failed beyond ``max_error_rate`` (each a
    message: ``evaluators[1] (judge): 34 of 34 values failed``)."""

    name: str
    gates: GateResult
    errors: Sequence[str] = field(default_factory=tuple)


def step_errors(over: Mapping[str, tuple[int, int]], max_error_rate: float) -> list[str]:
    """A message per step of a run that failed beyond ``max_error_rate``, from its (failed,
    all) values: ``evaluators[1] (judge): 34 of 34 values failed (max_error_rate 0.02)``."""
    return [
        f"{step}: {bad} of {total} values failed (max_error_rate {max_error_rate:g})"
        for step, (bad, total) in over.items()
    ]


def testcase_name(check: GateCheck) -> str:
    """The gate as a test's name: ``ndcg@5 >= 0.55``, or ``ndcg@5 regression`` (a regression
    gate's bound comes from the baseline, so it is left out of the name to keep it stable)."""
    if check.kind == "regression":
        return f"{check.metric} regression"
    bound = "?" if check.bound is None else f"{check.bound:g}"
    return f"{check.metric} {check.op} {bound}"


def junit_xml(suites: Sequence[JUnitSuite]) -> str:
    """The JUnit XML document of ``suites``, with its XML declaration."""
    root = ET.Element("testsuites", name="rag-judge")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in suites:
        tests = len(suite.gates.checked) + len(suite.errors)
        failures = len(suite.gates.failures)
        errors = len(suite.errors)
        node = ET.SubElement(
            root,
            "testsuite",
            name=_text(suite.name),
            tests=str(tests),
            failures=str(failures),
            errors=str(errors),
            skipped="0",
            time="0",
        )
        for check in suite.gates.checked:
            case = ET.SubElement(
                node,
                "testcase",
                name=_text(testcase_name(check)),
                classname=f"rag-judge.gates.{check.kind}",
                time="0",
            )
            message = _text(check.message)
            if check.passed:
                ET.SubElement(case, "system-out").text = f"PASS {message}"
            else:
                failure = ET.SubElement(case, "failure", message=message, type=check.kind)
                failure.text = f"FAIL {message}"
        for error in suite.errors:
            step = error.split(": ", 1)[0]
            case = ET.SubElement(
                node, "testcase", name=_text(step), classname="rag-judge.evaluators", time="0"
            )
            element = ET.SubElement(case, "error", message=_text(error), type="max_error_rate")
            element.text = _text(error)
        for key, value in (("tests", tests), ("failures", failures), ("errors", errors)):
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def write_junit(path: Path, suites: Sequence[JUnitSuite]) -> None:
    """Write :func:`junit_xml` to ``path`` (its folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(suites), encoding="utf-8")


def _text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)
