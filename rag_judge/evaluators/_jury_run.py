"""Running a jury: every juror has its own client, engine (its limits, one shared cache file:
the cache key holds provider and model) and scoring mode, so its own requests; a chunk's
requests of every juror go out concurrently in one event loop
(``ask_panel_chunks_sync``). Each juror's verdicts become a result as a single judge's do
(``fill``), and the jurors' results are combined per sample and rubric (``jury_verdict``).
A sample's missing input is the same for every juror and is reported once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from rag_judge.data.sample import Sample
from rag_judge.evaluators._judge_results import (
    Job,
    empty_result,
    fill,
    record,
    skipped_inputs,
)
from rag_judge.evaluators._judge_used import Used
from rag_judge.evaluators._judging import open_cache
from rag_judge.evaluators._jury import (
    Aggregation,
    FailurePolicy,
    juror_names,
    jury_signatures,
    jury_verdict,
)
from rag_judge.evaluators.base import DryRun, EvaluatorResult
from rag_judge.judge.asking import Outcome, ask_panel_chunks_sync
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.verdicts import VERDICT_SHAPE, Reading, Scoring, Unscored, read_completion
from rag_judge.llm import ClientConfig, LLMClient, make_client, make_engine
from rag_judge.llm.base import Completion, CompletionRequest
from rag_judge.llm.providers import check_capabilities, no_calls
from rag_judge.report.model import Signature

__all__ = ["Jurors", "Panel", "jury_dry_run", "run_jury"]


class Panel(Protocol):
    """What running a jury reads from its judge evaluator."""

    @property
    def judges(self) -> tuple[ClientConfig, ...]: ...
    @property
    def aggregation(self) -> Aggregation: ...
    @property
    def on_judge_failure(self) -> FailurePolicy: ...
    @property
    def jury_quorum(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def reask(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...

    def jobs(
        self, samples: Sequence[Sample], scoring: Scoring, result: EvaluatorResult
    ) -> list[Job]: ...
    def scoring(self, client: LLMClient) -> Scoring: ...
    def signatures(self, client: LLMClient) -> dict[str, Signature]: ...
    def resolved_rubrics(self) -> list[Rubric]: ...
    def cache_path(self) -> Path | None: ...
    def prepare(self) -> None: ...


@dataclass
class Jurors:
    """A jury's clients with their names, scoring modes and single-judge signatures."""

    clients: list[LLMClient]
    names: list[str]
    scorings: list[Scoring]
    signatures: list[dict[str, Signature]]

    @classmethod
    def of(cls, panel: Panel, client: LLMClient | Sequence[LLMClient] | None) -> Jurors:
        """The configured judges' clients, or ``client``: one per judge, in order (each juror
        keeps its configured limits)."""
        if client is None:
            clients = [make_client(c) for c in panel.judges]
        elif isinstance(client, Sequence) and len(client) == len(panel.judges):
            clients = [check_capabilities(c) for c in client]
        else:
            given = f"{len(client)} clients" if isinstance(client, Sequence) else "one client"
            raise ValueError(
                f"a jury of {len(panel.judges)} judges takes one client per judge, in order; "
                f"got {given}"
            )
        return cls(
            clients,
            juror_names(clients),
            [panel.scoring(c) for c in clients],
            [panel.signatures(c) for c in clients],
        )

    def jury(
        self, panel: Panel, signatures: Sequence[dict[str, Signature]] | None = None
    ) -> dict[str, Signature]:
        """The jury's signatures from the jurors' (default: as planned, before a run)."""
        return jury_signatures(
            signatures or self.signatures,
            self.names,
            panel.aggregation,
            panel.jury_quorum,
            panel.on_judge_failure,
        )


def _plan(
    panel: Panel, samples: Sequence[Sample], scorings: Sequence[Scoring], base: EvaluatorResult
) -> dict[Scoring, list[Job]]:
    """The jobs of each scoring mode the jurors use (prompts rendered once per mode); the
    samples' input failures go to ``base`` once."""
    jobs: dict[Scoring, list[Job]] = {}
    for scoring in scorings:
        if scoring not in jobs:
            into = EvaluatorResult.empty(len(samples), base.signatures) if jobs else base
            jobs[scoring] = panel.jobs(samples, scoring, into)
    return jobs


def _combine(
    panel: Panel, base: EvaluatorResult, parts: Sequence[EvaluatorResult], names: Sequence[str]
) -> None:
    """Each sample's jury judgment and score into ``base``, from the jurors' ``parts``."""
    rubrics = panel.resolved_rubrics()
    for i in range(len(base.judgments)):
        for rubric in rubrics:
            name = rubric.name
            if name in base.errors[i] or name not in parts[0].judgments[i]:
                continue  # an input failure, the same for every juror: recorded once
            verdicts = [
                p.judgments[i][name].model_copy(update={"judge": who})
                for p, who in zip(parts, names, strict=True)
            ]
            failures = [p.errors[i].get(name) for p in parts]
            entry, failure = jury_verdict(
                verdicts,
                failures,
                panel.aggregation,
                panel.jury_quorum,
                panel.on_judge_failure,
            )
            record(base, i, rubric, entry, failure)  # a failure whenever it has no score


def run_jury(
    panel: Panel,
    chunks: Iterable[Sequence[Sample]],
    emit: Callable[[EvaluatorResult], None],
    client: LLMClient | Sequence[LLMClient] | None = None,
) -> EvaluatorResult:
    """``JudgeEvaluator.evaluate_chunks`` for a jury: each chunk's jury result is emitted when
    every juror's verdicts are in; the tail holds the summed usage and the final signatures
    (each juror's ``scoring`` as its run used it)."""
    panel.prepare()
    jurors = Jurors.of(panel, client)
    signatures = jurors.jury(panel)
    used = [Used(panel.resolved_rubrics(), s, panel.n) for s in jurors.scorings]
    current: list[tuple[EvaluatorResult, dict[Scoring, list[Job]]]] = []

    def requests() -> Iterator[list[list[CompletionRequest]]]:
        for samples in chunks:
            base = empty_result(len(samples), signatures)
            jobs = _plan(panel, samples, jurors.scorings, base)
            current[:] = [(base, jobs)]
            yield [[j.request for j in jobs[s]] for s in jurors.scorings]

    def each(outcomes: list[list[Outcome[Reading]]]) -> None:
        base, jobs = current[0]
        parts = []
        for k, scoring in enumerate(jurors.scorings):
            part = empty_result(len(base.errors), jurors.signatures[k])
            fill(part, jobs[scoring], outcomes[k], scoring)
            used[k].add(part)
            parts.append(part)
        _combine(panel, base, parts, jurors.names)
        emit(base)

    def parse(scoring: Scoring) -> Callable[[Completion], Reading | Unscored]:
        return partial(read_completion, scoring=scoring, max_tokens=panel.max_tokens)

    tail = EvaluatorResult.empty(0, signatures)
    with open_cache(panel.cache_path()) as cache:
        tail.usage = ask_panel_chunks_sync(
            [
                partial(make_engine, config, cache=cache, client=c)
                for config, c in zip(panel.judges, jurors.clients, strict=True)
            ],
            requests(),
            [parse(s) for s in jurors.scorings],
            each,
            shape=VERDICT_SHAPE,
            reask=panel.reask,
            labels=[f"judge {name}" for name in jurors.names],
        )
    final = [u.signatures(s) for u, s in zip(used, jurors.signatures, strict=True)]
    tail.signatures = jurors.jury(panel, final)
    return tail


def jury_dry_run(
    panel: Panel,
    samples: Sequence[Sample],
    client: LLMClient | Sequence[LLMClient] | None = None,
) -> DryRun:
    """What the jury would send, summed over its jurors, spending nothing (first requests
    only); a sample skipped for a missing input counts once. The cost is None unless every
    juror has prices. A missing API key does not stop it (``no_calls``), and it creates no
    cache file."""
    with no_calls():
        panel.prepare()
        jurors = Jurors.of(panel, client)
        base = empty_result(len(samples), jurors.signatures[0])
        jobs = _plan(panel, samples, jurors.scorings, base)
    keys = ("requests", "cache_hits", "prompt_tokens_estimate", "completion_tokens_max")
    totals = dict.fromkeys(keys, 0)
    costs: list[float | None] = []
    with open_cache(panel.cache_path(), dry=True) as cache:
        for config, c, scoring in zip(panel.judges, jurors.clients, jurors.scorings, strict=True):
            with make_engine(config, cache=cache, client=c) as engine:
                estimate = engine.dry_run([j.request for j in jobs[scoring]])
            for key in totals:
                totals[key] += int(estimate[key])
            costs.append(estimate["cost_estimate"])
    return DryRun(
        prompts=sum(len(jobs[s]) for s in jurors.scorings),
        skipped=skipped_inputs(base),
        cost_estimate=None if None in costs else sum(c for c in costs if c is not None),
        **totals,
    )
