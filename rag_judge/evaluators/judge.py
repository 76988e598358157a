"""Rubric LLM judging (``type: judge``): each sample scored 1–5 on each rubric, normalised
``(s-1)/4`` under ``<rubric>_norm``, or an explicit *unscored* result with its reason.

The judging itself (requests, re-asks, juries, what the server actually did) is
:mod:`rag_judge.judge.panel`; this module holds the config and turns verdicts into columns.
What a judgment records is catalogued in docs/judges.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import DryRun, Evaluator, EvaluatorRun, Final
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.judge import jury as jury_
from rag_judge.judge.judging import Verdict
from rag_judge.judge.panel import Clients, RubricPanel
from rag_judge.judge.prerender import PromptWork
from rag_judge.judge.prompts import compiled
from rag_judge.judge.rubrics import (
    FILE_SUFFIXES,
    NORM,
    Rubric,
    check_specs,
    resolve_rubrics,
    rubric_from_mapping,
)
from rag_judge.judge.settings import Judge, flat_judge, judge_keys, local_cache
from rag_judge.llm import ClientConfig
from rag_judge.llm.providers import no_calls
from rag_judge.report.model import MetricInfo, MetricKind, Signature

__all__ = ["DEFAULT_RUBRICS", "JudgeEvaluator", "JudgeRun"]

DEFAULT_RUBRICS = ("faithfulness", "answer_relevance", "correctness", "context_relevance")


class JudgeEvaluator(Evaluator):
    """Scores each sample 1–5 on each rubric with an LLM judge (default: the offline stub).

    ``rubrics``: built-in names, ``.yaml`` rubric files, ``.j2`` template files or inline
    rubric mappings. The judge's keys (``client``, ``cache``, ``temperature``, ``seed``,
    ``reask``, ``max_tokens``) sit at the top of the config and make its ``judge``.
    ``logprobs``: G-Eval probability-weighted scores. ``n`` > 1 samples several verdicts (needs
    ``temperature`` > 0). ``judges`` (2 or more client configs, replacing ``client``) makes a
    jury, reduced by ``aggregation`` down to a ``quorum`` (default: a majority). Validation
    checks the shape only; ``prepare()`` reads rubric files and compiles the templates.
    """

    type: Literal["judge"] = "judge"
    rubrics: tuple[str | Rubric, ...] = Field(default=DEFAULT_RUBRICS, min_length=1)
    judge: Judge = Field(default_factory=Judge)
    template_dirs: tuple[Path, ...] = ()
    n: int = Field(default=1, ge=1, le=20)
    logprobs: bool = False
    top_logprobs: int = Field(default=10, ge=1, le=20)
    judges: tuple[ClientConfig, ...] = ()
    aggregation: jury_.Aggregation = "mean"
    quorum: int | None = None
    on_judge_failure: jury_.FailurePolicy = "drop"

    kind: ClassVar[MetricKind] = MetricKind.JUDGE

    @model_validator(mode="wrap")
    @classmethod
    def _judge_keys(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        return judge_keys(data, Judge(), handler)

    @model_serializer(mode="wrap")
    def _flat(self, handler: Callable[[Any], Any]) -> Any:
        return flat_judge(handler(self))

    @field_validator("rubrics", mode="before")
    @classmethod
    def _inline(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            return tuple(
                rubric_from_mapping(v, f"rubrics[{i}]", base_dir=None) if isinstance(v, dict) else v
                for i, v in enumerate(value)
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> JudgeEvaluator:
        try:
            check_specs(self.rubrics)  # names and inline rubrics; files are read by prepare()
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if self.n > 1 and self.judge.temperature == 0:
            raise ValueError(f"n={self.n} samples need temperature > 0 (at 0 they are identical)")
        if self.n > 1 and self.logprobs:
            raise ValueError("logprobs weighting reads one reply's score token: use n=1 with it")
        problem = jury_.jury_problem(
            self.judges, self.judge.client, self.aggregation, self.quorum, self.on_judge_failure
        )
        if problem:
            raise ValueError(problem)
        return self

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """Rubric files, template folders and the cache file named in a config are relative to
        its folder (``cache: default`` and ``~/...`` paths are left as they are)."""

        def local(path: Any) -> Any:
            relative = isinstance(path, str) and not Path(path).is_absolute()
            return str(base / path) if relative else path

        local_cache(raw, base)
        rubrics = raw.get("rubrics")
        if isinstance(rubrics, list):
            raw["rubrics"] = [
                local(r) if isinstance(r, str) and r.endswith(FILE_SUFFIXES) else r for r in rubrics
            ]
        if isinstance(raw.get("template_dirs"), list):
            raw["template_dirs"] = [local(d) for d in raw["template_dirs"]]
        return raw

    @property
    def jury(self) -> jury_.Jury | None:
        """The jury the ``judges`` make (each juror this judge's settings with its client)."""
        if not self.judges:
            return None
        jurors = tuple(self.judge.model_copy(update={"client": c}) for c in self.judges)
        quorum = self.quorum if self.quorum is not None else jury_.default_quorum(len(jurors))
        return jury_.Jury(jurors, self.aggregation, quorum, self.on_judge_failure)

    def panel_judges(self) -> tuple[Judge, ...]:
        jury = self.jury
        return jury.judges if jury is not None else (self.judge,)

    # ---- metrics --------------------------------------------------------------------------

    def resolved_rubrics(self) -> list[Rubric]:
        """The rubrics, rubric files read (each call: the config holds no run state)."""
        return resolve_rubrics(list(self.rubrics))

    def metric_names(self) -> list[str]:
        return [m for r in self.resolved_rubrics() for m in (r.name, r.name + NORM)]

    def metric_info(self, metric: str) -> MetricInfo:
        rubric = metric.removesuffix(NORM)
        if metric.endswith(NORM) and rubric in {r.name for r in self.resolved_rubrics()}:
            return MetricInfo(kind=MetricKind.JUDGE, scale=(0.0, 1.0), normalises=rubric)
        return MetricInfo(kind=MetricKind.JUDGE, scale=(1.0, 5.0))

    def signature(self, metric: str) -> Signature:
        return self.signatures()[metric]

    def signatures(self) -> dict[str, Signature]:
        return self._panel(None).signatures()

    def wants_gpu(self) -> bool:
        return any(j.client.provider == "local" for j in self.panel_judges())

    def for_shard(self, shards: int, k: int) -> JudgeEvaluator:
        update: dict[str, Any] = {"judge": self.judge.divided(shards, k)}
        if self.judges:  # a jury: each judge keeps its own limits, divided the same way
            update["judges"] = tuple(j.divided(shards, k).client for j in self.panel_judges())
        return self.model_copy(update=update)

    # ---- running --------------------------------------------------------------------------

    def prepare(self, *, client: Clients = None) -> JudgeRun:
        """Check each judge's client config (an API key in the environment; nothing is
        called), read the rubric files and compile every template; a problem is a
        ConfigError (its ``loc`` names the key: ``client.api_key_env``,
        ``judges[1].api_key_env``). ``client`` overrides the configured one (a jury's: one
        client per judge, in order)."""
        if self.judges:
            jury_.check_jurors(self.judges)
        else:
            self.judge.check()
        return JudgeRun(self, self._panel(client))

    def _panel(self, client: Clients) -> RubricPanel:
        rubrics = self.resolved_rubrics()
        renderer = compiled(rubrics, self.template_dirs)
        jury = self.jury
        judges = jury.judges if jury is not None else (self.judge,)
        return RubricPanel.open(rubrics, renderer, judges, client, n=self.n,
                                logprobs=self.logprobs, top_logprobs=self.top_logprobs,
                                jury=jury)  # fmt: skip

    def dry_run(self, samples: Sequence[Sample], *, client: Clients = None) -> DryRun:
        """What ``evaluate`` would send, spending nothing: prompt count, samples skipped for
        missing inputs, token estimate and cost bound (first requests only; re-asks excluded);
        a jury's summed over its jurors. It needs no API key (``no_calls``) and reads the
        cache only where one exists (it creates no file)."""
        with no_calls():
            panel = self.prepare(client=client).panel
            estimate = panel.estimate(samples)
        return DryRun(prompts=estimate.prompts, skipped=estimate.skipped, **estimate.totals)


class JudgeRun(EvaluatorRun):
    """One run of the judge: its panel, and the verdicts of each chunk as columns."""

    evaluator: JudgeEvaluator

    def __init__(self, evaluator: JudgeEvaluator, panel: RubricPanel) -> None:
        super().__init__(evaluator)
        self.panel = panel

    def metric_names(self) -> list[str]:
        return [m for r in self.panel.rubrics for m in (r.name, r.name + NORM)]

    def signatures(self) -> dict[str, Signature]:
        return self.panel.signatures()

    def aside(self) -> PromptWork | None:
        return self.panel.rendered.work(self.panel.rubrics)

    def take_aside(self, samples: Sequence[Sample], done: Any) -> None:
        self.panel.rendered.take(samples, done)

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> Final:
        """Judge each chunk's samples on every rubric over one engine per judge: a chunk's
        prompts are rendered when it is taken and its result emitted when its verdicts are
        in. The final signatures say how the scores were computed over every chunk."""
        signatures = self.panel.signatures()

        def each(samples: Sequence[Sample], found: list[Verdict]) -> None:
            result = EvaluatorResult.empty(len(samples), signatures)
            result.judgments = [{} for _ in samples]
            for verdict in found:
                _record(result, verdict)
            emit(result)

        usage, final = self.panel.run(chunks, each)
        return Final(signatures=final, usage=usage)


def _record(result: EvaluatorResult, verdict: Verdict) -> None:
    """A sample's verdict on a rubric: its 1-5 score and ``(s-1)/4`` twin, or its failure on
    both."""
    name, i, entry = verdict.rubric.name, verdict.index, verdict.judgment
    if entry is not None:
        result.judgments[i][name] = entry
    if verdict.failure is None and entry is not None and entry.score is not None:
        result.scores[name][i] = entry.score
        result.scores[name + NORM][i] = (entry.score - 1.0) / 4.0
    elif verdict.failure is not None:
        result.fail(i, verdict.failure, metrics=[name, name + NORM])
