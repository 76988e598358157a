"""BERTScore cold in new processes: each side's whole process timed, on an idle or busy machine.

    .venv/bin/python benchmarks/bertscore.py --processes              # demo (34) and 1,000 pairs
    .venv/bin/python benchmarks/bertscore.py --processes --inputs words:1000  # ~20 vocab words
    .venv/bin/python benchmarks/bertscore.py --processes --busy 2     # two spinning processes too
    .venv/bin/python benchmarks/bertscore.py --processes --threads 1  # torch on one thread

Every run is a new Python process (imports, model load, tokenizer start-up and first calls
included), rag-judge's evaluator with an empty disk cache against ``bert_score.score`` on the
same pairs, model folder, layer and batch size. The pairs and the model folder are made once,
here, and handed over in a file, so a run's process does its side's work only. ``N`` pairs
are prose-like (:func:`prose_pairs`: 10-30 words of the demo corpus's prose, and an edited
copy), ``words:N`` the ~20 vocabulary words of ``make_pairs``, ``demo`` the demo's answers.
Rounds alternate which side goes first and the figures are medians and best runs (on a busy
machine a run's time can jump between two levels as the scheduler places the threads, so look
at both). ``--busy N`` keeps N processes
spinning on the CPU for the whole measurement: a machine shared with other work, where small
inputs once took rag-judge 1.5-2.5x bert-score's time (one thread per small batch fixed it:
rag_judge/metrics/bertscore/cpu.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "configs" / "data" / "demo.jsonl"
CORPUS = ROOT / "configs" / "data" / "corpus"


def prose_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (candidate, reference) pairs of prose: each reference 10-30 consecutive words of
    the demo corpus (configs/data/corpus), each candidate an edited copy (about 70 % of the
    words kept in order, the rest replaced, doubled or dropped)."""
    words = []
    for page in sorted(CORPUS.glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                words += [w.strip("*`") for w in line.lstrip("-* ").split() if w.strip("*`")]
    rng = random.Random(seed)
    cands, refs = [], []
    for _ in range(n):
        size = rng.randint(10, 30)
        start = rng.randrange(len(words) - size)
        ref = words[start : start + size]
        cand = []
        for word in ref:
            roll = rng.random()
            if roll < 0.7:
                cand.append(word)
            elif roll < 0.85:
                cand.append(rng.choice(words))
            elif roll < 0.95:
                cand += [word, rng.choice(words)]
        refs.append(" ".join(ref))
        cands.append(" ".join(cand))
    return cands, refs


def pairs(inputs: str) -> tuple[list[str], list[str]]:
    """(candidates, references): ``demo`` (its answers and first references), ``N`` prose-like
    pairs or ``words:N`` pairs of ~20 vocabulary words (benchmarks/bertscore.py's)."""
    if inputs == "demo":
        rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
        rows = [r for r in rows if r.get("answer") and r.get("references")]
        return [r["answer"] for r in rows], [r["references"][0] for r in rows]
    if inputs.startswith("words:"):
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bertscore import make_pairs

        return make_pairs(int(inputs.split(":", 1)[1]))
    return prose_pairs(int(inputs))


def one_side(side: str, job: str, batch_size: int, threads: int) -> None:
    """Score once in this (new) process and print JSON: the F1s and the scoring call's time.
    ``job`` is the file :func:`compare` wrote: the pairs and the model folder."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    task = json.loads(Path(job).read_text(encoding="utf-8"))
    cands, refs, model_dir = task["cands"], task["refs"], task["model_dir"]
    start = time.perf_counter()
    if side == "theirs":
        import bert_score

        f1 = bert_score.score(
            cands, refs, model_type=model_dir, num_layers=6, device="cpu",
            batch_size=batch_size, nthreads=0,
        )[2].tolist()  # fmt: skip
    else:
        sys.path.insert(0, str(ROOT))
        from rag_judge.data.sample import Sample
        from rag_judge.evaluators.bertscore import BERTScoreEvaluator

        samples = [
            Sample(id=str(i), answer=c, references=[r]) for i, (c, r) in enumerate(zip(cands, refs))
        ]
        with tempfile.TemporaryDirectory() as cache:
            ev = BERTScoreEvaluator(batch_size=batch_size, cache_dir=cache)
            f1 = ev.evaluate(samples).scores["bertscore_f1"]
    print(json.dumps({"f1": f1, "call": time.perf_counter() - start}))


@contextlib.contextmanager
def spinning(n: int) -> Iterator[None]:
    """``n`` processes busy on the CPU until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _run(side: str, job: str, args: argparse.Namespace) -> tuple[float, dict[str, object]]:
    cmd = [sys.executable, __file__, "--one-side", side, "--job", job,
           "--batch-size", str(args.batch_size), "--threads", str(args.threads)]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - start
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def compare(inputs: str, args: argparse.Namespace) -> None:
    walls: dict[str, list[float]] = {"ours": [], "theirs": []}
    calls: dict[str, list[float]] = {"ours": [], "theirs": []}
    f1: dict[str, list[float]] = {}
    sys.path.insert(0, str(ROOT))
    from rag_judge.metrics.bertscore import models as M

    cands, refs = pairs(inputs)
    model_dir = str(M.resolve_model_dir(M.DEFAULT_MODEL))
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"cands": cands, "refs": refs, "model_dir": model_dir}))
        for rnd in range(args.rounds):
            for side in ("ours", "theirs") if rnd % 2 == 0 else ("theirs", "ours"):
                wall, out = _run(side, str(job), args)
                walls[side].append(wall)
                calls[side].append(float(out["call"]))  # type: ignore[arg-type]
                f1[side] = list(out["f1"])  # type: ignore[call-overload]
    ours, theirs = float(np.median(walls["ours"])), float(np.median(walls["theirs"]))
    paired = float(np.median([t / o for t, o in zip(walls["theirs"], walls["ours"])]))
    diff = float(np.max(np.abs(np.array(f1["ours"]) - np.array(f1["theirs"]))))
    words = np.mean([len(t.split()) for t in cands + refs])
    kind = "prose-like " if inputs[0].isdigit() else ""
    label = "demo, 34 pairs" if inputs == "demo" else f"{len(cands)} {kind}pairs"
    print(
        f"  {label} ({words:.1f} words per text): whole process rag-judge {ours:.2f} s, "
        f"bert-score {theirs:.2f} s -> {theirs / ours:.2f}x by medians of {args.rounds}, "
        f"{paired:.2f}x by the median of each round's ratio, "
        f"{min(walls['theirs']) / min(walls['ours']):.2f}x by best runs (runs "
        f"{', '.join(f'{t:.2f}' for t in walls['ours'])} / "
        f"{', '.join(f'{t:.2f}' for t in walls['theirs'])})"
    )
    print(
        f"    the scoring call alone (imports done): rag-judge "
        f"{np.median(calls['ours']):.2f} s, bert-score {np.median(calls['theirs']):.2f} s -> "
        f"{np.median(calls['theirs']) / np.median(calls['ours']):.2f}x; max |F1 diff| {diff:.1e}"
    )


def main(args: argparse.Namespace) -> None:
    threads = f"{args.threads} torch threads" if args.threads else "default torch threads"
    print(
        f"BERTScore cold, a new process per run: {os.cpu_count()} CPUs, {threads}, "
        f"{args.busy} spinning processes, batch size {args.batch_size}"
    )
    with spinning(args.busy):
        for inputs in args.inputs.split(","):
            compare(inputs.strip(), args)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved runs of each side")
    ap.add_argument("--inputs", default="demo,1000", help="'demo' and/or pair counts")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--one-side", choices=("ours", "theirs"), required=True)
    ap.add_argument("--job", required=True, help="the pairs and model folder, as JSON")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    one_side(a.one_side, a.job, a.batch_size, a.threads)
