"""``rag-judge compare BASE NEW...``: paired comparison of run reports, and its renderings
(a terminal table, Markdown for comparison.md, JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_judge.analysis.compare import CompareOptions, CompareResult, Comparison, compare_runs
from rag_judge.report._format import MISSING, ci_label, interval, md_code, md_text, num, p_value
from rag_judge.stats import CORRECTIONS, EXACT_MAX

__all__ = ["add_parser", "render_markdown", "render_table", "run_compare"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return value


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare", help="paired significance tests of one or more runs against a base run"
    )
    p.add_argument("base", type=Path, help="base report.json (or its run folder)")
    p.add_argument("new", type=Path, nargs="+", help="report(s) to compare with the base")
    p.add_argument(
        "-m",
        "--metric",
        action="append",
        dest="metrics",
        help="metric to compare, repeatable (default: every metric in both)",
    )
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="none",
        help="multiple-comparison correction across all metrics and runs",
    )
    p.add_argument("--format", choices=["table", "md", "json"], default="table")
    p.add_argument("--resamples", type=_positive_int, default=10_000, help="bootstrap resamples")
    p.add_argument(
        "--permutations",
        type=_positive_int,
        default=10_000,
        help="random sign flips when n > 16 (smaller n is enumerated exactly)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the test")
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    options = CompareOptions(args.resamples, args.confidence, args.permutations, args.seed)
    result = compare_runs(
        args.base, list(args.new), options, metrics=args.metrics, correction=args.correction
    )
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    elif args.format == "md":
        print(render_markdown(result), end="")
    else:
        print(render_table(result))
    return 0


# ---- rendering ----------------------------------------------------------------------------


def render_table(result: CompareResult) -> str:
    out: list[str] = []
    for comp in result.comparisons:
        rows = _rows(result, comp)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out.append(f"{comp.new} vs {result.base}")
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        out += [*_notes(comp), ""]
    out.append(_footer(result))
    return "\n".join(out)


def render_markdown(result: CompareResult) -> str:
    # paths, metric names and notes from data: md_code / md_text keep them text (see _format)
    out = [f"# Comparison with {md_code(result.base)}", ""]
    for comp in result.comparisons:
        rows = _rows(result, comp)
        out += [f"## {md_code(comp.new)}", "", "| " + " | ".join(rows[0]) + " |"]
        out.append("|---|" + "---:|" * (len(rows[0]) - 1))
        out += ["| " + " | ".join([md_text(r[0]), *r[1:]]) + " |" for r in rows[1:]]
        out += [""] + [f"- {md_text(n)}" for n in _notes(comp)] + [""]
    out.append(_footer(result))
    return "\n".join(out) + "\n"


def _has_ppi(result: CompareResult) -> bool:
    """Whether some metric has a PPI++ difference: only then are its columns shown."""
    return any(
        mc.ppi_n_labelled is not None for c in result.comparisons for mc in c.metrics.values()
    )


def _rows(result: CompareResult, comp: Comparison) -> list[list[str]]:
    adjusted = result.correction != "none"
    ppi = _has_ppi(result)
    ci = ci_label(result.options.confidence)
    head = ["metric", "n", "base", "new", "diff", "change", ci, "p"]
    head += [f"p ({result.correction})"] if adjusted else []
    rows = [[*head, "missing", *(["PPI diff", f"PPI {ci}", "labelled"] if ppi else [])]]
    for name, mc in comp.metrics.items():
        flag = "*" if mc.corpus or mc.signature_differs else ""
        row = [
            name + flag,
            str(mc.n),
            num(mc.base_mean),
            num(mc.new_mean),
            num(mc.diff, "+.4f"),
            mc.change() or MISSING,
            interval(mc.ci_low, mc.ci_high, "+.4f"),
            p_value(mc.p_value),
        ]
        row += [p_value(mc.p_adjusted)] if adjusted else []
        row.append(str(mc.missing))
        if ppi:
            labelled = MISSING if mc.ppi_n_labelled is None else str(mc.ppi_n_labelled)
            row += [num(mc.ppi_diff, "+.4f"), interval(mc.ppi_ci_low, mc.ppi_ci_high, "+.4f")]
            row.append(labelled)
        rows.append(row)
    return rows


def _notes(comp: Comparison) -> list[str]:
    notes = [f"paired samples: only in base {comp.only_in_base}, only in new {comp.only_in_new}"]
    if any(mc.ppi_n_labelled is not None for mc in comp.metrics.values()):
        notes.append(
            "PPI diff: the prediction-powered (PPI++) difference of the means on the human "
            "scale, from the judge's paired differences and the labels of the samples labelled "
            "in both runs (labelled); CI: the new run's interval method (labels.method: t, "
            "small-sample, by default)"
        )
    for name, mc in comp.metrics.items():
        if mc.corpus:
            notes.append(
                f"{name}*: the report's aggregate is {mc.corpus}; base/new/diff and the "
                "paired tests use the per-sample (sentence-level) values"
            )
        if mc.signature_differs:
            notes.append(f"{name}*: the two reports computed it with different options")
    if comp.metrics_only_in_base:
        notes.append(f"metrics only in base: {', '.join(comp.metrics_only_in_base)}")
    if comp.metrics_only_in_new:
        notes.append(f"metrics only in new: {', '.join(comp.metrics_only_in_new)}")
    return notes


def _footer(result: CompareResult) -> str:
    o = result.options
    return (
        "diff = mean(new - base) over paired samples; change: diff read in the metric's "
        f"direction (lower is better for error rates, latency and ranks; {MISSING} for a "
        "neutral metric), not a test; CI: paired bootstrap, "
        f"{o.resamples} resamples; p: two-sided sign-flip test, "
        f"{o.permutations} permutations (exact for n <= {EXACT_MAX}); "
        f"correction: {result.correction}; seed {o.seed}"
    )
