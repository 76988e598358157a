"""`rag-judge audit REPORT --metamorphic` (issue 33, item 3) through the real CLI: five
fake-server judges (tests/metamorphic_judges.py), a correct one and four with one planted
defect each, on a synthetic dataset built for them. Each defect raises its own check's rate
over its threshold (a flag) and no other; the correct judge raises none. Also: the dry run
counts exactly the requests the audit sends, a threshold gates the exit status, the cache
makes a rerun free, and the plain audit is unchanged without --metamorphic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_judge.cli import main
from tests.fake_openai_server import FakeOpenAIServer
from tests.metamorphic_judges import dataset, judge

# The checks each judge must flag, and only those.
EXPECTED: dict[str | None, set[tuple[str, str]]] = {
    None: set(),
    "first_context": {("faithfulness", "shuffle")},
    "length": {("faithfulness", "padding")},
    "injection": {("faithfulness", "injection")},
    "citations": {("citation_precision", "citation_swap")},
}
# The figures docs/judge-estimates.md ("Metamorphic audit") quotes: rate, its exact
# (Clopper-Pearson) 95% interval, and the mean shift with its paired bootstrap interval.
PINNED = {
    "first_context": (0.9, 0.6830, 0.9877, -1.8, -2.35, -1.3),
    "length": (1.0, 0.8316, 1.0, 1.0, 1.0, 1.0),
    "injection": (1.0, 0.6915, 1.0, 2.0, 2.0, 2.0),
    "citations": (1.0, 0.8316, 1.0, 0.0, 0.0, 0.0),
}
ALL = {
    ("faithfulness", c)
    for c in ("shuffle", "distractor", "padding", "remove_support", "injection", "number_change")
} | {("citation_precision", "citation_swap"), ("claim_contradiction", "number_change")}


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def _run(tmp_path: Path, url: str, *, grounding: bool = True, cache: bool = False) -> Path:
    """The report of a run of the judge at ``url`` over the synthetic dataset."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in dataset()), encoding="utf-8")
    client = f"    client: {{provider: openai, model: m, base_url: '{url}', max_attempts: 1}}\n"
    store = f"    cache: {tmp_path / 'cache.sqlite'}\n" if cache else "    cache: null\n"
    text = f"name: meta\ndataset: {data}\nevaluators:\n"
    text += "  - type: judge\n    rubrics: [faithfulness]\n" + client + store
    if grounding:
        text += "  - type: grounding\n" + client + store
    config = tmp_path / "exp.yaml"
    config.write_text(text, encoding="utf-8")
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    return tmp_path / "run" / "report.json"


def _audit(report: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = report.parent / "meta.json"
    code = main(["audit", str(report), "--metamorphic", "--format", "table", "--out", str(out),
                 *extra])  # fmt: skip
    return code, json.loads(out.read_text(encoding="utf-8"))


# The correct judge in the fast tier; the four planted defects (a whole run and audit each) in
# the slow one.
DEFECTS = [d if d is None else pytest.param(d, marks=pytest.mark.slow) for d in EXPECTED]


@pytest.mark.parametrize("defect", DEFECTS)
def test_each_defect_raises_its_own_rate_and_only_its_own(tmp_path, capsys, defect) -> None:
    with FakeOpenAIServer(judge(defect)) as srv:
        report = _run(tmp_path, srv.base_url)
        capsys.readouterr()
        code, out = _audit(report)
    assert code == 0
    rows = {(r["metric"], r["check"]): r for r in out["checks"]}
    assert set(rows) == ALL
    assert [c["reproducible"] for c in out["control"]] == [True] * 3  # the judges are
    flagged = {k for k, r in rows.items() if r["flagged"]}
    assert flagged == EXPECTED[defect]
    for key, row in rows.items():
        assert row["n"] >= 10, key  # every check applied to at least half the samples
        if key in EXPECTED[defect]:
            assert row["ci_low"] > row["threshold"]
            found = [row[k] for k in ("rate", "ci_low", "ci_high", "shift", "shift_low",
                                      "shift_high")]  # fmt: skip
            assert found == pytest.approx(PINNED[defect], abs=5e-5), found
        else:
            assert row["rate"] == 0.0, key
    table = capsys.readouterr().out
    assert table.startswith("metric  ") and "citation_swap" in table
    assert table.count(" FLAG") == len(EXPECTED[defect])  # and once in the notes: "FLAG:"


def test_n_counts_only_samples_the_check_can_show(tmp_path) -> None:
    """Injection applies to the answers scored under 5 (half); a subset of 8 audits 8."""
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False)
        code, out = _audit(report, "--checks", "injection,number_change", "--n", "8")
    rows = {r["check"]: r for r in out["checks"]}
    assert code == 0 and out["samples"] == 8
    assert rows["injection"]["n"] + rows["injection"]["not_applicable"] == 8
    assert 0 < rows["injection"]["n"] < 8  # the 5s cannot rise: not applicable
    assert rows["number_change"]["n"] == 8


def test_the_dry_run_counts_exactly_the_requests_the_audit_sends(tmp_path, capsys) -> None:
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False)
        capsys.readouterr()
        before = srv.received
        assert main(["audit", str(report), "--metamorphic", "--dry-run"]) == 0
        assert srv.received == before  # the dry run calls nothing
        table = capsys.readouterr().out
        total = next(line for line in table.splitlines() if line.startswith("total"))
        requests = int(total.split()[3].replace(",", ""))
        code, _ = _audit(report)
        assert code == 0
        assert srv.received - before == requests
    # the control re-judges the 20 untransformed samples (this run has no cache to make it
    # free); six checks apply to faithfulness, each transforming all 20 (remove_support needs
    # a chunk left and injection a context: all 20 have them): 20 + 6 x 20
    assert requests == 20 + 6 * 20


def test_a_rerun_costs_nothing_through_the_judge_cache(tmp_path) -> None:
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False, cache=True)
        _audit(report, "--checks", "shuffle")
        first = srv.received
        _, out = _audit(report, "--checks", "shuffle")
        assert srv.received == first
    assert out["checks"][0]["rate"] == 0.0


def test_the_control_is_free_through_the_runs_cache(tmp_path) -> None:
    """A deterministic judge that cached its calls: the control re-judges the untransformed
    samples from the run's cache, and the audit pays only for the transformed ones."""
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False, cache=True)
        first = srv.received
        _, out = _audit(report, "--checks", "shuffle")
        assert srv.received - first == 20
    assert out["control"] == [
        {"metric": "faithfulness", "n": 20, "moved": 0, "rate": 0.0, "ci_low": 0.0,
         "ci_high": pytest.approx(0.1684, abs=1e-4), "reproducible": True}
    ]  # fmt: skip


def _forgetful() -> Any:
    """The correct judge, but one point lower each time it sees a prompt again (as a judge
    at temperature > 0 drifts): the run's verdicts are not reproduced."""
    seen: set[str] = set()
    correct = judge()

    def script(body: dict[str, Any]) -> str:
        reply = correct(body)
        key = json.dumps(body["messages"])
        if key not in seen:
            seen.add(key)
            return str(reply)
        verdict = json.loads(reply)
        verdict["score"] = max(1, verdict["score"] - 1)
        return json.dumps(verdict)

    return script


def test_the_control_says_when_the_judge_is_not_reproducible(tmp_path, capsys) -> None:
    with FakeOpenAIServer(_forgetful()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False)
        capsys.readouterr()
        code, out = _audit(report, "--checks", "padding")
    assert code == 0
    (control,) = out["control"]
    assert (control["n"], control["moved"], control["reproducible"]) == (20, 20, False)
    assert "the judge is not reproducible" in capsys.readouterr().out
    # each side of a pair is from the audit, not the report: the padded answers are new
    # prompts (the first verdict), the control's old ones (one lower), so padding "moved"
    assert out["checks"][0]["shift"] == 1.0


NAMED = {  # the refusal's line (docs/judge-estimates.md quotes the first)
    "template": "faithfulness: template 000000000000 -> f6daf79b70e7",
    "temp": "faithfulness: temp 0 -> 0.7",
}


@pytest.mark.parametrize("field", list(NAMED))
def test_a_judge_changed_since_the_run_is_refused_before_any_call(tmp_path, capsys, field) -> None:
    """The re-judge's signature must be the report's: an edited rubric file (its template's
    hash) or another temperature in the stored config is refused, naming the field, before
    the dry run or any call."""
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False)
        data = json.loads(report.read_text(encoding="utf-8"))
        if field == "template":
            data["signatures"]["faithfulness"]["options"]["template"] = "000000000000"
        else:
            data["config"]["evaluators"][0]["temperature"] = 0.7
        report.write_text(json.dumps(data), encoding="utf-8")
        capsys.readouterr()
        before = srv.received
        for extra in ([], ["--dry-run"]):
            assert main(["audit", str(report), "--metamorphic", *extra]) == 2
            err = capsys.readouterr().err
            assert NAMED[field] in err and "judge of" in err
        assert srv.received == before


def test_a_signature_the_run_rewrote_is_held_to_the_control(tmp_path, capsys) -> None:
    """``scoring`` says what the server honoured, known only after calls: the planned check
    leaves it out, and the control's own signature is refused, before any transformed call."""
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False)
        data = json.loads(report.read_text(encoding="utf-8"))
        data["signatures"]["faithfulness"]["options"]["scoring"] = "mixed"
        report.write_text(json.dumps(data), encoding="utf-8")
        capsys.readouterr()
        before = srv.received
        assert main(["audit", str(report), "--metamorphic"]) == 2
        assert srv.received - before == 20  # the control's calls only
    assert "faithfulness: scoring mixed -> json" in capsys.readouterr().err


def test_out_into_a_new_folder_is_made_and_a_folder_refused(tmp_path) -> None:
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False, cache=True)
        out = tmp_path / "new" / "deeper" / "meta.json"
        argv = ["audit", str(report), "--metamorphic", "--checks", "shuffle", "--out"]
        assert main([*argv, str(out)]) == 0
        assert json.loads(out.read_text(encoding="utf-8"))["checks"][0]["rate"] == 0.0
        before = srv.received
        assert main([*argv, str(tmp_path)]) == 2  # a folder: refused before any call
        assert srv.received == before


def test_a_threshold_gates_the_exit_status(tmp_path, capsys) -> None:
    with FakeOpenAIServer(judge("first_context")) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False)
        code, out = _audit(report, "--checks", "shuffle,padding",
                           "--threshold", "faithfulness.padding <= 0.1",
                           "--threshold", "faithfulness.shuffle <= 0.1")  # fmt: skip
        assert code == 1
        printed = capsys.readouterr()
        assert "FAIL faithfulness.shuffle <= 0.1" in printed.out
        assert "PASS faithfulness.padding <= 0.1" in printed.out
        assert [t["passed"] for t in out["thresholds"]] == [True, False]
        code, _ = _audit(report, "--checks", "padding", "--threshold", "faithfulness.padding<=0")
        assert code == 0
        # a rate that was not measured fails its gate
        code, _ = _audit(report, "--checks", "padding", "--threshold", "faithfulness.shuffle<=1")
        assert code == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metamorphic", "--checks", "shufle"], "the checks are shuffle"),
        (["--metamorphic", "--threshold", "shuffle <= 0.1"], "expected RUBRIC.CHECK OP RATE"),
        (["--metamorphic", "--flag-over", "shuffle=x"], "is not a number"),
        (["--dry-run"], "--dry-run needs --metamorphic"),
    ],
)
def test_bad_options_exit_2(tmp_path, capsys, argv, message) -> None:
    report = tmp_path / "report.json"
    report.write_text("{}", encoding="utf-8")
    assert main(["audit", str(report), *argv]) == 2
    assert message in capsys.readouterr().err
