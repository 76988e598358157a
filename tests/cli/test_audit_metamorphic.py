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
# The figures docs/judge-estimates.md ("Metamorphic audit") quotes: rate and interval.
PINNED = {
    "first_context": (0.9, 0.75, 1.0),
    "length": (1.0, 1.0, 1.0),
    "injection": (1.0, 1.0, 1.0),
    "citations": (1.0, 1.0, 1.0),
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


@pytest.mark.parametrize("defect", list(EXPECTED))
def test_each_defect_raises_its_own_rate_and_only_its_own(tmp_path, capsys, defect) -> None:
    with FakeOpenAIServer(judge(defect)) as srv:
        report = _run(tmp_path, srv.base_url)
        capsys.readouterr()
        code, out = _audit(report)
    assert code == 0
    rows = {(r["metric"], r["check"]): r for r in out["checks"]}
    assert set(rows) == ALL
    flagged = {k for k, r in rows.items() if r["flagged"]}
    assert flagged == EXPECTED[defect]
    for key, row in rows.items():
        assert row["n"] >= 10, key  # every check applied to at least half the samples
        if key in EXPECTED[defect]:
            assert row["ci_low"] > row["threshold"]
            assert (row["rate"], row["ci_low"], row["ci_high"]) == pytest.approx(PINNED[defect])
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
    # six checks apply to faithfulness; each transforms all 20 samples but remove_support,
    # which needs a chunk left (all 20 have one) and injection (all 20): 6 x 20
    assert requests == 6 * 20


def test_a_rerun_costs_nothing_through_the_judge_cache(tmp_path) -> None:
    with FakeOpenAIServer(judge()) as srv:
        report = _run(tmp_path, srv.base_url, grounding=False, cache=True)
        _audit(report, "--checks", "shuffle")
        first = srv.received
        _, out = _audit(report, "--checks", "shuffle")
        assert srv.received == first
    assert out["checks"][0]["rate"] == 0.0


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
