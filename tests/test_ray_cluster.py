"""``executor: ray`` beside a cluster started apart (``ray start --head --block`` with token
authentication, a subprocess of the test, stopped after): a run without an address starts a
cluster of its own instead of joining it; a run that joins it without the token ends in one
line naming ``ray.address`` (exit 2, no traceback); with the token, the workers, which do not
inherit the driver's environment, use the driver's ``RAG_JUDGE_CACHE_DIR``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_judge.config import ExperimentConfig
from rag_judge.evaluators.sacrebleu import BleuEvaluator
from rag_judge.pipeline import Pipeline
from tests.evaluators import judge_sample

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

TOKEN = "0123456789abcdef0123456789abcdef"  # the test cluster's own, made up here
READY = "will now block forever"  # the last line `ray start --block` prints once it is up


def _env(**extra: str) -> dict[str, str]:
    """This environment without rag-judge's and Ray's settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_JUDGE_", "RAY_"))}
    return {**env, **extra}


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a one-CPU cluster that requires ``TOKEN``."""
    folder = tmp_path_factory.mktemp("head")
    options = "--head --port=0 --num-cpus=1 --include-dashboard=false --disable-usage-stats"
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", *options.split(), "--block"]
    proc = subprocess.Popen(
        command,
        env=_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, ended with it below
    )
    address = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "--address=" in line and address is None:
                address = line.split("--address=", 1)[1].split()[0].strip("'\"")
            if READY in line:
                break
        assert address, "ray start printed no address"
        yield address
    finally:
        proc.send_signal(signal.SIGTERM)  # ray start stops the processes it started
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a stuck shutdown
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # Ray leaves the machine's "current cluster" naming this one, which a later
        # ray.init() without an address would try to join.
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if address and current.exists() and current.read_text().strip() == address:
            current.unlink(missing_ok=True)


def _cli(
    config: Path, out: Path, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rag_judge.cli", "run", str(config), "--out", str(out), "--quiet"]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)


def _dataset(folder: Path) -> Path:
    path = folder / "d.jsonl"
    path.write_text("".join(judge_sample(i).model_dump_json() + "\n" for i in range(1, 4)))
    return path


def test_without_an_address_a_run_starts_its_own_cluster(
    head: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():  # pragma: no cover - another module's cluster
        ray.shutdown()
    samples = [judge_sample(i) for i in range(1, 4)]
    config = ExperimentConfig(evaluators=[BleuEvaluator()], executor="ray", ray={"shards": 2})
    try:
        report = Pipeline(config).run(samples).report
        joined = ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
    assert joined.rsplit(":", 1)[1] != head.rsplit(":", 1)[1]
    assert report.summary["bleu"].n == 3


def test_joining_without_the_token_is_one_line_naming_the_address(
    head: str, tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        f"dataset: {_dataset(tmp_path)}\nexecutor: ray\nray: {{address: '{head}'}}\n"
        "evaluators: [{type: bleu}]\n"
    )
    done = _cli(config, tmp_path / "out", _env(), tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"rag-judge: error: ray.address '{head}': the Ray cluster refused" in done.stderr
    assert "RAY_AUTH_TOKEN" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_the_workers_use_the_drivers_cache_dir(head: str, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        f"dataset: {_dataset(tmp_path)}\nexecutor: ray\nray: {{address: '{head}'}}\n"
        "evaluators: [{type: judge, rubrics: [faithfulness]}]\n"
    )
    cache = tmp_path / "cache"
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN, RAG_JUDGE_CACHE_DIR=str(cache))
    done = _cli(config, tmp_path / "out", env, tmp_path)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(cache / "judge.sqlite") as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM completions").fetchone()
    assert rows == 3  # the workers' judge calls, cached where the driver says
