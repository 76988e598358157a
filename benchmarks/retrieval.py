"""Retrieval metrics: rag-judge vs pytrec_eval vs ranx on the same TREC files, in one run.

    python benchmarks/retrieval.py                 # 10,000 queries x 100 retrieved docs
    python benchmarks/retrieval.py --queries 2000  # smaller

Measures, separately, file parsing and metric computation (medians of --repeat interleaved
rounds), checks the libraries agree, and reports each library's peak memory (max RSS above its
imports, from a fresh subprocess per library doing file -> metrics once). Then the whole
command line: `rag-judge retrieval` against a Python process that does the same through
pytrec_eval (interpreter start and imports included), interleaved. rag-judge's exact reader
(the path taken without pyarrow, or for a file that is not plain) is timed too. Goals (issue
16): file-to-metrics >= 2x pytrec_eval in process, >= 1.5x as a whole process. ranx needs
`pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

METRICS = ["ndcg@10", "map", "mrr", "precision@10", "recall@100"]
TREC = {"ndcg@10": "ndcg_cut_10", "map": "map", "mrr": "recip_rank", "precision@10": "P_10",
        "recall@100": "recall_100"}  # fmt: skip


def make_files(folder: Path, queries: int, depth: int, judged: int, seed: int) -> tuple[Path, Path]:
    """Synthetic qrels (~`judged` docs per query, grades 0-3) and a run of `depth` docs each."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(queries):
        pool = rng.choice(1000, size=depth + judged, replace=False)
        for d in rng.choice(pool, size=judged, replace=False):
            qrels.append(f"q{q} 0 d{d} {rng.integers(0, 4)}\n")
        scores = np.round(np.sort(rng.random(depth))[::-1], 4)  # rounding makes some ties
        for rank, (d, s) in enumerate(zip(pool[:depth], scores), start=1):
            run.append(f"q{q} Q0 d{d} {rank} {s} bench\n")
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    qrels_path.write_text("".join(qrels))
    run_path.write_text("".join(run))
    return qrels_path, run_path


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


# Each library: parse(qrels_path, run_path) -> parsed; compute(parsed) -> {metric: mean}.
def rj_parse(qp: Path, rp: Path) -> Any:
    from rag_judge.data.trec import read_qrels, read_run

    return read_qrels(qp), read_run(rp)


def rj_exact_parse(qp: Path, rp: Path) -> Any:
    """rag-judge's readers with the pyarrow fast path switched off."""
    from rag_judge.data import _trec_columns

    available = _trec_columns.available
    _trec_columns.available = lambda: False  # type: ignore[assignment]
    try:
        return rj_parse(qp, rp)
    finally:
        _trec_columns.available = available  # type: ignore[assignment]


def rj_compute(parsed: Any) -> dict[str, float]:
    from rag_judge.data.ranking import rankings_for
    from rag_judge.metrics.retrieval import compute

    qrels, run = parsed
    _, rankings = rankings_for(qrels, run)
    return {m: float(v.mean()) for m, v in compute(rankings, METRICS).items()}


def pt_parse(qp: Path, rp: Path) -> Any:
    import pytrec_eval

    with qp.open() as fq, rp.open() as fr:
        return pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)


def pt_compute(parsed: Any) -> dict[str, float]:
    import pytrec_eval

    qrels, run = parsed
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map", "recip_rank",
                                                       "P.10", "recall.100"})  # fmt: skip
    res = evaluator.evaluate(run)
    return {m: float(np.mean([r[TREC[m]] for r in res.values()])) for m in METRICS}


def rx_parse(qp: Path, rp: Path) -> Any:
    from ranx import Qrels, Run

    return Qrels.from_file(str(qp), kind="trec"), Run.from_file(str(rp), kind="trec")


def rx_compute(parsed: Any) -> dict[str, float]:
    from ranx import evaluate

    qrels, run = parsed
    out = evaluate(qrels, run, METRICS, make_comparable=True)
    return {m: float(out[m]) for m in METRICS}


LIBS = {"rag-judge": (rj_parse, rj_compute), "pytrec_eval": (pt_parse, pt_compute),
        "ranx": (rx_parse, rx_compute),
        "rag-judge exact": (rj_exact_parse, rj_compute)}  # fmt: skip

# The same file -> five means as a whole process, for each side of the CLI comparison.
PYTREC_PROCESS = """
import sys, numpy as np, pytrec_eval
with open(sys.argv[1]) as fq, open(sys.argv[2]) as fr:
    qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
measures = {"ndcg_cut.10", "map", "recip_rank", "P.10", "recall.100"}
res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
for m in ["ndcg_cut_10", "map", "recip_rank", "P_10", "recall_100"]:
    print(m, "all", np.mean([r[m] for r in res.values()]))
"""


def process_commands(qp: Path, rp: Path) -> dict[str, list[str]]:
    rag_judge = [sys.executable, "-m", "rag_judge.cli", "retrieval", str(qp), str(rp)]
    return {"rag-judge": rag_judge + [a for m in METRICS for a in ("-m", m)],
            "pytrec_eval": [sys.executable, "-c", PYTREC_PROCESS, str(qp), str(rp)]}  # fmt: skip


def process_times(qp: Path, rp: Path, repeat: int) -> dict[str, float]:
    """Median wall seconds of each whole process, the two run alternately."""
    times: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, cmd in process_commands(qp, rp).items():
            start = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True)
            times.setdefault(name, []).append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def peak_memory(lib: str, qp: Path, rp: Path) -> float:
    """MiB of peak RSS above the post-import baseline, measured in a fresh interpreter."""
    cmd = [sys.executable, __file__, "--memory-of", lib, "--files", str(qp), str(rp)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measure_memory(lib: str, qp: Path, rp: Path) -> None:
    """Child process: import and warm up, reset the peak-RSS mark, run file -> metrics once."""
    warm(lib)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)
    base = _status_kib("VmRSS")
    parse, compute = LIBS[lib]
    compute(parse(qp, rp))
    print((_status_kib("VmHWM") - base) / 1024)


def warm(lib: str) -> None:
    """Import the library and, for ranx, compile its numba kernels on a tiny input."""
    with tempfile.TemporaryDirectory() as tmp:
        qp, rp = make_files(Path(tmp), 3, 5, 3, 0)
        parse, compute = LIBS[lib]
        compute(parse(qp, rp))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--memory-of", choices=list(LIBS), help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_of:
        _measure_memory(args.memory_of, *args.files)
        return

    with tempfile.TemporaryDirectory() as tmp:
        qp, rp = make_files(Path(tmp), args.queries, args.depth, args.judged, args.seed)
        print(
            f"{args.queries} queries x {args.depth} retrieved, ~{args.judged} judged each; "
            f"metrics {', '.join(METRICS)}; medians of {args.repeat} interleaved rounds"
        )
        libs = {}
        for lib in LIBS:
            try:
                warm(lib)
            except ImportError as exc:
                print(f"{lib}: not installed ({exc}); pip install -e '.[bench]'")
                continue
            libs[lib] = LIBS[lib]
        samples: dict[str, dict[str, list[float]]] = {lib: {} for lib in libs}
        results: dict[str, dict[str, float]] = {}
        for _ in range(args.repeat):  # interleaved: a slow spell of the machine hits every library
            for lib, (parse, compute) in libs.items():
                t_parse, parsed = timed(lambda p=parse: p(qp, rp))
                t_compute, results[lib] = timed(lambda c=compute, p=parsed: c(p))
                for key, value in (("parse_s", t_parse), ("compute_s", t_compute),
                                   ("total_s", t_parse + t_compute)):  # fmt: skip
                    samples[lib].setdefault(key, []).append(value)
                del parsed
        rows = {lib: {k: statistics.median(v) for k, v in t.items()} for lib, t in samples.items()}
        for lib in rows:
            rows[lib]["peak_mib"] = float("nan") if args.skip_memory else peak_memory(lib, qp, rp)
        processes = process_times(qp, rp, args.repeat) if "pytrec_eval" in libs else {}

    print(f"\n{'library':<16}{'parse s':>10}{'compute s':>11}{'total s':>10}{'peak MiB':>10}")
    for lib, r in rows.items():
        print(f"{lib:<16}{r['parse_s']:>10.3f}{r['compute_s']:>11.4f}{r['total_s']:>10.3f}"
              f"{r['peak_mib']:>10.1f}")  # fmt: skip
    ours = rows.get("rag-judge")
    for other in ("pytrec_eval", "ranx"):
        if ours and other in rows:
            o = rows[other]
            print(f"{other} / rag-judge: compute {o['compute_s'] / ours['compute_s']:.1f}x, "
                  f"parse {o['parse_s'] / ours['parse_s']:.2f}x, "
                  f"file-to-metrics {o['total_s'] / ours['total_s']:.2f}x")  # fmt: skip
    if ours and "pytrec_eval" in rows:
        ratio = rows["pytrec_eval"]["total_s"] / ours["total_s"]
        print(f"in process: pytrec_eval {rows['pytrec_eval']['total_s']:.3f} s, rag-judge "
              f"{ours['total_s']:.3f} s, ratio {ratio:.2f}x (goal >= 2x: "
              f"{'met' if ratio >= 2 else 'missed'})")  # fmt: skip
    if processes:
        ratio = processes["pytrec_eval"] / processes["rag-judge"]
        print(f"whole process: pytrec_eval {processes['pytrec_eval']:.3f} s, rag-judge retrieval "
              f"{processes['rag-judge']:.3f} s, ratio {ratio:.2f}x (goal >= 1.5x: "
              f"{'met' if ratio >= 1.5 else 'missed'})")  # fmt: skip
    if "rag-judge" in results:
        for lib, res in results.items():
            if lib == "rag-judge":
                continue
            diff = max(abs(res[m] - results["rag-judge"][m]) for m in METRICS)
            print(f"max |mean difference| rag-judge vs {lib}: {diff:.2e}")
    print(json.dumps({"rows": rows, "process_s": processes, "means": results}, indent=None))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this process peak RSS {peak:.0f} MiB)")


if __name__ == "__main__":
    main()
