"""Conversations scored per unit: what `per: step` / `per: turn` costs over plain samples.

    python benchmarks/conversations.py              # 2,000 conversations x 4 turns x 2 hops
    python benchmarks/conversations.py --n 500      # smaller
    python benchmarks/conversations.py --skip-memory

Synthetic conversations (seeded numpy): each turn has 2 retrieval steps of 10 contexts drawn
from a pool of document ids, 5 documents of the turn graded 0-3, and an answer and a reference
of ~20 words; one quality per conversation makes its turns alike (as the docs' "Clustered
intervals" say real ones are). Two sides score the same units with the same metric code
(issue 29):
  A  one Pipeline over the conversations: `retrieval` (ndcg@10, mrr, recall@10, judged: false,
     per: step) and `rouge` (measures [f1], per: turn), with thresholds on step.ndcg@10 and
     turn.rouge1_f1: expansion into units, the clustered bootstrap, the join of the units'
     values into each conversation's rows and the degraded hops included;
  B  the same units flattened beforehand (`step_samples`, `turn_samples`, outside the timing)
     and scored as plain single-turn samples by two pipelines without `per`: the same metric
     work without the unit bookkeeping.
Wall times are medians of --rounds interleaved rounds; the ratio A/B is the bookkeeping's
price. The means (and every unit's value) must agree: the max |difference| is printed. Then the
clustered bootstrap against the naive one on the same N*8 step values (clusters: the
conversations), and each side's peak memory: max RSS above what its imports and its built
data hold, from a fresh subprocess per side that runs it once (the peak mark is reset after
the data is built, as benchmarks/retrieval.py does; where /proc cannot reset it, the
getrusage peak so far is the baseline).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

TURNS, STEPS, DEPTH, JUDGED, POOL = 4, 2, 10, 5, 5000
RETRIEVAL = ["ndcg@10", "mrr", "recall@10"]
ROUGE = {"type": "rouge", "measures": ["f1"]}
THRESHOLDS = {"step.ndcg@10": ">= 0.5", "turn.rouge1_f1": ">= 0.3"}
_VOCAB_TEXT = (
    "the of and to in a is that for it as was with be by on not this are or from at which "
    "but have an they you were there been one all we their has would when if so no will more "
    "can who its into time only new some could these two may first then do any like now over "
    "such our even most made after also did many before must through back years where much "
    "way well down should because each just those people how too little state good very make "
    "world still own see work long get here between both life being under never day same "
    "invoice plan account billing discount annual upgrade region status key rotation support"
)
_VOCAB = _VOCAB_TEXT.split()


def make_conversations(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` conversations of TURNS turns, as JSON-like dicts (Sample.model_validate's input)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(_VOCAB) + 1)
    weights /= weights.sum()

    def words(k: int) -> list[str]:
        return [_VOCAB[i] for i in rng.choice(len(_VOCAB), size=k, p=weights)]

    out = []
    for c in range(n):
        quality = rng.beta(2, 2)  # one conversation's retriever and answers: turns correlate
        turns = []
        for _ in range(TURNS):
            docs = rng.choice(POOL, size=3 * DEPTH, replace=False)  # the turn's candidates
            judged = docs[:JUDGED]
            relevance = {f"d{d}": int(rng.integers(0, 4)) for d in judged}
            steps = []
            for s in range(STEPS):
                # the better the conversation, the more judged documents, the higher up
                found = judged[rng.random(JUDGED) < quality]
                rest = rng.choice(docs[JUDGED:], size=DEPTH - len(found), replace=False)
                ranking = np.concatenate([found, rest])
                lift = np.arange(DEPTH) + np.where(np.arange(DEPTH) < len(found), -quality * 10, 0)
                ranking = ranking[np.argsort(lift + rng.random(DEPTH) * 6, kind="stable")]
                steps.append(
                    {
                        "query": " ".join(words(5)) + f" {s}",
                        "contexts": [
                            {"id": f"d{d}", "text": f"passage d{d}: " + " ".join(words(8))}
                            for d in ranking
                        ],
                    }
                )
            reference = words(20 + int(rng.integers(-4, 5)))
            keep = 0.2 + 0.8 * quality
            answer = [
                w if rng.random() < keep else _VOCAB[rng.integers(len(_VOCAB))]
                for w in reference
                if rng.random() < 0.9
            ]
            turns.append(
                {
                    "question": " ".join(words(8)) + "?",
                    "steps": steps,
                    "answer": " ".join(answer).capitalize() + ".",
                    "references": [" ".join(reference).capitalize() + "."],
                    "relevance": relevance,
                }
            )
        out.append({"id": f"c{c}", "turns": turns})
    return out


def make_samples(n: int, seed: int) -> tuple[list[Any], list[Any], list[Any]]:
    """The conversations as Samples, and their step and turn units as plain samples."""
    from rag_judge.data.sample import Sample
    from rag_judge.data.units import step_samples, turn_samples

    conversations = [Sample.model_validate(d) for d in make_conversations(n, seed)]
    steps = [u for c in conversations for u in step_samples(c)]
    turns = [u for c in conversations for u in turn_samples(c)]
    return conversations, steps, turns


def pipelines(seed: int) -> dict[str, Any]:
    """Side A's one pipeline, side B's two (steps, turns)."""
    from rag_judge import Pipeline
    from rag_judge.config import ExperimentConfig

    retrieval = {"type": "retrieval", "metrics": RETRIEVAL, "judged": False}

    def config(evaluators: list[dict[str, Any]], **more: Any) -> Any:
        return ExperimentConfig.model_validate(
            {"name": "bench", "seed": seed, "evaluators": evaluators, **more}
        )

    return {
        "A": Pipeline(
            config([{**retrieval, "per": "step"}, {**ROUGE, "per": "turn"}], thresholds=THRESHOLDS)
        ),
        "B steps": Pipeline(config([retrieval])),
        "B turns": Pipeline(config([ROUGE])),
    }


def sides(n: int, seed: int, built: Any = None) -> dict[str, Callable[[], dict[str, Any]]]:
    """Each side as a function from nothing to its reports; the data (``built``, else made
    here) and the pipelines are ready before it is called."""
    conversations, steps, turns = built or make_samples(n, seed)
    pipes = pipelines(seed)
    return {
        "A": lambda: {"A": pipes["A"].run(conversations).report},
        "B": lambda: {
            "B steps": pipes["B steps"].run(steps).report,
            "B turns": pipes["B turns"].run(turns).report,
        },
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def agreement(reports: dict[str, Any]) -> tuple[float, float, int]:
    """Max |difference| of the means, and of the values unit by unit, between side A's
    ``step.X`` / ``turn.X`` and side B's ``X``; and how many metrics were compared."""
    a = reports["A"]
    worst_mean = worst_unit = 0.0
    compared = 0
    for name in a.summary:
        level, _, metric = name.partition(".")
        b = reports.get({"step": "B steps", "turn": "B turns"}.get(level, ""))
        if b is None or metric not in b.summary:
            continue
        compared += 1
        worst_mean = max(worst_mean, abs(a.summary[name].mean - b.summary[metric].mean))
        ours, theirs = a.column(name), b.column(metric)
        if ours.keys() != theirs.keys():
            raise AssertionError(f"{name}: the units differ from B's samples")
        for uid, v in ours.items():
            w = theirs[uid]
            if (v is None) != (w is None):
                raise AssertionError(f"{name} {uid}: {v} vs {w}")
            if v is not None and w is not None:
                worst_unit = max(worst_unit, abs(v - w))
    return worst_mean, worst_unit, compared


def bootstrap_times(
    values: Any, labels: list[str], seed: int, rounds: int, resamples: int
) -> tuple[float, float, dict[str, Any]]:
    """Median seconds of clustered_bootstrap_ci (``labels``: each value's conversation) and of
    bootstrap_ci on the same values, interleaved; and both intervals."""
    from rag_judge.stats import bootstrap_ci, clustered_bootstrap_ci

    fns = {
        "clustered": lambda: clustered_bootstrap_ci(values, labels, resamples=resamples, seed=seed),
        "naive": lambda: bootstrap_ci(values, resamples=resamples, seed=seed),
    }
    times: dict[str, list[float]] = {k: [] for k in fns}
    out: dict[str, Any] = {}
    for _ in range(rounds):
        for k, fn in fns.items():
            t, out[k] = timed(fn)
            times[k].append(t)
    return statistics.median(times["clustered"]), statistics.median(times["naive"]), out


def peak_memory(side: str, n: int, seed: int) -> float:
    """MiB of peak RSS of one run of ``side`` above the baseline after imports and data,
    measured in a fresh interpreter."""
    cmd = [sys.executable, __file__, "--side", side, "--n", str(n), "--seed", str(seed)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measure_memory(side: str, n: int, seed: int) -> None:
    """Child process: import and warm up on a tiny input, build the data, reset the peak-RSS
    mark, run the side once; print MiB above the mark's start (VmHWM, as ru_maxrss, reset)."""
    sides(3, seed)[side]()
    run = sides(n, seed)[side]
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)
        reset = True
    except OSError:  # no reset: the baseline is the peak so far (ru_maxrss, KiB on Linux)
        reset = False
    base = _status_kib("VmRSS") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    peak = _status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((peak - base) / 1024)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="conversations")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds (median)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--side", choices=["A", "B"], help="run one side once and print its peak MiB")
    args = ap.parse_args()
    if args.side:
        _measure_memory(args.side, args.n, args.seed)
        return

    start = time.perf_counter()
    data = make_samples(args.n, args.seed)
    print(
        f"{args.n} conversations x {TURNS} turns x {STEPS} retrieval steps of {DEPTH} contexts "
        f"({len(data[1])} steps, {len(data[2])} turns; built in "
        f"{time.perf_counter() - start:.1f} s); retrieval "
        f"{', '.join(RETRIEVAL)} per step, ROUGE f1 per turn; medians of {args.rounds} "
        f"interleaved rounds; Python {sys.version.split()[0]}"
    )
    for warm in sides(3, args.seed).values():  # imports and first calls out of the timings
        warm()
    run = sides(args.n, args.seed, data)
    del data
    times: dict[str, list[float]] = {k: [] for k in run}
    outs: dict[str, dict[str, Any]] = {}
    for _ in range(args.rounds):  # interleaved: a slow spell of the machine hits both sides
        for side, fn in run.items():
            outs.pop(side, None)  # the side's last reports go before it runs again
            gc.collect()
            t, outs[side] = timed(fn)
            times[side].append(t)
    wall = {side: statistics.median(t) for side, t in times.items()}
    reports = {name: r for out in outs.values() for name, r in out.items()}
    worst_mean, worst_unit, compared = agreement(reports)

    print(f"\n{'side':<44}{'wall s':>9}{'peak MiB':>10}")
    peaks = {}
    for side in run:
        peaks[side] = float("nan") if args.skip_memory else peak_memory(side, args.n, args.seed)
    label = {
        "A": "A  per: step / per: turn over conversations",
        "B": "B  the same units as plain samples",
    }
    for side in run:
        print(f"{label[side]:<44}{wall[side]:>9.2f}{peaks[side]:>10.1f}")
    print(
        f"A / B: {wall['A'] / wall['B']:.2f}x wall time "
        f"(rounds A {', '.join(f'{t:.2f}' for t in times['A'])}; "
        f"B {', '.join(f'{t:.2f}' for t in times['B'])})"
    )
    if not args.skip_memory:
        print(f"A / B: {peaks['A'] / peaks['B']:.2f}x peak memory")
    a = reports["A"]
    degraded = sum(len(r.degraded) for r in a.samples)
    print(
        f"A's report: {sum(len(r.units) for r in a.samples)} unit rows, {degraded} degraded turns"
    )
    print(
        f"{compared} metrics compared: max |mean difference| A vs B {worst_mean:.2e}, "
        f"max |unit value difference| {worst_unit:.2e}"
    )
    for name in ("step.ndcg@10", "step.mrr", "step.recall@10", "turn.rouge1_f1"):
        s = a.summary[name]
        print(
            f"  {name:<16} mean {s.mean:.4f}  95% CI (clustered) [{s.ci_low:.4f}, "
            f"{s.ci_high:.4f}]  n {s.n}"
        )

    # The bootstrap alone, on A's step.ndcg@10 values (N*8), labelled by their conversation.
    column, clusters = a.column("step.ndcg@10"), a.clusters("step.ndcg@10") or {}
    values = np.array([column[u] for u in clusters], dtype=np.float64)
    labels = list(clusters.values())
    t_clustered, t_naive, cis = bootstrap_times(
        values, labels, args.seed, args.rounds, args.resamples
    )
    print(
        f"\nbootstrap of step.ndcg@10's mean: {len(values)} step values in "
        f"{len(set(labels))} conversations, {args.resamples} resamples (medians of "
        f"{args.rounds} rounds):"
    )
    print(
        f"  clustered_bootstrap_ci {t_clustered * 1000:8.1f} ms  "
        f"[{cis['clustered'][0]:.4f}, {cis['clustered'][1]:.4f}]"
    )
    print(
        f"  bootstrap_ci           {t_naive * 1000:8.1f} ms  "
        f"[{cis['naive'][0]:.4f}, {cis['naive'][1]:.4f}]"
    )
    width = {k: high - low for k, (low, high) in cis.items()}
    print(
        f"  clustered / naive: {t_clustered / t_naive:.2f}x time, "
        f"{width['clustered'] / width['naive']:.2f}x interval width"
    )
    print(
        json.dumps(
            {
                "wall_s": wall,
                "rounds_s": times,
                "peak_mib": peaks,
                "max_mean_diff": worst_mean,
                "max_unit_diff": worst_unit,
                "bootstrap_s": {"clustered": t_clustered, "naive": t_naive},
            }
        )
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this process peak RSS {peak:.0f} MiB)")


if __name__ == "__main__":
    main()
