"""``rag-judge run CONFIG``: every experiment of a config, its reports, gates and comparison.

Before any work, every experiment is checked: its dataset exists and each evaluator is
prepared (rubric templates, models, a judge's API key in the environment); a problem is one
``file:line: key: message`` line and exit status 2. A run never overwrites a previous one: when
the output folder already holds a report (or a matrix comparison), the run goes to
``FOLDER-2`` (``-3``, ...) and says so; ``--overwrite`` reuses the folder.

After each experiment, failed values (errors, unscored verdicts, missing inputs) and failed
model calls are summarised on stderr with their first distinct reasons, and the run exits 3
when an evaluator failed beyond the config's ``max_error_rate`` (always when one produced no
value at all).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path

from rag_judge.analysis.compare import compare_all
from rag_judge.analysis.gates import GateResult, check_gates, unknown_gate
from rag_judge.analysis.junit import JUnitSuite, step_errors, write_junit
from rag_judge.analysis.retrieval_ppi import corrected_metrics, judge_graded

# The text a run prints (header, dry-run table, failure summary) lives apart, in _run_text.py,
# to keep this file under ~400 lines; importers keep importing it from here.
from rag_judge.cli._run_text import MAX_REASON_CHARS as MAX_REASON_CHARS
from rag_judge.cli._run_text import MAX_REASONS as MAX_REASONS
from rag_judge.cli._run_text import (
    dry_run_table,
    evaluator_failures,
    failure_summary,
    run_header,
    run_summary,
)
from rag_judge.cli._sequential import add_sequential, args_sequential, sequential_run
from rag_judge.cli.compare import render_markdown
from rag_judge.cli.gate import add_fail_under, add_junit, thresholds_from_cli
from rag_judge.cli.segments import add_group_by, group_by_overrides, segment_problem
from rag_judge.config import ExperimentConfig, folder_name, load_experiments, where
from rag_judge.errors import ConfigError
from rag_judge.llm.batch import batch_note
from rag_judge.llm.providers import no_calls
from rag_judge.pipeline import Pipeline
from rag_judge.pipeline.conclusions import check_labels
from rag_judge.pipeline.together import fixed_mmap_threshold
from rag_judge.report.format import text_table
from rag_judge.report.model import MetricKind, Report, WarningKind
from rag_judge.report.otel import export_run
from rag_judge.report.segments import segment_tables
from rag_judge.resources import resolve_config

__all__ = [
    "EXIT_EVALUATOR_FAILED",
    "EXIT_GATE_FAILED",
    "add_parser",
    "check_gate_names_of",
    "dry_run_table",
    "evaluator_failures",
    "failure_summary",
    "fresh_folder",
    "run",
    "run_header",
]

EXIT_GATE_FAILED = 1  # a gate (config ``gates`` or --fail-under) failed
EXIT_EVALUATOR_FAILED = 3  # an evaluator failed beyond max_error_rate, or produced no value

EXIT_CODES = """exit status:
  0  every experiment ran; its gates (if any) passed
  1  a gate failed (the config's gates or --fail-under)
  2  bad input: the config, the dataset, an option
  3  an evaluator failed: more than max_error_rate of its values failed (errors, unscored
     verdicts, missing inputs), or it produced no value at all (e.g. the judge server is
     down, base_url lacks /v1, the model name is wrong), or a Ray shard was lost (its
     worker died on every attempt; the report keeps the other shards'); takes precedence
     over 1
  130  interrupted (Ctrl-C): calls in flight cancelled, finished ones kept in the caches;
     rerunning the same command resumes

Failed values and model calls are summarised on stderr with their first distinct reasons;
every reason is in report.json (samples[].errors) and report.md."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run_ = subparsers.add_parser(
        "run",
        help="run an experiment config and write its report",
        description="Run every experiment of a config (one per matrix variant), write its "
        "reports, check its gates.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run_.add_argument("config", help="YAML experiment config (e.g. configs/demo.yaml)")
    run_.add_argument("--dataset", type=Path, help="dataset file, overriding the config's")
    run_.add_argument(
        "--out",
        type=Path,
        help="output folder (default: config output_dir, else runs/NAME); one that holds a "
        "previous run is kept: this run goes to FOLDER-2 (-3, ...) unless --overwrite",
    )
    run_.add_argument(
        "--overwrite",
        action="store_true",
        help="write into the output folder even when it holds a previous run",
    )
    run_.add_argument(
        "--dry-run",
        action="store_true",
        help="render every model prompt and print a table of requests, tokens and cost per "
        "evaluator; call nothing, write nothing",
    )
    run_.add_argument(
        "--max-error-rate", type=_rate, metavar="RATE",
        help="exit 3 when more than RATE (0-1) of any evaluator's values failed (default: "
        "the config's max_error_rate, 1.0 unless set: only when one produced no value at all)",
    )  # fmt: skip
    add_fail_under(run_)  # adds to the config's gates
    add_junit(run_)
    run_.add_argument(
        "--quiet", action="store_true",
        help="no progress on stderr (default: a live line on a terminal, else a line per step)",
    )  # fmt: skip
    run_.add_argument(
        "--executor", choices=["local", "ray"],
        help="where the evaluators run, overriding the config's executor: ray shards the "
        "samples over a Ray cluster (the config's ray.address, else $RAY_ADDRESS, else a "
        "local one); needs rag-judge[ray]",
    )  # fmt: skip
    add_group_by(run_, "overriding the config's group_by")
    add_sequential(run_)
    run_.set_defaults(handler=run)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1")
    return value


def run(args: argparse.Namespace) -> int:
    """Run each experiment (one, or one per matrix variant): 3 if an evaluator failed (beyond
    ``max_error_rate``), else 1 if a gate failed, else 0. Every experiment is checked first
    (dataset, evaluators' prepare): a problem is a ConfigError before any work."""
    fixed_mmap_threshold()  # a long pass's peak memory, not its numbers
    path = resolve_config(args.config)
    overrides: dict[str, object] = {"dataset": str(args.dataset)} if args.dataset else {}
    if getattr(args, "executor", None):
        overrides["executor"] = args.executor
    overrides |= group_by_overrides(args)  # validated with the config, named as the CLI's
    experiments = load_experiments(path, overrides or None)
    extra_gates = thresholds_from_cli(args.fail_under)
    for name, config in experiments:  # a misspelled gate stops the run before any (paid) work
        check_gate_names_of(path, name, config, extra_gates)
    if args.dry_run:
        return _dry_run(path, experiments, dataset_from_cli=args.dataset is not None)
    for name, config in experiments:
        check_experiment(path, name, config, dataset_from_cli=args.dataset is not None)
    first = experiments[0][1]
    wanted = args.out or first.output_dir or Path("runs") / first.name
    base_out = wanted if args.overwrite else fresh_folder(wanted)
    if base_out != wanted:
        print(f"{wanted} holds a previous run: writing to {base_out} (--overwrite reuses it)")
    failed = False
    broken = False  # an evaluator failed beyond max_error_rate
    reports: list[tuple[str, Report]] = []  # (its folder, the report), for the comparison
    suites: list[JUnitSuite] = []  # each experiment's gates, for --junit
    for name, config in experiments:
        out = base_out / folder_name(name) if name else base_out
        # Heading and header before the steps (flushed: progress goes to stderr), so the
        # progress reads under its variant and an interrupted run has said which judge it called.
        print(f"\n## {name}\n" if name else "", end="")
        print("\n".join(run_header(config)), flush=True)
        seq = sequential_run(args, config, extra_gates) if args_sequential(args) else None
        result = seq.result if seq else Pipeline(config).run()  # prepared again: cheap
        paths = result.write(out)
        reports.append((str(out), result.report))
        print(f"rag-judge: {len(result.report.samples)} samples evaluated")
        print(run_summary(result.report))
        for table in segment_tables(result.report.segments, result.report.confidence):
            print(f"\n{table.title}\n{text_table(table)}")
        print(f"\nwrote {', '.join(str(p) for p in paths.values())}")
        if (otel := config.otel) is not None:  # the values as OpenTelemetry events, out
            options = {"headers": otel.headers, **otel.model_dump()}  # (the dump has no headers)
            for status in export_run(result.report, out, **options):
                if status.ok:  # a failure is logged, and is a warning of the report
                    print(status.describe())
        gates = {**config.gates, **extra_gates}
        verdict = check_gates(result.report, gates) if gates else GateResult()
        if seq:  # the sequence's decisions are the gates' verdicts
            verdict = seq.gate_result()
            print(seq.render())
            failed |= not verdict.passed
        elif gates:
            print(verdict.render())
            failed |= not verdict.passed
        max_rate = config.max_error_rate if args.max_error_rate is None else args.max_error_rate
        over = evaluator_failures(result, max_rate)
        suites.append(JUnitSuite(name or config.name, verdict, step_errors(over, max_rate)))
        summary = failure_summary(result, over, max_rate)
        if summary:
            prefix = f"rag-judge: {name}: " if name else "rag-judge: "
            for line in summary.splitlines():
                print(line if line.startswith(" ") else prefix + line, file=sys.stderr)
        broken |= bool(over)
        # A Ray shard lost for good (its worker died on every attempt): its samples have no
        # values, whatever max_error_rate allows, so the run failed.
        for warning in result.report.warnings:
            if warning.kind is WarningKind.SHARD_LOST:
                print(f"rag-judge: {warning.metric}: {warning.message}", file=sys.stderr)
                broken = True
    if len(reports) > 1:
        # Every variant against the first, paired by sample id, on the reports just made.
        (base_label, base), *news = reports
        # Variants may differ by their judge: compared as they are, flagged (*).
        comparison = compare_all(base, news, base_label=base_label, allow_judge_change=True)
        (base_out / "comparison.json").write_text(json.dumps(comparison.to_dict(), indent=2) + "\n")
        markdown = render_markdown(comparison)
        (base_out / "comparison.md").write_text(markdown)
        print("\n" + markdown)
    if getattr(args, "junit", None) is not None:
        write_junit(args.junit, suites)
    if broken:
        return EXIT_EVALUATOR_FAILED
    return EXIT_GATE_FAILED if failed else 0


def check_experiment(
    path: Path, variant: str, config: ExperimentConfig, *, dataset_from_cli: bool = False
) -> None:
    """What can be known wrong before any work, as a ConfigError naming the config file and
    line (or the option): a dataset that does not exist, an evaluator that cannot be prepared
    (a template that does not parse, a judge's API key missing from the environment)."""
    suffix = f" (variant {variant})" if variant else ""
    dataset = config.dataset
    if dataset is not None and (dataset.is_dir() or not dataset.exists()):
        what = "is a folder, not a dataset file" if dataset.is_dir() else "file not found"
        found = f"{what}: {dataset.resolve()}"
        if dataset_from_cli:
            raise ConfigError(f"--dataset: {found}")
        raise ConfigError(f"{where(path, ('dataset',))}: dataset: {found}{suffix}")
    try:
        check_labels(config)  # the run reads them before any sample is scored; say where now
        Pipeline(config).prepare()
    except ConfigError as exc:
        if not exc.loc:
            raise ConfigError(f"{path}: {exc}{suffix}") from None
        raise ConfigError(f"{where(path, exc.loc)}: {exc}{suffix}", loc=exc.loc) from None


def check_gate_names_of(
    path: Path, variant: str, config: ExperimentConfig, extra: Mapping[str, object]
) -> None:
    """A ConfigError, naming the config's line (or ``--fail-under``) and the closest names,
    for a gate that names nothing a run of ``config`` will report."""
    try:
        infos = Pipeline(config).metric_infos()
    except ConfigError:  # a rubric file that cannot be read: check_experiment names its line
        return
    judge = [m for m, i in infos.items() if i.kind is MetricKind.JUDGE and i.normalises is None]
    if config.labels is not None:  # retrieval metrics from judge grades are corrected too
        judge += [m for ev in judge_graded(config.evaluators) for m in corrected_metrics(ev)]
    suffix = f" (variant {variant})" if variant else ""
    for gate in [*config.gates, *extra]:
        problem = unknown_gate(gate, infos, judge=judge) or segment_problem(gate, config)
        if problem is None:
            continue
        if gate in extra:  # the command line's --fail-under wins over the config's gate
            raise ConfigError(f"--fail-under {gate!r}: {problem}{suffix}")
        raise ConfigError(f"{where(path, ('gates', gate))}: gates.{gate}: {problem}{suffix}")


def fresh_folder(folder: Path) -> Path:
    """``folder``, or when it holds a previous run (a report.json, or a matrix run's
    comparison.json) the first of ``folder-2``, ``folder-3``, ... that does not."""
    candidate, n = folder, 1
    while (candidate / "report.json").exists() or (candidate / "comparison.json").exists():
        n += 1
        candidate = folder.with_name(f"{folder.name}-{n}")
    return candidate


def _dry_run(
    path: Path, experiments: list[tuple[str, ExperimentConfig]], *, dataset_from_cli: bool
) -> int:
    """A table per experiment of what each evaluator that calls a model would send, and its
    cost; nothing is called or written (no cache file is created). Checked as a run is, except
    that a missing API key is a note on stderr, not an error: a dry run spends nothing."""
    with no_calls() as unchecked:
        for name, config in experiments:
            check_experiment(path, name, config, dataset_from_cli=dataset_from_cli)
        _dry_run_tables(experiments)
    for problem in unchecked:
        print(f"rag-judge: note: {problem}; a real run stops here", file=sys.stderr)
    return 0


def _dry_run_tables(experiments: list[tuple[str, ExperimentConfig]]) -> None:
    for name, config in experiments:
        samples = list(Pipeline(config).load_dataset())
        estimates = []
        for i, evaluator in enumerate(config.evaluators):
            estimate = evaluator.dry_run(samples)
            if estimate is not None:
                estimates.append((f"evaluators[{i}] ({evaluator.type})", estimate))
        print(f"\n## {name}\n" if name else "", end="")
        print(dry_run_table(estimates))
        if estimates and (note := batch_note(config)):
            print(note)
