"""``rag-judge audit REPORT --metamorphic``: the report's own judge evaluators re-judge
deterministic transforms of its samples (:mod:`rag_judge.analysis.metamorphic`), and each
rubric x check gets its rate of broken expectations (an exact binomial interval, the flag's)
and its mean shift (a paired bootstrap interval).

The untransformed samples are re-judged too, as the control: each transform is compared with
it, not with the stored score, and its own movement from the stored scores says whether the
judge is reproducible. A re-judge whose signature differs from the report's (an edited rubric
file, another model or temperature) is refused before any call, and again after the control.
``--dry-run`` prints what the re-judging would send and cost, calling nothing. The re-judging
goes through the judge's cache, so a rerun costs nothing and an interrupted one resumes.
``--threshold 'faithfulness.shuffle <= 0.1'`` gates a rate: exit 1 when one fails, as
``rag-judge gate`` exits; a gate on a rate that was not measured fails too.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rag_judge.analysis.judge_change import describe
from rag_judge.analysis.metamorphic import (
    CHECKS,
    Aim,
    CheckRate,
    Control,
    aims,
    check_rate,
    control_rate,
    for_check,
    signature_changes,
)
from rag_judge.analysis.metamorphic import transformed as transform_all
from rag_judge.cli._args import positive_int
from rag_judge.cli._exits import EXIT_GATE_FAILED
from rag_judge.cli._run_text import dry_run_table
from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator
from rag_judge.evaluators.result import DryRun
from rag_judge.llm.providers import no_calls
from rag_judge.pipeline.rejudge import judged_samples, rejudge, report_config, seeded_subset
from rag_judge.report.format import Column, Table, interval, markdown_table, num, text_table
from rag_judge.report.model import Report, Signature
from rag_judge.report.thresholds import NAMED_THRESHOLD, meets, parse_threshold

__all__ = ["add_arguments", "metamorphic_options", "run_metamorphic"]

Gate = tuple[str, str, str, float]  # (metric, check, operator, bound)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``--metamorphic`` (they need it)."""
    p.add_argument(
        "--metamorphic",
        action="store_true",
        help="re-judge transforms of the samples (shuffle, distractor, padding, "
        "remove_support, injection, citation_swap, number_change): a rate per rubric x check",
    )
    p.add_argument(
        "--checks",
        default=",".join(CHECKS),
        metavar="LIST",
        help=f"comma-separated checks (default: all: {','.join(CHECKS)})",
    )
    p.add_argument(
        "--n",
        type=positive_int,
        default=None,
        help="audit a seeded subset of N samples (default: all)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requests, tokens and cost the re-judging would take; call nothing",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="EXPR",
        help="gate a rate, e.g. 'faithfulness.shuffle <= 0.1' (repeatable; exit 1 if one fails)",
    )
    p.add_argument(
        "--flag-over",
        action="append",
        default=[],
        metavar="CHECK=RATE",
        help="flag CHECK when its interval's lower bound is over RATE (repeatable; defaults: "
        + ", ".join(f"{c}={t:g}" for c, t in CHECKS.items())
        + ")",
    )
    p.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")


def metamorphic_options(args: argparse.Namespace) -> None:
    """An error naming the options of ``--metamorphic`` given without it."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("checks", "n", "dry_run", "threshold", "flag_over", "out")
        if getattr(args, name) not in (None, False, [], ",".join(CHECKS))
    ]
    if given:
        raise ConfigError(f"{', '.join(given)} needs --metamorphic")


def run_metamorphic(args: argparse.Namespace) -> int:
    checks = _checks(args.checks)
    flag_over = _flag_over(args.flag_over)
    gates = [_gate(expr) for expr in args.threshold]
    report = Report.load(args.report)
    config = report_config(report)
    seed = args.seed if args.seed is not None else config.seed
    samples = judged_samples(report)
    if args.n is not None:
        keep = set(seeded_subset([s.id for s in samples], args.n, seed))
        samples = [s for s in samples if s.id in keep]
    plans = [(check, aims(check, config.evaluators)) for check in checks]
    every = [a for _, w in plans for a in w]
    judges = for_check(config.evaluators, every)
    with no_calls():  # the planned signatures, before any call
        planned = {m: sig for ev in judges for m, sig in ev.signatures().items()}
    _refuse_changes(report, planned, every, args.report, planned=True)
    if args.dry_run:
        print(_dry_run(config, judges, samples, plans, seed))
        return 0
    _out_folder(args.out)
    stored = {r.id: r.scores for r in report.samples}
    before: dict[str, dict[str, float | None]] = {s.id: {} for s in samples}
    controls: list[Control] = []
    if judges and samples:  # the control: the untransformed samples, judged again now
        result = rejudge(config.model_copy(update={"evaluators": judges}), samples)
        _refuse_changes(report, result.report.signatures, every, args.report)
        before = {r.id: r.scores for r in result.report.samples}
        for metric in dict.fromkeys(a.metric for a in every):
            pairs = [(stored[s.id].get(metric), before[s.id].get(metric)) for s in samples]
            controls.append(control_rate(metric, pairs, confidence=report.confidence))
    rates: list[CheckRate] = []
    for check, wanted in plans:
        rates += _audit_check(check, wanted, config, samples, before, seed, args, flag_over,
                              report.confidence)  # fmt: skip
    outcomes = [_judge_gate(g, rates) for g in gates]
    data = _json(rates, controls, outcomes, seed, args.resamples, report.confidence, len(samples))
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.format == "json":
        print(json.dumps(data, indent=2))
    else:
        table = _table(rates, controls, report.confidence)
        print(markdown_table(table) if args.format == "md" else text_table(table))
        for line, _ in outcomes:
            print(line)
    if any(not ok for _, ok in outcomes):
        print("rag-judge: a metamorphic threshold failed", file=sys.stderr)
        return EXIT_GATE_FAILED
    return 0


def _audit_check(
    check: str,
    wanted: list[Aim],
    config: ExperimentConfig,
    samples: list[Sample],
    before: dict[str, dict[str, float | None]],
    seed: int,
    args: argparse.Namespace,
    flag_over: dict[str, float],
    confidence: float,
) -> list[CheckRate]:
    if not wanted:
        return []
    moved = transform_all(check, samples, config.evaluators, seed)
    chosen = [t for t in moved if t is not None]
    after: dict[str, dict[str, float | None]] = {}
    if chosen:
        evaluators = for_check(config.evaluators, wanted)
        result = rejudge(config.model_copy(update={"evaluators": evaluators}), chosen)
        after = {r.id: r.scores for r in result.report.samples}
    out = []
    for aim in wanted:
        pairs = [
            None if t is None else (before[s.id].get(aim.metric), after[t.id].get(aim.metric))
            for s, t in zip(samples, moved, strict=True)
        ]
        out.append(
            check_rate(
                check,
                aim,
                pairs,
                threshold=flag_over[check],
                resamples=args.resamples,
                confidence=confidence,
                seed=seed,
            )
        )
    return out


def _refuse_changes(
    report: Report,
    now: dict[str, Signature],
    wanted: list[Aim],
    path: Path,
    *,
    planned: bool = False,
) -> None:
    """An error naming every audited metric whose re-judge would be (``planned``) or was
    judged differently from the report: its scores are not the report's judge's."""
    metrics = list(dict.fromkeys(a.metric for a in wanted))
    changed = signature_changes(report.signatures, now, metrics, planned=planned)
    if changed:
        lines = "\n".join(f"  {describe(m, f)}" for m, f in changed.items())
        raise ConfigError(
            f"the audit's re-judge {'would differ' if planned else 'differs'} from the judge "
            f"of {path} (report -> now):\n{lines}\nthe audit compares one judge with itself: "
            "restore the rubric files and judge settings the report was run with, or run "
            "the report again"
        )


def _out_folder(out: Path | None) -> None:
    """Make ``--out``'s folder before any call, or say why it cannot be written."""
    if out is None:
        return
    if out.is_dir():
        raise ConfigError(f"--out {out}: is a folder; name a file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot make its folder {out.parent}: {e}") from e


def _dry_run(
    config: ExperimentConfig,
    judges: list[Evaluator],
    samples: list[Sample],
    plans: list[tuple[str, list[Aim]]],
    seed: int,
) -> str:
    """One row per check and evaluator that would call a model, the control's first, and
    their total."""
    rows: list[tuple[str, DryRun]] = []
    with no_calls():
        for ev in judges if samples else []:
            estimate = ev.dry_run(samples)
            if estimate is not None:
                rows.append((f"control ({ev.type}, {len(samples)} samples)", estimate))
        for check, wanted in plans:
            chosen = [t for t in transform_all(check, samples, config.evaluators, seed) if t]
            if not wanted or not chosen:
                continue
            for ev in for_check(config.evaluators, wanted):
                estimate = ev.dry_run(chosen)
                if estimate is not None:
                    rows.append((f"{check} ({ev.type}, {len(chosen)} samples)", estimate))
    if rows:
        rows.append(("total", _sum([e for _, e in rows])))
    return dry_run_table(rows)


def _sum(estimates: list[DryRun]) -> DryRun:
    costs = [e.cost_estimate for e in estimates]
    return DryRun(
        prompts=sum(e.prompts for e in estimates),
        skipped=sum(e.skipped for e in estimates),
        requests=sum(e.requests for e in estimates),
        cache_hits=sum(e.cache_hits for e in estimates),
        prompt_tokens_estimate=sum(e.prompt_tokens_estimate for e in estimates),
        completion_tokens_max=sum(e.completion_tokens_max for e in estimates),
        cost_estimate=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
    )


# ---- options, gates, rendering --------------------------------------------------------------


def _checks(text: str) -> list[str]:
    out = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in out if c not in CHECKS]
    if unknown or not out:
        raise ConfigError(f"--checks {text!r}: the checks are {', '.join(CHECKS)}")
    return out


def _flag_over(items: list[str]) -> dict[str, float]:
    out = dict(CHECKS)
    for item in items:
        check, _, value = item.partition("=")
        if check.strip() not in CHECKS:
            raise ConfigError(f"--flag-over {item!r}: expected CHECK=RATE, CHECK one of the checks")
        _, rate = parse_threshold(f">= {value}", metric=check.strip())
        out[check.strip()] = rate
    return out


def _gate(expr: str) -> Gate:
    match = NAMED_THRESHOLD.match(expr)
    name = match["metric"] if match else ""
    metric, _, check = name.rpartition(".")
    if match is None or not metric or check not in CHECKS:
        raise ConfigError(
            f"--threshold {expr!r}: expected RUBRIC.CHECK OP RATE, e.g. "
            "'faithfulness.shuffle <= 0.1'"
        )
    op, bound = parse_threshold(f"{match['op']} {match['value']}", metric=name)
    return metric, check, op, bound


def _judge_gate(gate: Gate, rates: list[CheckRate]) -> tuple[str, bool]:
    metric, check, op, bound = gate
    found = next((r for r in rates if (r.metric, r.check) == (metric, check)), None)
    name = f"{metric}.{check} {op} {bound:g}"
    if found is None or found.rate is None:
        return f"FAIL {name}: not measured (no sample the check applies to)", False
    ok = meets(found.rate, op, bound)
    return f"{'PASS' if ok else 'FAIL'} {name}: rate {found.rate:.4f} (n={found.n})", ok


def _json(
    rates: list[CheckRate],
    controls: list[Control],
    outcomes: list[tuple[str, bool]],
    seed: int,
    resamples: int,
    confidence: float,
    n: int,
) -> dict[str, Any]:
    return {
        "samples": n,
        "seed": seed,
        "resamples": resamples,
        "confidence": confidence,
        "rate_interval": "clopper-pearson",
        "shift_interval": "paired bootstrap",
        "control": [{**asdict(c), "reproducible": c.reproducible} for c in controls],
        "checks": [asdict(r) for r in rates],
        "thresholds": [{"line": line, "passed": ok} for line, ok in outcomes],
    }


_COLUMNS = ["metric", "check", "expects", "n", "n/a", "unscored", "rate", "95% CI", "shift",
            "shift CI", "flag over"]  # fmt: skip


def _table(rates: list[CheckRate], controls: list[Control], confidence: float) -> Table:
    columns = [Column(c, "text" if i < 3 else "number") for i, c in enumerate(_COLUMNS)]
    columns[7] = Column(f"{confidence:.0%} CI", "number")
    rows = [
        [
            r.metric,
            r.check,
            r.expect,
            str(r.n),
            str(r.not_applicable),
            str(r.unscored),
            num(r.rate),
            interval(r.ci_low, r.ci_high),
            num(r.shift),
            interval(r.shift_low, r.shift_high),
            f"{r.threshold:g}" + (" FLAG" if r.flagged else ""),
        ]
        for r in rates
    ]
    notes = [
        "rate: share of the n samples where the judge broke the expectation, against the "
        "control (the untransformed sample judged again); n/a: the transform did not apply or "
        "the original score left no room (a 1 cannot fall)",
        "CI: exact binomial (Clopper-Pearson) for the rate; paired bootstrap for the shift "
        "(mean of transformed minus original)",
        "FLAG: the rate interval's lower bound is over the threshold",
        *(_control_note(c) for c in controls),
    ]
    if not rows:
        notes.insert(0, "no check applies to this report's judge metrics")
    return Table("Metamorphic audit", columns, rows, notes)


def _control_note(c: Control) -> str:
    if c.reproducible:
        return f"control: {c.metric} re-judged as stored on all {c.n} samples (reproducible)"
    return (
        f"control: {c.metric} moved from the stored score on {c.moved} of {c.n} unchanged "
        f"samples (rate {num(c.rate)}, CI {interval(c.ci_low, c.ci_high)}): the judge is not "
        "reproducible (temperature > 0, n-sampling, a changed model behind the same name); "
        "the 'same' rates include that noise"
    )
