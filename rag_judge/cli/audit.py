"""``rag-judge audit REPORT``: the judge audit of a report's 1-5 rubrics (length bias, score
collapse, unscored rate, self-preference) and, given a pairwise JSON, position consistency;
recomputed from the report, so a report written before the audit existed is audited too.

Exit 0 with the audit; 3 when the report's judge scored nothing at all (every call failed), as
``rag-judge run`` exits 3 then: an audit of no verdicts is no clean bill."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_judge.analysis.audit import audit_pairwise, audit_report, load_pairwise
from rag_judge.cli._exits import EXIT_JUDGE_FAILED
from rag_judge.report._format import (
    ci_label,
    interval,
    markdown_table,
    md_text,
    num,
    short,
    text_table,
)
from rag_judge.report.model import Report, RubricAudit

__all__ = [
    "EXIT_JUDGE_FAILED",
    "Settings",
    "add_parser",
    "render_json",
    "render_markdown",
    "render_table",
    "run_audit",
]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "audit", help="judge audit: length bias, score collapse, unscored rate, self-preference"
    )
    p.add_argument("report", type=Path, help="report.json (or its run folder)")
    p.add_argument("--format", choices=["table", "md", "json"], default="table")
    p.add_argument(
        "--pairwise", type=Path, metavar="PAIRWISE_JSON",
        help="output of `rag-judge pairwise --format json`: add its position consistency",
    )  # fmt: skip
    p.add_argument(
        "--collapse-threshold", type=float, default=0.8, metavar="SHARE",
        help="a rubric is collapsed when its modal score has at least this share (default 0.8)",
    )  # fmt: skip
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p.add_argument(
        "--seed", type=int, default=None,
        help="seed of the bootstrap (default: the run's seed, as the run's own audit)",
    )  # fmt: skip
    p.set_defaults(handler=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    report = Report.load(args.report)
    seed = args.seed if args.seed is not None else int(report.config.get("seed") or 0)
    audits = audit_report(
        report, collapse_threshold=args.collapse_threshold, resamples=args.resamples, seed=seed
    )
    pairwise = audit_pairwise(load_pairwise(args.pairwise)) if args.pairwise else None
    settings = Settings(report.confidence, args.collapse_threshold, args.resamples, seed)
    if args.format == "json":
        print(render_json(audits, pairwise, settings))
    elif args.format == "md":
        print(render_markdown(audits, pairwise, settings))
    else:
        print(render_table(audits, pairwise, settings))
    if report.judge_scored_nothing():
        print("rag-judge: the report's judge scored no value: nothing to audit", file=sys.stderr)
        return EXIT_JUDGE_FAILED
    return 0


@dataclass(frozen=True)
class Settings:
    """What the audit was computed with, for the footer and the JSON."""

    confidence: float
    threshold: float
    resamples: int
    seed: int

    def footer(self) -> str:
        return (
            "length slope: OLS of the score on the answer's length in words, points per 100 "
            f"words; {ci_label(self.confidence)}: percentile bootstrap, {self.resamples} "
            f"resamples, seed {self.seed}; mode: verdicts rounded half up, COLLAPSED at a share "
            f"≥ {short(self.threshold)}; unscored: unscored / (scored + failed) verdicts"
        )


# ---- rendering ----------------------------------------------------------------------------


def _header(s: Settings) -> list[str]:
    return [
        "rubric", "n", "slope /100w", ci_label(s.confidence), "means by length quartile",
        "mode (share)", "unscored", "self-preference",
    ]  # fmt: skip


_TEXT = {0, 4, 5, 7}  # the text columns (left-aligned); numbers are right-aligned


def _cells(a: RubricAudit) -> list[str]:
    slope = num(a.length_slope, "+.3f")
    ci = interval(*a.length_slope_ci, spec=".3f") if a.length_slope_ci else interval(None, None)
    means = " ".join(num(s.mean, ".2f") for s in a.length_strata) or interval(None, None)
    mode = f"{short(a.modal_score)} ({num(a.modal_share, '.0%')})"
    mode += " COLLAPSED" if a.collapsed else ""
    prefers = {True: "yes", False: "no", None: "unknown"}[a.self_preference]
    unscored = num(a.unscored_rate, ".1%")
    return [a.metric, str(a.n), slope, ci, means, mode, unscored, prefers]


def _grouped(
    audits: Mapping[str, RubricAudit], key: Callable[[RubricAudit], str]
) -> list[tuple[str, str]]:
    """(rubrics, text) lines, one per distinct ``key(audit)``, rubrics that share it joined."""
    groups: dict[str, list[str]] = {}
    for metric, a in audits.items():
        groups.setdefault(key(a), []).append(metric)
    return [(", ".join(ms), text) for text, ms in groups.items() if text]


def _quartiles(a: RubricAudit) -> str:
    return ", ".join(f"{s.low}-{s.high} (n {s.n})" for s in a.length_strata)


def _notes(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, s: Settings
) -> list[str]:
    lines = [f"length quartiles (words): {m}: {t}" for m, t in _grouped(audits, _quartiles)]
    notes = _grouped(audits, lambda a: a.self_preference_note)
    lines += [f"self-preference: {m}: {t}" for m, t in notes]
    if pairwise is not None:
        lines.append(_pairwise_line(pairwise))
    return [*lines, s.footer()]


def _pairwise_line(p: RubricAudit) -> str:
    return (
        f"pairwise {p.metric}: position consistency {num(p.position_consistency)} over {p.n} "
        f"scored pairs (unscored {num(p.unscored_rate, '.1%')})"
    )


_NONE = "no judge rubric on a 1-5 scale in the report: nothing to audit"


def render_table(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, settings: Settings
) -> str:
    if not audits:
        return "\n".join([_NONE, *([_pairwise_line(pairwise)] if pairwise else [])])
    table = text_table([_header(settings), *(_cells(a) for a in audits.values())], _TEXT)
    return "\n".join([table, "", *_notes(audits, pairwise, settings)])


def render_markdown(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, settings: Settings
) -> str:
    if not audits:
        return "\n".join([_NONE, *([f"\n- {_pairwise_line(pairwise)}"] if pairwise else [])])
    # rubric names, judge and generator names from data: md_text keeps them text
    rows = [list(map(md_text, _cells(a))) for a in audits.values()]
    table = markdown_table(_header(settings), rows, _TEXT)
    return "\n".join([table, "", *(f"- {md_text(n)}" for n in _notes(audits, pairwise, settings))])


def render_json(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, settings: Settings
) -> str:
    data = {
        "confidence": settings.confidence,
        "collapse_threshold": settings.threshold,
        "resamples": settings.resamples,
        "seed": settings.seed,
        "rubrics": {m: a.model_dump(mode="json") for m, a in audits.items()},
        "pairwise": pairwise.model_dump(mode="json") if pairwise is not None else None,
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
