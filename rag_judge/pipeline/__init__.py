"""Pipeline: run the configured evaluators over a dataset and gather one Report."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, overload

from rag_judge import _progress as progress_
from rag_judge._version import __version__
from rag_judge.analysis.segments import summarize_segments
from rag_judge.config import (
    ExperimentConfig,
    check_metric_names,
    check_threshold_names,
    load_config,
)
from rag_judge.data.readers import load_dataset
from rag_judge.data.rows import RowFile, RowWriter
from rag_judge.data.sample import Dataset, Sample
from rag_judge.data.stream import InMemory, SampleRows, SampleSource, open_source, parse_sample
from rag_judge.data.target import resolve_target
from rag_judge.errors import ConfigError, format_loc
from rag_judge.evaluators.base import Evaluator, EvaluatorResult, EvaluatorRun
from rag_judge.pipeline import _ray
from rag_judge.pipeline.collect import Collected, Joined, Step, priced_steps
from rag_judge.pipeline.conclusions import conclude, read_labels
from rag_judge.pipeline.conditioned import add_conditioned, conditioned_infos
from rag_judge.pipeline.converse import Driver
from rag_judge.pipeline.hops import unit_thresholds
from rag_judge.pipeline.judged_relevance import feed_judgments
from rag_judge.pipeline.passes import share_pass
from rag_judge.pipeline.per_unit import (
    UnitStep,
    check_per_unit,
    run_per_unit,
    unit_infos,
    with_units,
)
from rag_judge.pipeline.running import stream
from rag_judge.pipeline.side_join import index_file
from rag_judge.pipeline.summary import summarize, summarize_run
from rag_judge.report import write_report
from rag_judge.report.model import (
    SAMPLES_FILE,
    Direction,
    Failure,
    MetricInfo,
    MetricKind,
    Report,
    SampleFile,
    SampleResult,
    Signature,
)

__all__ = ["Pipeline", "RunResult", "summarize"]

log = logging.getLogger("rag_judge")

LATENCY = MetricInfo(kind=MetricKind.LATENCY, scale=(0.0, None), direction=Direction.LOWER)


@dataclass(frozen=True)
class RunResult:
    """What a run produced: the report, and each sample as it was evaluated (with a target,
    the target's answers and contexts). ``report.samples[i].sample`` is ``samples[i]``."""

    report: Report
    samples: Sequence[Sample]  # a list; read from the report's file when its samples are in one
    # Each step of the run and the metrics it produced: "target" -> ["latency_s"] when there
    # is a target, then "evaluators[i] (type)" -> that evaluator's metric_names().
    steps: dict[str, list[str]] = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """report.json, report.md and report.html into ``out_dir``; returns the paths."""
        return write_report(self.report, out_dir)

    def failure_counts(self) -> dict[str, tuple[int, int]]:
        """(failed values, all values) of each step, over its metrics in the summary; a
        failure of any kind counts (error, unscored verdict, missing input). A judge rubric's
        normalised twin repeats its verdicts, so it is not counted again."""
        out = {}
        for step, metrics in self.steps.items():
            found = [self.report.summary[m] for m in metrics if m in self.report.summary]
            own = [s for s in found if s.normalises is None]
            out[step] = (sum(s.errors for s in own), sum(s.n + s.errors for s in own))
        return out


class Pipeline:
    """Runs evaluators over samples. Build it from a config, a YAML file, or a list of evaluators.

    >>> from rag_judge import Pipeline, RetrievalEvaluator
    >>> pipe = Pipeline([RetrievalEvaluator(metrics=["ndcg@10", "mrr"])])
    """

    def __init__(self, config: ExperimentConfig | Sequence[Evaluator]) -> None:
        if not isinstance(config, ExperimentConfig):
            config = ExperimentConfig(evaluators=list(config))
        self.config = config

    @classmethod
    def from_yaml(cls, path: str | Path) -> Pipeline:
        return cls(load_config(path))

    @property
    def evaluators(self) -> list[Evaluator]:
        return list(self.config.evaluators)

    def load_dataset(self) -> Dataset:
        cfg = self.config
        return load_dataset(self._dataset(), format=cfg.dataset_format, layout=cfg.dataset_layout)

    def _dataset(self) -> Path:
        if self.config.dataset is None:
            raise ConfigError("no dataset: set 'dataset' in the config or pass one to run()")
        return self.config.dataset

    def prepare(self) -> list[EvaluatorRun]:
        """Load what every evaluator needs (models, rubric files, baselines) once; a problem
        is a ConfigError naming the evaluator, raised before any sample is scored. Where the
        evaluator names the option at fault (a missing API key: ``client.api_key_env``), the
        message starts with its config path, ``evaluators[3].client.api_key_env: ...``, and the
        error's ``loc`` is that path (for a caller that knows the YAML file's lines); else
        its ``loc`` is the evaluator's, ``("evaluators", 3)``. Then the metric names are
        checked (``check_metric_names``): two evaluators may not report one metric. Returns
        each evaluator's run, in order."""
        runs = []
        for i, evaluator in enumerate(self.config.evaluators):
            check_per_unit(evaluator, i, self.config.evaluators)
            try:
                runs.append(evaluator.prepare())
            except ConfigError as exc:
                if exc.loc:
                    loc = ("evaluators", i, *exc.loc)
                    message = str(exc).removeprefix(f"{format_loc(exc.loc)}: ")
                    raise ConfigError(f"{format_loc(loc)}: {message}", loc=loc) from None
                message = f"evaluators[{i}] ({evaluator.type}): {exc}"
                raise ConfigError(message, loc=("evaluators", i)) from None
        check_metric_names(self.config.evaluators)  # names known now: rubric files are read
        check_threshold_names(self.config.thresholds, self.config.evaluators)
        return runs

    def metric_infos(self) -> dict[str, MetricInfo]:
        """Every metric a run of this config reports, with its kind, scale and direction,
        known before any work: the target's ``latency_s``, each evaluator's metrics, and the
        ``<rubric>_answered`` metrics of a grounding evaluator's ``conditioned``."""
        cfg = self.config
        infos = {"latency_s": LATENCY} if cfg.target is not None else {}
        for evaluator in cfg.evaluators:
            infos |= unit_infos(evaluator, evaluator.metric_names())
        infos |= conditioned_infos(cfg.evaluators)
        return infos

    def run(
        self,
        dataset: Dataset | Sequence[Sample] | None = None,
        *,
        progress: progress_.Mode | Literal["bar", "lines", "off"] | None = None,
    ) -> RunResult:
        """Evaluate every sample with every evaluator. Per-sample failures are recorded in the
        report, never raised; an evaluator that crashes outright fails only its own metrics.

        Each evaluator goes through the samples ``chunk_size`` at a time (a JSON Lines dataset
        is read as it goes: once for the evaluators that share a pass, ``pipeline.together``);
        only score columns stay in memory, and past ``inline_samples`` samples the report's
        samples live in a file (``samples.jsonl``).

        ``progress``: ``"bar"`` (a live line on stderr, rewritten in place), ``"lines"`` (one
        line per finished step) or ``"off"``; None (the default) uses the active display,
        which is off unless a caller (the CLI) turned one on."""
        if progress is not None:
            with progress_.showing(progress_.Display(progress_.Mode(progress))):
                return self.run(dataset)
        cfg = self.config
        progress_.current().start_run(cfg.name)
        runs = self.prepare()
        labels = read_labels(cfg)  # a bad label file stops the run before any sample is scored
        source = self._source(dataset)
        folder = Path(tempfile.mkdtemp(prefix="rag-judge-run-"))
        collected = Collected(folder)
        report: Report | None = None
        steps: dict[str, list[str]] = {}
        units: dict[int, UnitStep] = {}  # the per-unit evaluators' steps, by evaluator index
        try:
            if cfg.target is not None:
                with progress_.step("target"):
                    target = collected.step({"latency_s": LATENCY}, "target")
                    source = self._call_target(source, target)
                steps["target"] = ["latency_s"]
            evaluators = cfg.evaluators
            # With executor: ray, every shard of every shardable evaluator is submitted now and
            # gathered in its step; the others run here, in order, meanwhile.
            pending = _ray.submit(cfg, source) if cfg.executor == "ray" else {}
            # Steps in config order (the report's); evaluators that read another's judgments
            # (relevance_from) run after the rest.
            # A per-unit evaluator's step is over the units, so it is kept apart from the
            # steps joined with the samples (its ``made[i]`` is None).
            made: list[Step | None] = []
            for i, run in enumerate(runs):
                info = {m: run.evaluator.metric_info(m) for m in run.metric_names()}
                per_sample = run.evaluator.per == "conversation"
                label = f"evaluators[{i}] ({run.evaluator.type})"
                made.append(collected.step(info, label) if per_sample else None)
                steps[label] = list(info if per_sample else unit_infos(run.evaluator, info))
            order = sorted(range(len(evaluators)), key=lambda i: bool(evaluators[i].reads()))
            # Without a target or a step added after the pass, a side process may write
            # samples.jsonl as the samples pass (``side_join``), so the end need not join.
            later = cfg.target is not None or bool(conditioned_infos(evaluators))
            path = None if later else folder / SAMPLES_FILE
            done, joined = share_pass(
                cfg.processes, cfg.chunk_size, runs, made, pending, order, source, path
            )
            for i in (i for i in order if i not in done):
                run, step = runs[i], made[i]
                with progress_.step(f"evaluators[{i}] ({run.evaluator.type})"):
                    if step is None:
                        spool = RowWriter(folder / f"units{i}.jsonl", offsets=False)
                        units[i] = run_per_unit(run, source.chunks(cfg.chunk_size), spool)
                        units[i].step.name = f"evaluators[{i}] ({run.evaluator.type})"
                    elif i in pending:
                        step.add(pending[i].gather())
                    else:
                        fed = feed_judgments(run, collected.steps)
                        stream(fed, source.chunks(cfg.chunk_size), step)
            added = add_conditioned(cfg, collected, cfg.chunk_size)
            if added:
                steps["conditioned on answering"] = added
            ordered = [units[i] for i in sorted(units)]  # config order
            if joined is not None and (added or ordered):  # pragma: no cover - none is written
                joined.path.unlink()  # for such a run: share_pass is not given the path
                joined = None
            report = conclude(self._report(collected, source, ordered, joined), cfg, labels)
            # Ray shards that ran again or were lost (logged when it happened): said in the report
            report.warnings = [*report.warnings, *(w for s in pending.values() for w in s.warnings)]
        finally:
            for s in [*collected.steps, *(u.step for u in units.values())]:
                s.spool.close()
                s.spool.path.unlink(missing_ok=True)
            if report is None or not isinstance(report.samples, SampleFile):
                # a samples file a side process wrote (or gave up) for a run that failed or
                # keeps its samples inline
                (folder / SAMPLES_FILE).unlink(missing_ok=True)
            index_file(folder / SAMPLES_FILE).unlink(missing_ok=True)  # a run that stopped first
            _remove_if_empty(folder)
        return RunResult(report, _evaluated(report.samples), steps)

    def _source(self, dataset: Dataset | Sequence[Sample] | None) -> SampleSource:
        if dataset is not None:
            return InMemory(dataset.samples if isinstance(dataset, Dataset) else dataset)
        cfg = self.config
        # executor: ray reads a streamed source whole, to cut it into shards (``_ray.submit``)
        return open_source(self._dataset(), format=cfg.dataset_format, layout=cfg.dataset_layout)

    def _report(
        self,
        collected: Collected,
        source: SampleSource,
        units: Sequence[UnitStep] = (),
        joined: Joined | None = None,
    ) -> Report:
        cfg = self.config
        boot = cfg.bootstrap
        run = {"ci": f"bootstrap-{boot.resamples}@{boot.confidence:g}", "seed": cfg.seed}
        signatures, summary, usage = summarize_run(
            collected.steps, units, resamples=boot.resamples, confidence=boot.confidence,
            seed=cfg.seed, run=run,
        )  # fmt: skip
        n = collected.steps[0].n if collected.steps else max((u.samples for u in units), default=0)
        thresholds = unit_thresholds(cfg.thresholds, cfg.gates)
        results = with_units(collected.results(source, cfg.chunk_size), units, thresholds)
        samples: SampleFile | list[SampleResult]
        if joined is not None and n > cfg.inline_samples:
            samples = collected.joined(joined)
        else:
            if joined is not None:  # a file this short is kept in the report itself
                joined.path.unlink(missing_ok=True)
            if n > cfg.inline_samples:
                samples = collected.to_file(results, collected.folder / SAMPLES_FILE)
            else:
                samples = list(results)
        report = Report(
            summary=summary,
            confidence=boot.confidence,
            samples=samples,
            signatures=signatures,
            usage=usage,
            usage_by_evaluator=priced_steps([*collected.steps, *(u.step for u in units)]),
            config=cfg.model_dump(mode="json"),
        )
        if cfg.group_by:  # per segment: n, mean and CI of every per-sample metric
            report.segments = summarize_segments(
                report, cfg.group_by, min_n=cfg.min_segment_n, resamples=boot.resamples,
                confidence=boot.confidence, seed=cfg.seed,
            )  # fmt: skip
        return report

    def _call_target(self, source: SampleSource, step: Step) -> SampleSource:
        """Answer every question with the configured target, a chunk at a time; its latency is
        the metric ``latency_s`` and a failed call is recorded under ``errors["target"]``. The
        samples as answered are kept in a file of the run's and read back by each evaluator."""
        cfg = self.config
        if cfg.target is None:  # pragma: no cover - the caller checks
            raise ConfigError("no target configured")
        target = resolve_target(cfg.target)  # a bad spec fails here, before any call
        # With conversation:, the target is driven a turn at a time (converse.py): the
        # signature then says how, and latency_s is each conversation's calls summed.
        with Driver(cfg.conversation, target) as driver:
            signature = Signature.of(
                "latency_s",
                target=cfg.target,
                concurrency=cfg.target_concurrency,
                timeout=f"{cfg.target_timeout:g}" if cfg.target_timeout else "none",
                **driver.options(),
                unit="s",
                version=__version__,
            )
            answered = RowWriter(step.spool.path.with_name("answered.jsonl"), spill=step.spill)
            for chunk in source.chunks(cfg.chunk_size):
                called = driver.run(
                    chunk, concurrency=cfg.target_concurrency, timeout=cfg.target_timeout
                )
                for sample in called.samples:
                    answered.write(sample.model_dump_json().encode())
                step.add(
                    EvaluatorResult(
                        scores={"latency_s": list(called.latency)},
                        errors=[{"target": Failure(message=e)} if e else {} for e in called.errors],
                        signatures={"latency_s": signature},
                    )
                )
            step.usage += (
                driver.usage()
            )  # the simulated user's calls: the target's own are not seen
        if not step.metrics:  # no samples: the column is there, empty
            step.add(EvaluatorResult.empty(0, {"latency_s": signature}))
        offsets = answered.close()
        return SampleRows(RowFile(answered.path, parse_sample, offsets, owned=True))


class _Evaluated(Sequence[Sample]):
    """The samples as evaluated, read from a report whose samples live in a file."""

    def __init__(self, results: Sequence[SampleResult]) -> None:
        self._results = results

    def __len__(self) -> int:
        return len(self._results)

    @overload
    def __getitem__(self, index: int) -> Sample: ...
    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...
    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        if isinstance(index, slice):
            return [_sample_of(r) for r in self._results[index]]
        return _sample_of(self._results[index])


def _sample_of(result: SampleResult) -> Sample:
    if result.sample is None:  # pragma: no cover - a run's results always hold their sample
        raise ValueError(f"sample {result.id!r}: the report does not hold the sample")
    return result.sample


def _evaluated(samples: Sequence[SampleResult]) -> Sequence[Sample]:
    if isinstance(samples, list):
        return [_sample_of(r) for r in samples]
    return _Evaluated(samples)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # it holds the report's samples.jsonl: goes with it
        folder.rmdir()
