"""``rag-judge comment BASE NEW``: one pull-request comment from real stub-judge runs, its
numbers equal to ``compare``'s, its data written as text; the worked example of docs/ci.md;
the GitHub Actions example's commands, parsed by the real parser and run."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_judge import Pipeline, load_config
from rag_judge.analysis.comment import MARKER, MAX_ID_CHARS, regressed_samples, render_comment
from rag_judge.analysis.compare import CompareOptions, compare_all
from rag_judge.cli import _parser, main
from rag_judge.cli.comment import read_gates
from rag_judge.errors import ConfigError
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.report.format import interval, num, p_value
from rag_judge.report.model import Direction, Report
from tests import REPO
from tests.report.test_markdown_escape import FORBIDDEN, XSS
from tests.report.test_markdown_escape import HOSTILE as ESCAPE_TESTS

DEMO = REPO / "configs" / "data" / "demo.jsonl"
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
HOSTILE = "q01 | <img src=x onerror=alert(1)> **b** [l](javascript:1)"
LONG = "x" * 100  # an id longer than MAX_ID_CHARS
WORSE = 12  # the first WORSE samples' contexts reversed; the first 6 answers made unsupported


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(folder: Path, data: Path) -> Path:
    config = folder / f"{data.stem}.yaml"
    config.write_text(
        f"name: {data.stem}\ndataset: {data}\nseed: 0\nbootstrap: {{resamples: 200}}\n"
        "evaluators:\n  - type: retrieval\n    metrics: [ndcg@5, mrr]\n"
        "  - type: judge\n    rubrics: [faithfulness]\n    client: {provider: stub}\n"
        "    cache: null\n"
    )
    out = folder / "runs" / data.stem
    Pipeline(load_config(config)).run().write(out)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A base run of the demo (two ids hostile) and a new run that retrieves worse (contexts
    reversed) and answers worse (unsupported answers) on its first samples."""
    folder = tmp_path_factory.mktemp("comment")
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    rows[0]["id"], rows[1]["id"] = HOSTILE, LONG
    base = _write(folder / "base.jsonl", rows)
    for row in rows[:WORSE]:
        row["contexts"] = row["contexts"][::-1]
    for row in rows[:6]:
        row["answer"] = "Purple elephants dance on the moon."
    new = _write(folder / "new.jsonl", rows)
    return _run(folder, base), _run(folder, new)


def _comment(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["comment", *args]) == 0
    return capsys.readouterr().out


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for t in tokens:
        yield t
        yield from _walk(t.children or [])


def _rows(text: str, heading: str) -> list[list[str]]:
    """The cells (as rendered text) of the first table after ``heading``'s line."""
    lines = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    tokens = MD.parse("\n".join(table))
    rows, row = [], []
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "inline":
            row.append("".join(c.content for c in t.children or [] if c.type == "text"))
        elif t.type == "tr_close":
            rows.append(row)
    return rows[1:]  # without the heading row


def test_the_comment_carries_compare_numbers_gates_and_regressed_samples(runs, capsys) -> None:
    base, new = runs
    text = _comment(
        capsys, str(base), str(new), "--fail-under", "ndcg@5=0.55", "--threshold",
        "faithfulness>=4", "--max-drop", "0.02",
    )  # fmt: skip
    assert text.splitlines()[0] == MARKER
    # the numbers are compare's, with the holm correction by default
    expected = compare_all(
        Report.load(base), [(str(new), Report.load(new))], CompareOptions(), correction="holm"
    ).comparisons[0]
    table = {row[0]: row for row in _rows(text, "### Metrics")}
    assert list(table) == list(expected.metrics)
    for metric, mc in expected.metrics.items():
        assert table[metric][1:7] == [
            str(mc.n), num(mc.base_mean), num(mc.new_mean), num(mc.diff, "+.4f"),
            interval(mc.ci_low, mc.ci_high, "+.4f"), p_value(mc.p_adjusted),
        ]  # fmt: skip
    # corrected, not raw: holm raises some p above its raw value
    assert any((mc.p_adjusted or 0) > (mc.p_value or 0) for mc in expected.metrics.values())
    assert table["ndcg@5"][7] == "worse (significant)"
    assert "| metric | n | base | new | diff | 95% CI | p (holm) | change |" in text
    # gates: failed first, each with its message; 2 thresholds + a regression gate per metric
    gates = _rows(text, "### Gates")
    assert [g[0] for g in gates] == sorted((g[0] for g in gates), key=lambda v: v == "PASS")
    by_name = {g[1]: g for g in gates}
    assert by_name["ndcg@5 >= 0.55"][0] == "FAIL"
    assert by_name["ndcg@5 regression"][0] == "FAIL"
    assert by_name["ndcg@5 regression"][2].startswith("ndcg@5 = ")
    assert f"**Gates: {sum(g[0] == 'FAIL' for g in gates)} of {len(gates)} failed.**" in text
    # the most regressed samples of ndcg@5, as the reports' own columns give them
    b, n = Report.load(base).column("ndcg@5"), Report.load(new).column("ndcg@5")
    losses = sorted((n[i] - b[i], i) for i in b if n[i] is not None and n[i] < b[i])  # type: ignore[operator]
    samples = _rows(text, "`ndcg@5` (higher is better)")
    assert len(samples) == 3
    assert [float(s[3]) for s in samples] == [round(d, 4) for d, _ in losses[:3]]
    # a normalised twin gets no table of its own: its samples are faithfulness's
    assert "`faithfulness_norm` (higher" not in text and "`faithfulness` (higher" in text


def test_data_in_the_comment_is_text(runs, capsys) -> None:
    base, new = runs
    text = _comment(capsys, str(base), str(new), "--top", "40")
    tokens = MD.parse(text)
    kinds = [t.type for t in _walk(tokens)]
    # the marker is the one piece of HTML, the gate line the one bold; nothing else links,
    # embeds or emphasises
    assert kinds.count("html_block") == 1 and tokens[0].content.strip() == MARKER
    assert kinds.count("strong_open") == 1
    assert not {"html_inline", "image", "link_open", "em_open", "s_open"} & set(kinds)
    samples = [r[0] for r in _rows(text, "`ndcg@5` (higher is better)")]
    assert HOSTILE in samples  # shown as written
    assert LONG[: MAX_ID_CHARS - 1] + "…" in [r[0] for r in _rows(text, "`mrr` (higher")]


def test_every_hostile_id_renders_as_itself(runs) -> None:
    # The ids report.md's escaping is tested with, on the first samples of both runs (those
    # that got worse), rendered straight from the reports.
    base, new = Report.load(runs[0]), Report.load(runs[1])

    def renamed(report: Report) -> Report:
        ids = [*ESCAPE_TESTS, *(s.id for s in report.samples[len(ESCAPE_TESTS) :])]
        samples = [s.model_copy(update={"id": i}) for s, i in zip(report.samples, ids)]
        return report.model_copy(update={"samples": samples})

    base, new = renamed(base), renamed(new)
    result = compare_all(base, [(ESCAPE_TESTS[0], new)], correction="holm", base_label=XSS)
    text = render_comment(result, base, new, top=len(base.samples))
    tokens = MD.parse(text)
    kinds = [t.type for t in _walk(tokens)]
    assert kinds.count("html_block") == 1 and tokens[0].content.strip() == MARKER
    assert not (FORBIDDEN - {"html_block"}) & set(kinds)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert [h.split(":")[0] for h in headings] == ["rag-judge", "Metrics", "Most regressed samples"]
    shown = {r[0] for r in _rows(text, "`faithfulness` (higher is better)")}
    for hostile in ESCAPE_TESTS[:6]:  # the six unsupported answers, each shown as written
        cut = hostile if len(hostile) <= MAX_ID_CHARS else hostile[: MAX_ID_CHARS - 1] + "…"
        assert " ".join(cut.splitlines()).strip() in shown


def test_regressed_samples_follow_the_metric_direction(runs) -> None:
    base, new = Report.load(runs[0]), Report.load(runs[1])
    worse = regressed_samples(base, new, "ndcg@5", Direction.HIGHER, 50)
    assert worse and all(r.new < r.base for r in worse)
    assert len(worse) <= WORSE  # only the samples whose contexts were reversed
    # read as lower-is-better, the way back from new to base is the one that got worse
    assert regressed_samples(base, new, "ndcg@5", Direction.LOWER, 50) == []
    back = regressed_samples(new, base, "ndcg@5", Direction.LOWER, 50)
    assert [(r.id, r.base, r.new) for r in back] == [(r.id, r.new, r.base) for r in worse]
    assert regressed_samples(base, new, "ndcg@5", Direction.NEUTRAL, 50) == []


def test_no_gates_and_no_change(runs, capsys) -> None:
    text = _comment(capsys, str(runs[0]), str(runs[0]), "--correction", "none")
    assert "**Gates:** none given." in text and "### Gates" not in text
    assert "0 significantly worse, 0 significantly better" in text
    assert "### Most regressed samples" not in text and "| p | change |" in text


def test_out_writes_the_file_and_bad_gates_are_bad_input(runs, tmp_path, capsys) -> None:
    base, new = runs
    out = tmp_path / "c" / "comment.md"
    assert main(["comment", str(base), str(new), "--out", str(out)]) == 0
    assert out.read_text().startswith(MARKER + "\n")
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert main(["comment", str(base), str(new), "--fail-under", "ndgc@5=0.5"]) == 2
    assert "did you mean 'ndcg@5'?" in capsys.readouterr().err
    assert main(["comment", str(base), str(new), "--significant-only"]) == 2


def test_read_gates(tmp_path) -> None:
    plain = tmp_path / "gates.yaml"
    plain.write_text("ndcg@5: '>= 0.55'\nfaithfulness: 4\n")
    assert read_gates(plain) == {"ndcg@5": ">= 0.55", "faithfulness": 4}
    assert read_gates(REPO / "configs" / "matrix.yaml") == {
        "ndcg@5": ">= 0.55", "faithfulness": ">= 4.0", "unscored_rate": "<= 0.02",
    }  # fmt: skip
    plain.write_text("ndcg@5: 'about 0.5'\n")
    with pytest.raises(ConfigError, match=r"gates\.yaml: .*ndcg@5"):
        read_gates(plain)
    plain.write_text("- ndcg@5\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        read_gates(plain)


# ---- docs/ci.md's worked example and the GitHub Actions example --------------------------------

SECTION = (REPO / "docs" / "ci.md").read_text().split("## Pull-request comments and JUnit", 1)[1]
WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"


def _commands(script: str) -> list[list[str]]:
    """The ``rag-judge`` command lines of a shell script, continuations joined."""
    joined = script.replace("\\\n", " ")
    return [
        shlex.split(line)[1:]
        for line in joined.splitlines()
        if line.strip().startswith("rag-judge ")
    ]


def _in_repo_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a folder that sees the repository's configs and examples, writing runs/ there."""
    for name in ("configs", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)


def test_the_worked_example_of_docs_ci_runs(tmp_path, monkeypatch, capsys) -> None:
    (script,) = re.findall(r"```sh\n(.*?)```", SECTION, re.DOTALL)
    (gate_xml,) = re.findall(r"```xml\n(.*?)```", SECTION, re.DOTALL)
    (comment,) = re.findall(r"```markdown\n(.*?)```", SECTION, re.DOTALL)
    _in_repo_copy(tmp_path, monkeypatch)
    assert [main(argv) for argv in _commands(script)] == [0, 1, 0]  # as the page says
    capsys.readouterr()
    assert Path("runs/gate.xml").read_text() == gate_xml
    assert Path("runs/comment.md").read_text() == comment


def test_the_workflow_runs_a_stub_config_and_updates_its_comment(tmp_path, monkeypatch) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["permissions"]["pull-requests"] == "write"
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as the trigger
    assert set(workflow[True]) == {"push", "pull_request"}
    (job,) = workflow["jobs"].values()
    steps = job["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    for action in ("actions/checkout", "actions/setup-python", "actions/github-script"):
        assert action in uses
    scripts = [s["run"] for s in steps if "run" in s]
    commands = [argv for script in scripts for argv in _commands(script)]
    assert [argv[0] for argv in commands] == ["run", "run", "comment"]
    for argv in commands:  # each parses with the real command line
        args = _parser().parse_args(argv)
        assert args.command == argv[0]
    (pr_run,) = [a for a in commands if "--junit" in a]
    assert _parser().parse_args(pr_run).junit == Path("runs/junit.xml")
    config = load_config(REPO / "examples" / "ci" / "rag-judge.yaml")
    judge = config.evaluators[1]
    assert config.gates and isinstance(judge, JudgeEvaluator)
    assert judge.judge.client.provider == "stub"  # no model, no key, no network
    # the post step searches for the marker the comment starts with, and updates in place
    (post,) = [s for s in steps if s.get("uses", "").startswith("actions/github-script")]
    assert f"'{MARKER}'" in post["with"]["script"] and "updateComment" in post["with"]["script"]
    assert "always()" in post["if"]
    # the pull request's commands, in order against a baseline from main's, run as written
    _in_repo_copy(tmp_path, monkeypatch)
    assert [main(argv) for argv in commands] == [0, 0, 0]
    assert Path("runs/comment.md").read_text().startswith(MARKER + "\n")
    assert "<testcase" in Path("runs/junit.xml").read_text()
