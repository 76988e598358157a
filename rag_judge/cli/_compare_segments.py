"""``rag-judge compare --group-by KEY``: the whole-report comparison, then each segment's, and
the regressed segments named (docs/segments.md)."""

from __future__ import annotations

import argparse
import json

from rag_judge.analysis.compare import CompareOptions, compare_all, comparison_table, footer
from rag_judge.analysis.segment_compare import compare_segments, segment_table
from rag_judge.analysis.segments import MIN_SEGMENT_N
from rag_judge.cli.segments import checked_keys
from rag_judge.errors import ConfigError
from rag_judge.report.format import markdown_table, md_code, text_table
from rag_judge.report.model import Report
from rag_judge.stats import CORRECTIONS

__all__ = ["compare_by_segment"]


def compare_by_segment(args: argparse.Namespace, options: CompareOptions) -> int:
    """What ``compare`` prints, with a table of every segment after the per-report ones."""
    keys = checked_keys(args.group_by)
    if args.correction not in CORRECTIONS:  # before reading anything
        raise ConfigError(f"unknown correction {args.correction!r}")
    base = Report.load(args.base)
    news = [(str(new), Report.load(new)) for new in args.new]
    result = compare_all(
        base, news, options, metrics=args.metrics, correction=args.correction,
        base_label=str(args.base), level=args.level,
        allow_judge_change=args.allow_judge_change,
    )  # fmt: skip
    min_n = MIN_SEGMENT_N if args.min_segment_n is None else args.min_segment_n
    segments = compare_segments(
        base, news, keys, options, metrics=args.metrics, correction=args.correction, min_n=min_n
    )
    table = segment_table(segments)
    if args.format == "json":
        print(json.dumps({**result.to_dict(), "segments": segments.to_dict()}, indent=2))
    elif args.format == "md":
        out = [f"# Comparison with {md_code(result.base)}", ""]
        for comp in result.comparisons:
            out += [f"## {md_code(comp.new)}", "", markdown_table(comparison_table(result, comp))]
            out.append("")
        out += ["## Segments", "", markdown_table(table), "", footer(result)]
        print("\n".join(out))
    else:
        lines: list[str] = []
        for comp in result.comparisons:
            each = comparison_table(result, comp)
            lines += [each.title, text_table(each), ""]
        lines += [table.title, text_table(table), "", footer(result)]
        print("\n".join(lines))
    return 0
