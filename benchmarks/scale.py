"""Scale: `rag-judge run` end to end on 10k-1M synthetic samples, one fresh process per run.

    python benchmarks/scale.py                                    # 10,000 and 100,000 samples
    python benchmarks/scale.py --sizes 1000000 --timeout 3600 --json scale.json
    python benchmarks/scale.py --executor both                    # local and Ray, and the speedup

Per size, a seeded dataset (benchmarks/_scale_data.py: 10 ranked contexts of 200-400 chars with
doc ids, graded relevance, a ~200-char answer, 1-2 references) is streamed to a temp folder as
JSONL (generation time and file size reported apart). A config with the evaluators retrieval
(5 metrics), rouge, bleu and judge (stub provider, cache null, 2 rubrics) is run as a user
would: ``rag-judge run CONFIG --out DIR --overwrite`` in a child process of its own, its stderr
a pipe, so the CLI prints one line per finished step (``evaluators[1] (rouge): done in 8.9 s``).

Per size up to --reference-max, the reference libraries compute the same retrieval, ROUGE and
BLEU scores directly (benchmarks/_scale_reference.py), and each step prints the reference's
seconds, rag-judge's and the ratio.

Reported per run: wall time, samples/s, CPU time, peak RSS (the child's ru_maxrss, from wait4),
the size of each file written, and per phase its time and the highest RSS sampled during it:
``load`` (start-up, imports, reading the dataset: up to the first step), each evaluator (times
from the CLI's step lines), ``finish`` (summaries with bootstrap CIs, report.json/.md/.html,
terminal output: after the last step). The process tree's RSS is polled every 0.2 s: a run
above --max-rss-mb, or past --timeout, is killed and reported as ``exceeded`` / ``timeout``
with the steps it finished. A size whose peak RSS, extrapolated linearly from the runs before
it, would pass --max-rss-mb is skipped (--force runs it). ``--executor ray`` passes
``--executor ray`` to the CLI, or says that the CLI has no Ray backend and skips it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scale_data import write_dataset
from _scale_reference import REFERENCE, print_comparison, reference_times

RETRIEVAL_METRICS = ["precision@5", "recall@10", "mrr", "map", "ndcg@10"]
RUBRICS = ["faithfulness", "correctness"]
POLL_S = 0.2
# A finished step on stderr: "evaluators[1] (rouge): done in 8.9 s", "...: 20000/20000 calls
# in 13.7 s"; a step under 0.05 s has no " in ..." part.
PASS_LINE = re.compile(r"^evaluators [\d, ]+ shared one pass over the samples.*? in ([\d.]+) s$")
STEP_LINE = re.compile(r"^(target|evaluators\[\d+\] \([^)]*\)): (.*?)(?: in ([\d.]+) s)?$")


@dataclass
class Run:
    """One ``rag-judge run`` of one size under one executor."""

    n: int
    executor: str
    status: str = "ok"  # ok | exit N | timeout | exceeded | skipped: ...
    wall_s: float | None = None
    cpu_s: float | None = None
    peak_rss_mb: float | None = None  # the child's own peak (ru_maxrss)
    peak_tree_mb: float | None = None  # the process tree's, sampled every POLL_S
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    rss_mb: dict[str, float] = field(default_factory=dict)  # phase -> highest RSS sampled
    outputs: dict[str, int] = field(default_factory=dict)  # file -> bytes
    stderr_tail: str = ""

    @property
    def samples_per_s(self) -> float | None:
        return self.n / self.wall_s if self.wall_s and self.status == "ok" else None


def cli() -> list[str]:
    """The ``rag-judge`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("rag-judge")
    if script.exists():
        return [str(script)]
    found = shutil.which("rag-judge")
    return [found] if found else [sys.executable, "-m", "rag_judge.cli"]


def cli_help() -> tuple[str, float]:
    """``rag-judge run --help`` and that process's peak RSS in MB (its imports: the base)."""
    out = subprocess.run([*cli(), "run", "--help"], capture_output=True, text=True, check=True)
    return out.stdout, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def environment() -> dict[str, str]:
    """What the figures depend on: versions, cores, and the checkout (read-only git)."""
    env = {"python": platform.python_version(), "cores": str(os.cpu_count())}
    out = subprocess.run([*cli(), "--version"], capture_output=True, text=True)
    env["rag_judge"] = out.stdout.strip() or out.stderr.strip()
    root = Path(__file__).resolve().parent.parent
    git = ["git", "--no-optional-locks", "-C", str(root)]  # reads only, no index refresh
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no", "rag_judge"],
            capture_output=True,
            text=True,
        ).stdout.split("\n")
        changed = [line[3:] for line in dirty if line.strip()]
        env["commit"] = head.stdout.strip() + (f" + {len(changed)} changed" if changed else "")
        env["changed"] = " ".join(changed)
    return env


def write_config(folder: Path, dataset: Path, processes: int = 1) -> Path:
    config = f"""\
name: scale
dataset: {json.dumps(str(dataset))}
seed: 0
processes: {processes}
evaluators:
  - type: retrieval
    metrics: [{", ".join(RETRIEVAL_METRICS)}]
  - type: rouge
  - type: bleu
  - type: judge
    rubrics: [{", ".join(RUBRICS)}]
    client: {{provider: stub}}
    cache: null
"""
    path = folder / "scale.yaml"
    path.write_text(config)
    return path


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants (Linux /proc), 0 for what has gone."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            rss = [line.split()[1] for line in status.splitlines() if line[:6] == "VmRSS:"]
            total += int(rss[0]) if rss else 0  # none in a zombie
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # the process ended meanwhile
            continue
    return total


def measure(run: Run, cmd: list[str], workdir: Path, timeout: float, max_rss_mb: float) -> None:
    """Run ``cmd`` in a session of its own; fill ``run`` from wait4's rusage, the stderr lines
    (timestamped as they arrive) and the RSS polled meanwhile; kill the session past
    ``timeout`` or ``max_rss_mb``."""
    env = {**os.environ, "RAG_JUDGE_CACHE_DIR": str(workdir / "cache")}
    env.pop("CI", None)
    lines: list[tuple[float, str]] = []
    samples: list[tuple[float, int]] = []  # (time, tree RSS in KiB)
    with (workdir / "stdout.txt").open("wb") as stdout:
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=stdout, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        assert proc.stderr is not None
        err = proc.stderr

        def read_stderr() -> None:
            for raw in err:
                lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        killed = ""
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            samples.append((time.monotonic(), tree_rss_kib(proc.pid)))
            if not killed and samples[-1][1] / 1024 > max_rss_mb:
                killed = "exceeded"
            elif not killed and time.monotonic() - start > timeout:
                killed = "timeout"
            if killed:
                os.killpg(proc.pid, signal.SIGKILL)  # the session started above, no other
            time.sleep(POLL_S)
        end = time.monotonic()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        reader.join(timeout=5)
    code = proc.returncode
    run.status = killed or ("ok" if code == 0 else f"exit {code}")
    run.wall_s = end - start
    run.cpu_s = usage.ru_utime + usage.ru_stime
    run.peak_rss_mb = usage.ru_maxrss / 1024
    run.peak_tree_mb = max((kib for _, kib in samples), default=0) / 1024
    run.stderr_tail = "\n".join(text for _, text in lines[-15:])
    phases(run, lines, samples, start, end)


def phases(
    run: Run,
    lines: list[tuple[float, str]],
    samples: list[tuple[float, int]],
    start: float,
    end: float,
) -> None:
    """Split the run at its step lines: ``load`` before the first step began, each step from
    its start (line time - its seconds) to its line, then ``finish`` (or ``unfinished`` for a
    run that was stopped); each phase's seconds and highest sampled RSS.

    Evaluators that share one pass over the samples print their lines together when the pass
    ends, each with its own seconds, then a line with the pass's wall time: the step lines
    since the last phase make that pass, which began at the pass line's time minus its wall
    time; each of its steps gets its own seconds and the pass's highest RSS."""
    spans: list[tuple[float, float, list[tuple[str, float]]]] = []  # (began, ended, steps)
    waiting: list[tuple[float, str, float]] = []  # step lines not yet in a span
    for at, text in lines:
        if m := PASS_LINE.match(text):
            spans.append((at - float(m.group(1)), at, [(n, took) for _, n, took in waiting]))
            waiting = []
        elif m := STEP_LINE.match(text):
            waiting.append((at, m.group(1), float(m.group(3) or 0.0)))
    spans += [(at - took, at, [(name, took)]) for at, name, took in waiting]  # passes of their own
    begin = start
    for i, (began, ended, steps) in enumerate(spans):
        if i == 0:
            run.seconds["load"] = began - begin
            _peak(run, "load", samples, begin, began)
            begin = began
        for name, took in steps:
            run.seconds[name] = took
            _peak(run, name, samples, begin, ended)
        begin = ended
    last = "finish" if run.status == "ok" else "unfinished"
    run.seconds[last] = end - begin
    _peak(run, last, samples, begin, end)


def _peak(
    run: Run, name: str, samples: list[tuple[float, int]], begin: float, until: float
) -> None:
    inside = [kib for t, kib in samples if begin <= t <= until]
    if inside:
        run.rss_mb[name] = max(inside) / 1024


def output_sizes(out: Path) -> dict[str, int]:
    return {
        str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()
    }


def extrapolate(runs: list[Run], n: int, base_mb: float) -> tuple[float, float] | None:
    """(peak RSS at ``n``, MB per extra sample) on the line through the two largest finished
    runs, or through one run and ``base_mb`` (the CLI's RSS after its imports)."""
    done = sorted((r.n, r.peak_rss_mb) for r in runs if r.status == "ok" and r.peak_rss_mb)
    points = [(0, base_mb), *done][-2:]
    if len(points) < 2 or points[0][0] == points[1][0]:
        return None
    (n1, m1), (n2, m2) = points
    slope = (m2 - m1) / (n2 - n1)
    return m2 + slope * (n - n2), slope


def _size(b: int) -> str:
    return f"{b / 1e6:.1f} MB" if b >= 1e5 else f"{b / 1e3:.1f} kB"


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def _short(phase: str) -> str:
    return re.sub(r"evaluators\[\d+\] \((.*)\)", r"\1", phase)


def print_table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(c) for c in col) for col in zip(head, *rows)]
    for row in [head, *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


def report(runs: list[Run]) -> None:
    """Three tables: the runs, seconds per phase, highest RSS per phase."""
    ran = [r for r in runs if r.wall_s is not None]
    names = sorted({k for r in runs for k in r.outputs})
    head = ["n", "executor", "status", "wall s", "samples/s", "cpu s", "peak RSS MB"]
    rows = [
        [f"{r.n:,}", r.executor, r.status, _num(r.wall_s, ".1f"), _num(r.samples_per_s, ",.0f"),
         _num(r.cpu_s, ".1f"), _num(r.peak_rss_mb, ",.0f")]
        + [_size(r.outputs[k]) if k in r.outputs else "—" for k in names]
        for r in runs
    ]  # fmt: skip
    print_table(head + names, rows)
    order = list(dict.fromkeys(k for r in ran for k in r.seconds))
    for title, values, fmt in (("seconds", "seconds", ".1f"), ("peak RSS MB", "rss_mb", ",.0f")):
        print(f"\n{title} by phase")
        rows = [
            [f"{r.n:,}", r.executor] + [_num(getattr(r, values).get(p), fmt) for p in order]
            for r in ran
        ]
        print_table(["n", "executor", *map(_short, order)], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated sample counts")
    ap.add_argument("--executor", choices=["local", "ray", "both"], default="local")
    ap.add_argument("--processes", type=int, choices=[1, 2], default=1,
                    help="the config's processes: 2 scores retrieval, ROUGE and BLEU in a second "
                    "process beside the judge (executor local; shown as local/2)")  # fmt: skip
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    ap.add_argument("--max-rss-mb", type=float, default=12000, help="kill a run above this")
    ap.add_argument("--force", action="store_true", help="run sizes predicted to exceed it too")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--tmp", type=Path, help="folder for datasets and outputs (default: system)")
    ap.add_argument("--keep", action="store_true", help="keep datasets and reports")
    ap.add_argument("--reference-max", type=int, default=100_000,
                    help="time the reference libraries on sizes up to this (0: never)")  # fmt: skip
    args = ap.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    executors = ["local", "ray"] if args.executor == "both" else [args.executor]
    usage, base_mb = cli_help()  # the first child: RUSAGE_CHILDREN is its alone
    env = environment()
    ray = "not asked for"
    if "ray" in executors:
        ray = "passed --executor ray"
        if "--executor" not in usage:
            ray = "not available: `rag-judge run` has no --executor option"
            print(f"Ray backend {ray}; skipping it")
            executors.remove("ray")
    print(f"rag-judge run: retrieval ({', '.join(RETRIEVAL_METRICS)}), rouge, bleu, judge "
          f"(stub, cache null: {', '.join(RUBRICS)}); {env['rag_judge']}, {env.get('commit')}, "
          f"Python {env['python']}, {env['cores']} cores; per run at most "
          f"{args.timeout:.0f} s and {args.max_rss_mb:,.0f} MB")  # fmt: skip

    runs: list[Run] = []
    data: dict[int, dict[str, float]] = {}
    references: dict[int, dict[str, float]] = {}
    if not executors:
        print("nothing to run")
        return
    top = Path(tempfile.mkdtemp(prefix="rag-judge-scale-", dir=args.tmp))
    try:
        for n in sizes:
            for executor in executors:
                two = args.processes == 2 and executor == "local"
                run = Run(n, executor + ("/2" if two else ""))
                runs.append(run)
                guess = extrapolate([r for r in runs if r.executor == run.executor], n, base_mb)
                if guess and guess[0] > args.max_rss_mb and not args.force:
                    run.status = f"skipped: ~{guess[0]:,.0f} MB predicted"
                    print(f"n={n:,} {executor}: {run.status} (> --max-rss-mb; --force runs it)")
                    continue
                dataset = top / f"data-{n}.jsonl"
                if n not in data:
                    t0 = time.perf_counter()
                    size = write_dataset(dataset, n, args.seed)
                    data[n] = {"seconds": time.perf_counter() - t0, "bytes": size}
                    print(f"n={n:,}: dataset {size / 1e6:,.1f} MB in {data[n]['seconds']:.1f} s")
                    if n <= args.reference_max:
                        references[n] = reference_times(dataset)
                        took = (f"{REFERENCE[k]} {v:.1f} s" for k, v in references[n].items())
                        print(f"n={n:,}: reference " + ", ".join(took))
                work = top / f"run-{n}-{executor}"
                work.mkdir()
                processes = args.processes if executor == "local" else 1
                cmd = [*cli(), "run", str(write_config(work, dataset, processes))]
                cmd += ["--out", str(work / "out"), "--overwrite"]
                cmd += ["--executor", "ray"] if executor == "ray" else []
                measure(run, cmd, work, args.timeout, args.max_rss_mb)
                if (work / "out").exists():
                    run.outputs = output_sizes(work / "out")
                print(f"n={n:,} {executor}: {run.status}, {run.wall_s:.1f} s, "
                      f"peak RSS {run.peak_rss_mb:,.0f} MB")  # fmt: skip
                if run.status != "ok":
                    print("  " + run.stderr_tail.replace("\n", "\n  "))
                if not args.keep:
                    shutil.rmtree(work, ignore_errors=True)
            if not args.keep:
                (top / f"data-{n}.jsonl").unlink(missing_ok=True)
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)
        else:
            print(f"kept {top}")

    print()
    report(runs)
    print()
    for n in sizes:
        wall = {r.executor: r.wall_s or 0.0 for r in runs if r.n == n and r.status == "ok"}
        if wall.get("local") and wall.get("ray"):
            print(f"n={n:,}: Ray speedup {wall['local'] / wall['ray']:.2f}x (wall, local / ray)")
    for run in runs:
        if run.status == "ok" and run.executor == "local" and run.n in references:
            steps = {_short(phase): seconds for phase, seconds in run.seconds.items()}
            print_comparison(run.n, references[run.n], steps)
    for executor in executors:
        done = [r for r in runs if r.status == "ok" and r.executor == executor]
        if not done:
            continue
        last = max(r.n for r in done)
        for n in sorted({last * 10, 1_000_000} - {r.n for r in done}):
            if n > last and (guess := extrapolate(done, n, base_mb)):
                print(f"{executor}: peak RSS at n={n:,} extrapolated linearly: "
                      f"~{guess[0]:,.0f} MB ({guess[1] * 1e3:.0f} kB per sample)")  # fmt: skip
    if args.json:
        result = {
            "environment": env,
            "ray": ray,
            "cli_base_rss_mb": base_mb,
            "datasets": {str(n): d for n, d in data.items()},
            "reference_s": {str(n): r for n, r in references.items()},
            "runs": [{**asdict(r), "samples_per_s": r.samples_per_s} for r in runs],
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
