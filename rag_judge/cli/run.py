"""``rag-judge run CONFIG``: every experiment of a config, its reports, gates and comparison."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_judge.analysis import compare
from rag_judge.analysis.gates import check_gates
from rag_judge.cli.gate import add_fail_under, thresholds_from_cli
from rag_judge.config import ExperimentConfig, folder_name, load_experiments
from rag_judge.evaluators.judge import JudgeEvaluator
from rag_judge.pipeline import Pipeline
from rag_judge.resources import resolve_config

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run_ = subparsers.add_parser("run", help="run an experiment config and write its report")
    run_.add_argument("config", help="YAML experiment config (e.g. configs/demo.yaml)")
    run_.add_argument("--dataset", type=Path, help="dataset file, overriding the config's")
    run_.add_argument("--out", type=Path, help="output folder (default: config output_dir)")
    run_.add_argument(
        "--dry-run", action="store_true",
        help="render every judge prompt and estimate tokens and cost; call nothing",
    )  # fmt: skip
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
    folders = []
    for name, config in experiments:
        out = base_out / folder_name(name) if name else base_out
        pipeline = Pipeline(config)
        samples = list(pipeline.load_dataset())
        report = pipeline.run(samples)
        paths = report.write(out, samples)
        folders.append(out)
        print(f"\n## {name}\n" if name else "", end="")
        print(report.summary_table())
        print(f"\nwrote {', '.join(str(p) for p in paths.values())}")
        gates = {**config.gates, **extra_gates}
        if gates:
            verdict = check_gates(report, gates)
            print(verdict.render())
            failed |= not verdict.passed
    if len(folders) > 1:
        # Every variant against the first, paired by sample id.
        result = compare.compare_runs(folders[0], folders[1:])
        (base_out / "comparison.json").write_text(json.dumps(result, indent=2) + "\n")
        markdown = compare.render_markdown(result)
        (base_out / "comparison.md").write_text(markdown)
        print("\n" + markdown)
    return 1 if failed else 0


def _dry_run(experiments: list[tuple[str, ExperimentConfig]]) -> int:
    for name, config in experiments:
        samples = list(Pipeline(config).load_dataset())
        for i, evaluator in enumerate(config.evaluators):
            if isinstance(evaluator, JudgeEvaluator):
                estimate = evaluator.dry_run(samples)
                label = f"{name} " if name else ""
                print(f"{label}evaluators[{i}] ({evaluator.type}): " + json.dumps(estimate))
    return 0
