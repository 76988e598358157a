"""``rag-judge run --sequential``: judge seeded random chunks until every gate is decided.

The samples are shuffled once with the run's seed and evaluated a chunk at a time (the
existing Pipeline, over the chunk's samples). After each chunk every gate's anytime-valid
confidence sequence (:mod:`rag_judge.stats.sequential`) is updated from the values so far; the
run stops when every gate is decided. The report is then one run over the samples judged, in
the dataset's order: the judge cache answers every request already made, so nothing is asked
twice. A gate still undecided when every sample is judged gets the full data's verdict, flagged
as undecided by the sequence. A killed run resumes from the judge cache: the same seed gives the
same chunks, and each request already judged is a cache hit.

A shuffled iid sample is an iid sample, so each prefix is a sample of the population the
dataset came from: the sequence covers that population's mean, for every prefix at once.
"""

from __future__ import annotations

import contextlib
import logging
import math
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_judge.analysis.gates import DROP_SLACK, GateCheck, GateResult
from rag_judge.config import ExperimentConfig
from rag_judge.config._walk import replaced
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.judge.settings import Judge
from rag_judge.llm.providers import ClientConfig
from rag_judge.pipeline import Pipeline, RunResult
from rag_judge.report.model import Direction, MetricInfo, Report, Usage
from rag_judge.report.thresholds import meets, parse_threshold
from rag_judge.stats.sequential import Decision, confidence_sequence, decide

__all__ = ["SequentialGate", "SequentialRun", "run_sequential"]

DEFAULT_FRACTION = 0.05  # a chunk is 5% of the samples unless told


@dataclass(frozen=True)
class _Spec:
    """A gate in the sequence's terms: mean(values) OP bound, values on [lo, hi]."""

    name: str
    metric: str
    op: str
    bound: float
    lo: float
    hi: float
    sign: int = 0  # 0: a threshold on the metric; +-1: a paired drop, new - base times sign


@dataclass(frozen=True)
class SequentialGate:
    """One gate after the run: its sequence's bounds over ``n`` values and its decision;
    ``final`` is the full data's verdict, set only when the sequence left it undecided."""

    name: str
    op: str
    bound: float
    n: int
    lower: float
    upper: float
    decision: Decision
    final: bool | None = None

    @property
    def passed(self) -> bool:
        return self.decision == "pass" if self.final is None else self.final

    def line(self) -> str:
        where = f"[{self.lower:.4f}, {self.upper:.4f}] after {self.n} values"
        if self.final is None:
            return f"{self.decision.upper()} {self.name} {self.op} {self.bound:g}: sequence {where}"
        verdict = "PASS" if self.final else "FAIL"
        return (
            f"{verdict} {self.name} {self.op} {self.bound:g}: UNDECIDED by the sequence {where}; "
            "the verdict is the full data's"
        )


@dataclass(frozen=True)
class SequentialRun:
    """The run's report (over the samples judged), what was judged, and each gate."""

    result: RunResult
    judged: int
    total: int
    gates: list[SequentialGate]
    calls_saved: int
    looks: list[int]
    calls_made: int = 0  # model requests the chunks sent (cache hits not counted)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def decided(self) -> bool:
        return all(g.final is None for g in self.gates)

    def render(self) -> str:
        head = "decided" if self.decided else "not decided"
        lines = [
            f"sequential: {head} after {self.judged}/{self.total} samples, "
            f"{self.calls_saved} calls saved"
        ]
        return "\n".join([*lines, *(g.line() for g in self.gates)])

    def gate_result(self) -> GateResult:
        """The gates as ``check_gates`` reports them (for --junit and the exit status)."""
        return GateResult([
            GateCheck(g.name, (g.lower + g.upper) / 2, g.bound, g.line(), g.op, g.passed)
            for g in self.gates
        ])  # fmt: skip


def run_sequential(
    config: ExperimentConfig,
    *,
    dataset: Sequence[Sample] | None = None,
    chunk: int | None = None,
    alpha: float = 0.05,
    seed: int | None = None,
    extra_gates: Mapping[str, str | float] | None = None,
    baseline: Report | None = None,
    max_drop: float = 0.0,
    metrics: Sequence[str] | None = None,
) -> SequentialRun:
    """Evaluate ``config`` in seeded random chunks of ``chunk`` samples (default 5%) until
    every gate is decided at level ``alpha``. The gates are the config's and ``extra_gates``
    (each ``metric: "OP bound"`` on a bounded per-sample mean), and with a ``baseline`` a
    paired drop gate per metric of ``metrics`` (default: the gated metrics): mean(new - base)
    >= -max_drop, in the metric's direction."""
    _no_batch(config)
    with tempfile.TemporaryDirectory(prefix="rag-judge-sequential-") as folder:
        return _sequential(
            _cached(config, Path(folder)), dataset, chunk, alpha, seed, extra_gates, baseline,
            max_drop, metrics,
        )  # fmt: skip


def _sequential(
    config: ExperimentConfig,
    dataset: Sequence[Sample] | None,
    chunk: int | None,
    alpha: float,
    seed: int | None,
    extra_gates: Mapping[str, str | float] | None,
    baseline: Report | None,
    max_drop: float,
    metrics: Sequence[str] | None,
) -> SequentialRun:
    pipe = Pipeline(config)
    samples = list(pipe.load_dataset() if dataset is None else dataset)
    total = len(samples)
    if total == 0:
        raise ConfigError("--sequential: the dataset has no samples")
    size = chunk or max(1, math.ceil(DEFAULT_FRACTION * total))
    if size < 1:
        raise ConfigError(f"--chunk must be at least 1, got {size}")
    specs = _specs(pipe.metric_infos(), {**config.gates, **(extra_gates or {})},
                   baseline, max_drop, metrics)  # fmt: skip
    order = np.random.default_rng(config.seed if seed is None else seed).permutation(total)
    values: dict[str, list[float]] = {s.name: [] for s in specs}
    base_columns = {s.metric: baseline.column(s.metric) for s in specs if s.sign and baseline}
    looks: list[int] = []
    gates: list[SequentialGate] = []
    judged = made = 0
    spent = Usage()  # what the chunks cost: the final report's run is all cache hits
    by_step: dict[str, Usage] = {}
    while judged < total:
        part = [samples[int(i)] for i in order[judged : judged + size]]
        with _quiet():  # a chunk's warnings (labels not in it, few samples) are not the run's
            report = pipe.run(part).report
        made += report.usage.requests
        spent += report.usage
        for step, used in report.usage_by_evaluator.items():
            by_step[step] = by_step.get(step, Usage()) + used
        _check_means(report, specs)
        judged += len(part)
        looks.append(judged)
        for spec in specs:
            values[spec.name] += _values(report, spec, base_columns.get(spec.metric))
        gates = [_state(spec, values[spec.name], alpha) for spec in specs]
        if all(g.decision != "undecided" for g in gates):
            break
    kept = sorted(int(i) for i in order[:judged])  # the report keeps the dataset's order
    result = pipe.run([samples[i] for i in kept])
    if judged == total:  # undecided gates get the full data's verdict, flagged
        gates = [_final(g, s, values[s.name]) for g, s in zip(gates, specs, strict=True)]
    usage = result.report.usage
    saved = round((usage.requests + usage.cache_hits) / judged * (total - judged))
    made += result.report.usage.requests  # none: every judge has a cache for the run
    # The report says what the run spent: the chunks' calls, not the final run's cache hits.
    result.report.usage = spent
    if by_step:
        result.report.usage_by_evaluator = by_step
    return SequentialRun(result, judged, total, gates, saved, looks, made)


def _cached(config: ExperimentConfig, folder: Path) -> ExperimentConfig:
    """``config`` with a cache in ``folder`` for every judge that keeps none, so that the
    final report's run asks nothing the chunks asked (one request per sample judged)."""

    def cache(value: Any) -> Any:
        if isinstance(value, Judge) and value.cache is None:
            return value.model_copy(update={"cache": folder / "judge.sqlite"})
        return value

    found: ExperimentConfig = replaced(config, cache)
    return found


def _no_batch(config: ExperimentConfig) -> None:
    """The Batch API answers a chunk only when its whole batch is done: a sequential run
    would wait on one batch per chunk, one after another."""
    clients: list[ClientConfig] = []

    def seen(value: Any) -> Any:
        if isinstance(value, ClientConfig) and value.batch:
            clients.append(value)
        return value

    replaced(config, seen)
    if clients:
        raise ConfigError(
            "--sequential: a client has batch: true; the Batch API answers a chunk only when "
            "its batch is done, so judge sequentially without it (or run the batch in full)"
        )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    log = logging.getLogger("rag_judge")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _specs(
    infos: Mapping[str, MetricInfo],
    gates: Mapping[str, str | float],
    baseline: Report | None,
    max_drop: float,
    metrics: Sequence[str] | None,
) -> list[_Spec]:
    specs = []
    for name, expr in gates.items():
        op, bound = parse_threshold(expr, metric=name)
        lo, hi = _scale(infos, name, f"gate {name!r}")
        if op == "==":
            raise ConfigError(f"--sequential: gate {name!r}: '==' cannot be decided; use >=, <=")
        specs.append(_Spec(name, name, op, bound, lo, hi))
    if baseline is not None:
        if not (math.isfinite(max_drop) and max_drop >= 0):
            raise ConfigError(f"--max-drop must be a finite number >= 0, got {max_drop}")
        for metric in list(metrics or gates):
            lo, hi = _scale(infos, metric, f"--metric {metric!r}")
            sign = -1 if infos[metric].direction is Direction.LOWER else 1
            name = f"{metric} drop vs baseline"
            specs.append(_Spec(name, metric, ">=", -max_drop, lo - hi, hi - lo, sign))
    if not specs:
        raise ConfigError("--sequential needs a gate: config gates, --fail-under, or --baseline "
                          "with --metric")  # fmt: skip
    return specs


def _scale(infos: Mapping[str, MetricInfo], metric: str, what: str) -> tuple[float, float]:
    info = infos.get(metric)
    if info is None or "." in metric:
        raise ConfigError(
            f"--sequential: {what}: a sequential gate is on a per-sample metric's mean "
            "(not a bound, a rate, an estimate or a per-turn metric)"
        )
    lo, hi = info.scale
    if hi is None:
        raise ConfigError(f"--sequential: {what}: {metric} has no upper bound; the sequence "
                          "needs a bounded scale")  # fmt: skip
    return lo, hi


def _check_means(report: Report, specs: Sequence[_Spec]) -> None:
    for spec in specs:
        summary = report.summary.get(spec.metric)
        if summary is not None and summary.aggregate != "mean":
            raise ConfigError(f"--sequential: {spec.metric} is a {summary.aggregate}, not a "
                              "mean of per-sample values")  # fmt: skip


def _values(report: Report, spec: _Spec, base: Mapping[str, float | None] | None) -> list[float]:
    """The chunk's finite values of the gate, in the chunk's (shuffled) order."""
    out = []
    for sid, value in report.column(spec.metric).items():
        if value is None or not math.isfinite(value):
            continue
        if spec.sign:
            before = (base or {}).get(sid)
            if before is None or not math.isfinite(before):
                continue  # paired by id, as compare pairs them
            value = spec.sign * (value - before)
        out.append(min(max(value, spec.lo), spec.hi))
    return out


def _state(spec: _Spec, values: Sequence[float], alpha: float) -> SequentialGate:
    if not values:
        return SequentialGate(spec.name, spec.op, spec.bound, 0, spec.lo, spec.hi, "undecided")
    lower, upper = confidence_sequence(values, alpha, lo=spec.lo, hi=spec.hi)
    decision = decide(float(lower[-1]), float(upper[-1]), spec.op, spec.bound)
    return SequentialGate(spec.name, spec.op, spec.bound, len(values), float(lower[-1]),
                          float(upper[-1]), decision)  # fmt: skip


def _final(gate: SequentialGate, spec: _Spec, values: Sequence[float]) -> SequentialGate:
    if gate.decision != "undecided":
        return gate
    mean = float(np.mean(values)) if values else math.nan
    bound = spec.bound - DROP_SLACK if spec.sign else spec.bound  # the drop gate's slack
    final = math.isfinite(mean) and meets(mean, spec.op, bound)
    return SequentialGate(gate.name, gate.op, gate.bound, gate.n, gate.lower, gate.upper,
                          gate.decision, final)  # fmt: skip
