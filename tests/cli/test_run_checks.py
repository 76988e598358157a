"""What a new user meets with `rag-judge run`: problems known before any work are one
``file:line: key: message`` line and exit 2, and a rerun never overwrites a previous run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rag_judge.cli import main
from rag_judge.cli.run import fresh_folder
from rag_judge.config import load_config
from rag_judge.errors import ConfigError
from rag_judge.llm import ClientConfig
from rag_judge.messages import cli_error
from tests import REPO

DEMO = REPO / "configs" / "data" / "demo.jsonl"

OPENAI_JUDGE = """\
name: t
dataset: data.jsonl
evaluators:
  - type: retrieval
    metrics: [map]
  - type: judge
    rubrics: [faithfulness]
    cache: null
    client: {provider: openai, model: gpt-4o-mini, api_key_env: RAG_JUDGE_TEST_KEY}
"""


def write(tmp_path: Path, body: str, rows: int = 3) -> Path:
    (tmp_path / "data.jsonl").write_text("".join(DEMO.read_text().splitlines(True)[:rows]))
    path = tmp_path / "exp.yaml"
    path.write_text(body)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_missing_api_key_is_a_config_error_before_any_work(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAG_JUDGE_TEST_KEY", raising=False)
    config = write(tmp_path, OPENAI_JUDGE)
    code, out, err = run(capsys, str(config), "--out", str(tmp_path / "r"))
    assert code == 2
    assert err.splitlines() == [
        f"rag-judge: error: {config}:9: evaluators[1].client.api_key_env: environment "
        "variable RAG_JUDGE_TEST_KEY is not set: the OpenAI API needs a key (or give "
        "base_url for a local server that needs none)"
    ]
    assert out == ""
    assert not (tmp_path / "r").exists()  # nothing scored, no report


def test_a_dry_run_needs_no_api_key_and_creates_no_cache_file(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dry run spends nothing, so a missing key is a note, not an error; and "writes
    # nothing" includes the judge cache, which a dry run used to create.
    monkeypatch.delenv("RAG_JUDGE_TEST_KEY", raising=False)
    cache = tmp_path / "sub" / "judge.sqlite"
    config = write(tmp_path, OPENAI_JUDGE.replace("cache: null", f"cache: {cache}"))
    code, out, err = run(capsys, str(config), "--out", str(tmp_path / "r"), "--dry-run")
    assert code == 0
    assert err.splitlines() == [
        "rag-judge: note: environment variable RAG_JUDGE_TEST_KEY is not set: the OpenAI API "
        "needs a key (or give base_url for a local server that needs none); a real run stops "
        "here"
    ]
    row = out.splitlines()[2].split()
    assert row[:5] == ["evaluators[1]", "(judge)", "3", "0", "3"]  # 3 prompts, all to send
    assert not (tmp_path / "sub").exists() and not (tmp_path / "r").exists()
    # With the cache there, a dry run reads it (and leaves no side file behind).
    from rag_judge.llm.cache import SqliteCache

    SqliteCache(cache).close()
    before = sorted(p.name for p in cache.parent.iterdir())
    assert run(capsys, str(config), "--dry-run")[0] == 0
    assert sorted(p.name for p in cache.parent.iterdir()) == before == ["judge.sqlite"]


def test_the_key_check_passes_with_a_key_or_a_local_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_judge.pipeline import Pipeline

    monkeypatch.setenv("RAG_JUDGE_TEST_KEY", "sk-secret-value")
    Pipeline(load_config(write(tmp_path, OPENAI_JUDGE))).prepare()
    monkeypatch.delenv("RAG_JUDGE_TEST_KEY")
    local = OPENAI_JUDGE.replace("api_key_env:", "base_url: 'http://127.0.0.1:9/v1', api_key_env:")
    Pipeline(load_config(write(tmp_path, local))).prepare()
    with pytest.raises(ConfigError) as err:
        Pipeline(load_config(write(tmp_path, OPENAI_JUDGE))).prepare()
    assert err.value.loc == ("evaluators", 1, "client", "api_key_env")
    assert str(err.value).startswith("evaluators[1].client.api_key_env: environment variable")


def test_a_missing_dataset_names_the_config_line_or_the_option(tmp_path: Path, capsys) -> None:
    config = write(tmp_path, OPENAI_JUDGE.replace("data.jsonl", "nope.jsonl"))
    code, _, err = run(capsys, str(config))
    assert code == 2
    assert err.strip() == (
        f"rag-judge: error: {config}:2: dataset: file not found: {tmp_path.resolve()}/nope.jsonl"
    )
    missing = tmp_path / "other" / "gone.jsonl"
    code, _, err = run(capsys, "configs/demo.yaml", "--dataset", str(missing))
    assert code == 2
    assert err.strip() == f"rag-judge: error: --dataset: file not found: {missing.resolve()}"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("evaluators: []\n",
         "k.yaml:1: evaluators: give at least one evaluator; valid types: retrieval, rouge, "
         "bleu, chrf, ter, bertscore, judge"),
        ("evaluators:\n  - type: retrieval\n    metrics: map\n",
         "k.yaml:3: evaluators[0].metrics: expected a list"),
        ("bootstrap: 3\nevaluators: [{type: bleu}]\n",
         "k.yaml:1: bootstrap: expected a mapping of keys to values"),
        ("metrics: [map]\nevaluators: [{type: retrieval}]\n",
         "k.yaml:1: metrics: unknown key 'metrics' here: it is an option of an evaluator (an "
         "item of evaluators) of type retrieval, bertscore, tools; legal keys here: name, "
         "dataset, "),
        ("evaluators:\n  - type: judge\n    model: m\n",
         "k.yaml:3: evaluators[0].model: unknown key 'model' here: it is an option of a judge's "
         "client (client: {...}); legal keys here: type, rubrics, client,"),
        ("evaluators:\n  - type: judge\n    client: {provider: openai}\n",
         "k.yaml:3: evaluators[0].client.model: provider 'openai' needs a model name"),
    ],
)  # fmt: skip
def test_config_errors_speak_yaml_not_pydantic(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path}/{expected}"), msg
    for internal in ("<root>", "tuple", "instance of", "after validation", "did you mean"):
        assert internal not in msg


def test_option_errors_name_the_command_line_option() -> None:
    with pytest.raises(ValidationError) as err:
        ClientConfig(provider="openai")
    assert (
        str(cli_error(err.value))
        == "--model: provider 'openai' needs a model name, e.g. gpt-4o-mini"
    )
    with pytest.raises(ValidationError) as err:
        ClientConfig(base_url=3, timeout=-1)
    assert str(cli_error(err.value, {"base_url": "--url"})) == (
        "--url: Input should be a valid string; --timeout: Input should be greater than 0"
    )


def test_a_rerun_writes_a_new_folder_unless_overwrite(tmp_path: Path, capsys) -> None:
    config = write(tmp_path, "name: t\ndataset: data.jsonl\nevaluators: [{type: bleu}]\n")
    out = tmp_path / "r"
    assert run(capsys, str(config), "--out", str(out))[0] == 0
    code, stdout, _ = run(capsys, str(config), "--out", str(out))
    assert code == 0
    assert f"{out} holds a previous run: writing to {out}-2 (--overwrite reuses it)" in stdout
    assert (tmp_path / "r-2" / "report.json").exists()
    assert run(capsys, str(config), "--out", str(out))[0] == 0
    assert (tmp_path / "r-3" / "report.json").exists()
    before = (out / "report.json").stat().st_mtime_ns
    code, stdout, _ = run(capsys, str(config), "--out", str(out), "--overwrite")
    assert code == 0 and "holds a previous run" not in stdout
    assert (out / "report.json").stat().st_mtime_ns >= before
    assert not (tmp_path / "r-4").exists()


def test_a_matrix_rerun_gets_a_new_base_folder(tmp_path: Path, capsys) -> None:
    config = write(
        tmp_path,
        "name: t\ndataset: data.jsonl\nevaluators: [{type: bleu}]\n"
        "matrix:\n  s:\n    a: {seed: 1}\n    b: {seed: 2}\n",
    )
    out = tmp_path / "grid"
    assert run(capsys, str(config), "--out", str(out))[0] == 0
    assert (out / "comparison.json").exists()
    assert run(capsys, str(config), "--out", str(out))[0] == 0
    assert json.loads((tmp_path / "grid-2" / "comparison.json").read_text())
    assert (tmp_path / "grid-2" / "s-a" / "report.json").exists()
    assert fresh_folder(out) == tmp_path / "grid-3"
    assert fresh_folder(tmp_path / "empty") == tmp_path / "empty"


def test_a_config_path_that_is_a_folder_is_a_config_error(tmp_path: Path, capsys) -> None:
    # It was an IsADirectoryError: a traceback and exit 1.
    (tmp_path / "a.yaml").write_text("evaluators: [{type: bleu}]\n")
    code, out, err = run(capsys, str(tmp_path))
    assert code == 2 and out == ""
    assert err.strip() == (
        f"rag-judge: error: {tmp_path}: is a folder, not a YAML config file (it holds a.yaml)"
    )


def test_folders_where_the_dataset_or_labels_belong_name_the_config_line(
    tmp_path: Path, capsys
) -> None:
    (tmp_path / "folder").mkdir()
    config = write(tmp_path, "name: t\ndataset: folder\nevaluators: [{type: bleu}]\n")
    code, _, err = run(capsys, str(config))
    assert code == 2
    assert err.strip() == (
        f"rag-judge: error: {config}:2: dataset: is a folder, not a dataset file: "
        f"{(tmp_path / 'folder').resolve()}"
    )
    config = write(tmp_path, "dataset: data.jsonl\nlabels: folder\nevaluators: [{type: bleu}]\n")
    code, _, err = run(capsys, str(config))
    assert code == 2
    assert err.strip() == (
        f"rag-judge: error: {config}:2: labels.path: is a folder, not a label file: "
        f"{(tmp_path / 'folder').resolve()}"
    )


@pytest.mark.parametrize(
    ("labels", "line"),
    [("labels: gone.jsonl\n", 3), ("labels:\n  pass_score: 3\n  path: sub/gone.jsonl\n", 5)],
)
def test_a_missing_label_file_names_the_config_line_and_the_resolved_path(
    tmp_path: Path, capsys, labels: str, line: int
) -> None:
    config = write(
        tmp_path, f"name: t\ndataset: data.jsonl\n{labels}evaluators: [{{type: bleu}}]\n"
    )
    missing = tmp_path / labels.split()[-1]  # next to the config, not the working folder
    code, out, err = run(capsys, str(config), "--out", str(tmp_path / "r"))
    assert code == 2 and out == ""
    assert err.strip() == (
        f"rag-judge: error: {config}:{line}: labels.path: file not found: {missing.resolve()}"
    )
    assert not (tmp_path / "r").exists()  # before any work
