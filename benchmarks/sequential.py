"""Sequential gates: judge calls saved by ``run --sequential`` against the full run.

    .venv/bin/python benchmarks/sequential.py            # the demo set (34) and 10,000 samples
    .venv/bin/python benchmarks/sequential.py --n 2000   # a quicker synthetic set

Both sides run in this process on the same set with the stub judge (no network), each with
its own empty judge cache: the full run (``Pipeline.run``) and ``run_sequential`` in 5% chunks.
The synthetic set is the demo's 34 rows repeated under new ids, each question made distinct
(``--n`` samples), so that no judge request repeats another. The
gates: ``hit_rate@3 >= 0.5`` and ``faithfulness_norm >= 0.3`` (the demo passes both).
Printed per set: samples judged, judge requests sent by each side, calls saved, seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_judge.config import ExperimentConfig, load_config  # noqa: E402
from rag_judge.pipeline import Pipeline  # noqa: E402
from rag_judge.pipeline.sequential import run_sequential  # noqa: E402

DEMO = ROOT / "configs" / "data" / "demo.jsonl"
GATES = {"hit_rate@3": ">= 0.5", "faithfulness_norm": ">= 0.3"}


def config_for(dataset: Path, cache: Path) -> ExperimentConfig:
    path = cache.parent / "exp.yaml"
    path.write_text(
        f"name: bench\ndataset: {dataset}\nbootstrap: {{resamples: 100}}\n"
        f"gates: {json.dumps(GATES)}\nevaluators:\n"
        "  - type: retrieval\n    metrics: [hit_rate@3, mrr]\n"
        "  - type: judge\n    rubrics: [faithfulness, answer_relevance]\n"
        f"    client: {{provider: stub}}\n    cache: {cache}\n"
    )
    return load_config(path)


def synthetic(n: int, folder: Path) -> Path:
    rows = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    path = folder / f"synthetic-{n}.jsonl"
    with path.open("w") as f:
        for i in range(n):
            row = rows[i % len(rows)]  # a distinct question: no request repeats another
            question = f"{row['question']} (case {i})"
            f.write(json.dumps({**row, "id": f"s{i:05d}", "question": question}) + "\n")
    return path


def compare(label: str, dataset: Path, folder: Path) -> None:
    start = time.perf_counter()
    full = Pipeline(config_for(dataset, folder / "full" / "judge.sqlite")).run()
    full_s = time.perf_counter() - start
    start = time.perf_counter()
    seq = run_sequential(config_for(dataset, folder / "seq" / "judge.sqlite"))
    seq_s = time.perf_counter() - start
    print(f"\n## {label}: {seq.total} samples")
    print(f"full run:   {full.report.usage.requests} judge requests, {full_s:.1f} s")
    print(f"sequential: {seq.calls_made} judge requests, {seq_s:.1f} s, chunks at {seq.looks}")
    print(seq.render())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="synthetic samples (10,000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, dataset in [("demo", DEMO), ("synthetic", synthetic(args.n, folder))]:
            (folder / label / "full").mkdir(parents=True)
            (folder / label / "seq").mkdir(parents=True)
            compare(label, dataset, folder / label)


if __name__ == "__main__":
    main()
