"""``rag-judge audit REPORT``: the judge audit of a report's 1-5 rubrics (length bias, score
collapse, unscored rate, self-preference) and, given a pairwise JSON, position consistency;
recomputed from the report, so a report written before the audit existed is audited too. The
table is report.md's own (``report/judge_tables.py``).

Exit 0 with the audit; 3 when the report's judge scored nothing at all (every call failed), as
``rag-judge run`` exits 3 then: an audit of no verdicts is no clean bill."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from rag_judge.analysis.audit import audit_pairwise, audit_report, load_pairwise
from rag_judge.cli._exits import EXIT_JUDGE_FAILED
from rag_judge.cli._metamorphic import add_arguments, metamorphic_options, run_metamorphic
from rag_judge.report.estimates import AUDIT_RESAMPLES, COLLAPSE_SHARE
from rag_judge.report.format import markdown_table, md_text, text_table
from rag_judge.report.judge_tables import AuditSettings, audit_table, pairwise_line
from rag_judge.report.model import Report, RubricAudit

Settings = AuditSettings  # the name callers of this module know them by

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
        "--collapse-threshold", type=float, default=COLLAPSE_SHARE, metavar="SHARE",
        help="a rubric is collapsed when its modal score has at least this share (default "
        f"{COLLAPSE_SHARE:g})",
    )  # fmt: skip
    p.add_argument("--resamples", type=int, default=AUDIT_RESAMPLES, help="bootstrap resamples")
    p.add_argument(
        "--seed", type=int, default=None,
        help="seed of the bootstrap (default: the run's seed, as the run's own audit)",
    )  # fmt: skip
    add_arguments(p)  # --metamorphic and its options: cli/_metamorphic.py
    p.set_defaults(handler=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    if args.metamorphic:
        return run_metamorphic(args)
    metamorphic_options(args)  # an error when one is given without --metamorphic
    report = Report.load(args.report)
    seed = args.seed if args.seed is not None else int(report.config.get("seed") or 0)
    audits = audit_report(
        report, collapse_threshold=args.collapse_threshold, resamples=args.resamples, seed=seed
    )
    pairwise = audit_pairwise(load_pairwise(args.pairwise)) if args.pairwise else None
    settings = AuditSettings(report.confidence, args.collapse_threshold, args.resamples, seed)
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


# ---- rendering ----------------------------------------------------------------------------

_NONE = "no judge rubric on a 1-5 scale in the report: nothing to audit"


def render_table(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, settings: AuditSettings
) -> str:
    if not audits:
        return "\n".join([_NONE, *([pairwise_line(pairwise)] if pairwise else [])])
    return text_table(audit_table(audits, settings, pairwise))


def render_markdown(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, settings: AuditSettings
) -> str:
    if not audits:
        return "\n".join(
            [_NONE, *([f"\n- {md_text(pairwise_line(pairwise))}"] if pairwise else [])]
        )
    return markdown_table(audit_table(audits, settings, pairwise))


def render_json(
    audits: Mapping[str, RubricAudit], pairwise: RubricAudit | None, settings: AuditSettings
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
