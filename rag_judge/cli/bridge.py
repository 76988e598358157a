"""``rag-judge bridge OLD --judge NEW-CONFIG``: judge a seeded subset of OLD's samples again
with NEW-CONFIG's judges, fit an old -> new map per rubric and store it (bridge.json), so that
``compare`` and ``gate`` can compare OLD with a run of the new judge (``--bridge``).
docs/judge-estimates.md ("Bridging a judge change") explains what it guarantees."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rag_judge.analysis.bridge import FOLDS, MIN_PAIRS, Bridge, RubricBridge, fit_rubric
from rag_judge.cli._args import positive_int
from rag_judge.config import load_config
from rag_judge.errors import ConfigError
from rag_judge.pipeline.rejudge import judge_config, judged_samples, rejudge, seeded_subset
from rag_judge.report.format import MISSING, Column, Table, markdown_table, num, text_table
from rag_judge.report.model import Report

__all__ = ["add_parser", "bridge_table", "make_bridge", "run_bridge"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "bridge",
        help="re-judge a seeded subset of a run with a new judge and fit old -> new maps",
        description="Exit 0 when the bridge is written, 2 on bad input.",
    )
    p.add_argument("old", type=Path, help="report.json (or run folder) judged by the old judge")
    p.add_argument("--judge", type=Path, required=True, metavar="NEW-CONFIG",
                   help="config whose judge evaluators are the new judge")  # fmt: skip
    p.add_argument("--n", type=positive_int, default=100, help="samples re-judged (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the subset and the bootstrap")
    p.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples")
    p.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")
    p.add_argument("--out", type=Path, help="bridge file (default: OLD's run folder/bridge.json)")
    p.add_argument("--format", choices=["table", "md", "json"], default="table")
    p.set_defaults(handler=run_bridge)


def make_bridge(
    old_path: Path,
    config_path: Path,
    *,
    n: int = 100,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> Bridge:
    """Judge ``n`` seeded samples of the report at ``old_path`` with the judges of the config at
    ``config_path``; fit every judge metric both judges scored."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    old = Report.load(old_path)
    config = load_config(config_path)
    # Which metrics both judges score is known from the configs: checked before any call.
    names = {m for e in judge_config(config).evaluators for m in e.metric_names()}
    olds = [m for m, s in old.signatures.items() if s.judged_by]
    judged = [m for m in olds if m in names]
    if not judged:
        raise ConfigError(
            f"no judge metric of {old_path} is scored by {config_path}'s judges "
            f"(old: {', '.join(olds) or 'none'}; new: {', '.join(sorted(names)) or 'none'})"
        )
    samples = {s.id: s for s in judged_samples(old)}
    ids = seeded_subset(list(samples), n, seed)
    result = rejudge(config, [samples[i] for i in ids]).report
    rubrics: dict[str, RubricBridge] = {}
    skipped: dict[str, str] = {}
    for m in judged:
        before, after = old.column(m), result.column(m)
        pairs = [(i, before.get(i), after.get(i)) for i in ids]
        kept = [(i, a, b) for i, a, b in pairs if a is not None and b is not None]
        kept = [(i, a, b) for i, a, b in kept if math.isfinite(a) and math.isfinite(b)]
        if len(kept) < 3:  # one metric without pairs does not cost the others theirs
            skipped[m] = f"{len(kept)} pairs scored by both judges; a bridge needs 3"
            continue
        everyone = [(i, v) for i, v in before.items() if v is not None and math.isfinite(v)]
        rubrics[m] = fit_rubric(
            m, [i for i, _, _ in kept], [a for _, a, _ in kept], [b for _, _, b in kept],
            [v for _, v in everyone], all_ids=[i for i, _ in everyone],
            scale=old.summary[m].scale, confidence=confidence, resamples=resamples, seed=seed,
            # a 1-5 rubric's [0, 1] twin is as stepped as the rubric
            monotone=True if old.summary[m].normalises else None,
        )  # fmt: skip
    if not rubrics:
        lines = "; ".join(f"{m}: {why}" for m, why in skipped.items())
        raise ConfigError(f"no judge metric could be bridged ({lines})")
    return Bridge(
        old_report=str(old_path), new_config=str(config_path), seed=seed, n=n,
        confidence=confidence, resamples=resamples, ids=ids,
        old_signatures={m: old.signatures[m] for m in rubrics},
        new_signatures={m: result.signatures[m] for m in rubrics},
        rubrics=rubrics, skipped=skipped, usage=result.usage,
    )  # fmt: skip


def run_bridge(args: argparse.Namespace) -> int:
    bridge = make_bridge(
        args.old, args.judge, n=args.n, seed=args.seed, resamples=args.resamples,
        confidence=args.confidence,
    )  # fmt: skip
    folder = args.old if args.old.is_dir() else args.old.parent
    out = bridge.save(args.out if args.out is not None else folder / "bridge.json")
    for m, why in bridge.skipped.items():
        print(f"warning: {m} not bridged ({why}); compare refuses it", file=sys.stderr)
    for m, r in bridge.rubrics.items():
        if len(r.old) < MIN_PAIRS:
            print(
                f"warning: {m}: {len(r.old)} pairs, fewer than {MIN_PAIRS}; the interval's "
                "coverage is not what docs/judge-estimates.md measures",
                file=sys.stderr,
            )
    if args.format == "json":
        print(bridge.model_dump_json(indent=2))
        return 0
    table = bridge_table(bridge)
    if args.format == "md":
        print(markdown_table(table))
    else:
        print(table.title)
        print(text_table(table))
    print(f"wrote {out}")
    return 0


def bridge_table(bridge: Bridge) -> Table:
    """A row per bridged metric: the pairs, both judges' subset means, the map chosen (its
    parameters and their intervals), agreement, and OLD's mean on the new judge's scale."""
    pct = f"{bridge.confidence:.0%}"
    columns = [Column("metric", "text"), Column("pairs"), Column("old"), Column("new")]
    columns += [Column("map", "text"), Column(f"map {pct} CI", "text"), Column("kappa")]
    columns += [Column("alpha"), Column("OLD mean"), Column("OLD on new scale")]
    columns.append(Column(f"{pct} CI", "text"))
    rows = []
    for m, r in bridge.rubrics.items():
        g = r.chosen()
        if g.kind == "linear":
            shape = f"linear {g.intercept:+.3f} + {g.slope:.3f}x"
        else:
            shape = "isotonic " + " ".join(f"{k:g}->{v:.2f}" for k, v in zip(g.knots, g.values))
        cis = "; ".join(f"{k} [{lo:.2f}, {hi:.2f}]" for k, (lo, hi) in g.ci.items())
        ci = MISSING if r.mapped_ci is None else f"[{r.mapped_ci[0]:.4f}, {r.mapped_ci[1]:.4f}]"
        row = [m, str(len(r.old)), num(_mean(r.old)), num(_mean(r.new)), shape, cis or MISSING]
        row += [num(r.kappa, ".3f"), num(r.alpha, ".3f"), num(r.old_mean), num(r.mapped_mean)]
        rows.append([*row, ci])
    usage = bridge.usage
    notes = [
        f"subset: {len(bridge.ids)} samples of {bridge.old_report}, seed {bridge.seed}; "
        f"judged by {bridge.new_config}: {usage.requests} requests, {usage.cache_hits} "
        f"cached" + ("" if usage.cost is None else f", cost ${usage.cost:.4f}"),
        "OLD on new scale: mean_N(h(old)) + mean_n(new - g_k(old)), cross-fitted over "
        f"{FOLDS} seeded folds, with a t interval; map intervals: percentile bootstrap, "
        f"{bridge.resamples} resamples, seed {bridge.seed}",
    ]
    return Table(f"bridge: {bridge.old_report} -> {bridge.new_config}", columns, rows, notes)


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None
