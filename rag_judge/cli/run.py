"""``rag-judge run CONFIG``: every experiment of a config, its reports, gates and comparison."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from rag_judge.analysis.compare import compare_all
from rag_judge.analysis.gates import check_gates
from rag_judge.cli.compare import render_markdown
from rag_judge.cli.gate import add_fail_under, thresholds_from_cli
from rag_judge.config import ExperimentConfig, folder_name, load_experiments
from rag_judge.pipeline import Pipeline
from rag_judge.report.markdown import summary_table
from rag_judge.report.model import Report
from rag_judge.resources import resolve_config

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run_ = subparsers.add_parser("run", help="run an experiment config and write its report")
    run_.add_argument("config", help="YAML experiment config (e.g. configs/demo.yaml)")
    run_.add_argument("--dataset", type=Path, help="dataset file, overriding the config's")
    run_.add_argument("--out", type=Path, help="output folder (default: config output_dir)")
    run_.add_argument(
        "--dry-run",
        action="store_true",
        help="render every model prompt and estimate tokens and cost; call nothing",
    )
    add_fail_under(run_)  # adds to the config's gates
    run_.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run each experiment (one, or one per matrix variant); 1 if a gate failed."""
    overrides = {"dataset": str(args.dataset)} if args.dataset else None
    experiments = load_experiments(resolve_config(args.config), overrides)
    extra_gates = thresholds_from_cli(args.fail_under)
    if args.dry_run:
        return _dry_run(experiments)
    first = experiments[0][1]
    base_out = args.out or first.output_dir or Path("runs") / first.name
    failed = False
    reports: list[tuple[str, Report]] = []  # (its folder, the report), for the comparison
    for name, config in experiments:
        out = base_out / folder_name(name) if name else base_out
        result = Pipeline(config).run()
        paths = result.write(out)
        reports.append((str(out), result.report))
        print(f"\n## {name}\n" if name else "", end="")
        print(summary_table(result.report))
        print(f"\nwrote {', '.join(str(p) for p in paths.values())}")
        gates = {**config.gates, **extra_gates}
        if gates:
            verdict = check_gates(result.report, gates)
            print(verdict.render())
            failed |= not verdict.passed
    if len(reports) > 1:
        # Every variant against the first, paired by sample id, on the reports just made.
        (base_label, base), *news = reports
        comparison = compare_all(base, news, base_label=base_label)
        (base_out / "comparison.json").write_text(json.dumps(comparison.to_dict(), indent=2) + "\n")
        markdown = render_markdown(comparison)
        (base_out / "comparison.md").write_text(markdown)
        print("\n" + markdown)
    return 1 if failed else 0


def _dry_run(experiments: list[tuple[str, ExperimentConfig]]) -> int:
    """One line per evaluator that would call a model: what it would send, and its cost."""
    for name, config in experiments:
        samples = list(Pipeline(config).load_dataset())
        label = f"{name} " if name else ""
        for i, evaluator in enumerate(config.evaluators):
            estimate = evaluator.dry_run(samples)
            if estimate is not None:
                print(f"{label}evaluators[{i}] ({evaluator.type}): {json.dumps(asdict(estimate))}")
    return 0
