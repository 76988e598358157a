"""Rubric LLM judging: every (sample, rubric[, context]) becomes one request, all of a run's
requests go through one engine (one scheduler, one rate limit, one cache), and each reply
becomes a 1–5 score, normalised ``(s-1)/4`` under ``<rubric>_norm``, or an explicit
*unscored* result with its reason.

A reply that cannot be read is re-asked (``reask`` times, default once) with the parse error
quoted (``rag_judge.judge.asking``); after that the judgment is unscored: its score is None and
``errors[rubric]`` is an ``unscored`` Failure saying why, so the report counts it as an error
instead of averaging a made-up value.

``judgments[rubric].attempts`` counts the requests made for that verdict (1 + re-asks);
transport retries are in the engine's usage. A judgment also records what the server did
where it differs from what was asked (``logprobs_missing``, ``choices_received``,
``finish_reason``, ``structured_output``, ``schema_valid``, ``label_mass``; see
``JudgeEvaluator``), and a rubric's signature says how its scores were actually computed.
``context_relevance`` (``per_context``) judges each retrieved chunk on its own; the sample's
score is the mean of its chunks' scores (unscored, naming the chunks without a grade, when any
has none), and ``rag_judge.judge.relevance`` turns those grades into graded relevance for the
retrieval metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators import _jury
from rag_judge.evaluators._judge_results import Job, empty_result, fail, fill, skipped_inputs
from rag_judge.evaluators._judge_used import NORM, Used
from rag_judge.evaluators._judging import (
    CacheOption,
    cache_file,
    check_judge_client,
    local_cache,
    open_cache,
)
from rag_judge.evaluators._jury_run import Jurors, jury_dry_run, run_jury
from rag_judge.evaluators.base import DryRun, Evaluator, EvaluatorResult
from rag_judge.judge.asking import Outcome, ask_chunks_sync
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import (
    FILE_SUFFIXES,
    Rubric,
    check_specs,
    missing_input,
    resolve_rubrics,
    rubric_from_mapping,
)
from rag_judge.judge.verdicts import (
    SCORE_LABELS,
    VERDICT_SCHEMA,
    VERDICT_SHAPE,
    Reading,
    Scoring,
    read_completion,
)
from rag_judge.llm import ClientConfig, JudgeEngine, make_client, make_engine
from rag_judge.llm.base import ChatMessage, CompletionRequest, LLMClient
from rag_judge.llm.providers import check_capabilities, no_calls
from rag_judge.report.model import Failure, FailureKind, MetricInfo, MetricKind, Signature

__all__ = ["DEFAULT_RUBRICS", "JudgeEvaluator"]

DEFAULT_RUBRICS = ("faithfulness", "answer_relevance", "correctness", "context_relevance")
JUDGE_CHUNK = 2_000  # samples whose prompts are rendered and asked together


class JudgeEvaluator(Evaluator):
    """Scores each sample 1–5 on each rubric with an LLM judge (default: the offline stub).

    ``rubrics``: built-in names, ``.yaml`` rubric files, ``.j2`` template files or inline
    rubric mappings. ``cache``: SQLite file of completions; ``"default"`` is ``judge.sqlite`` in
    rag-judge's cache folder, resolved when the judge runs (``$RAG_JUDGE_CACHE_DIR``, else
    ``.rag_judge_cache`` in the working folder); None: no cache. In a config file, a relative
    ``cache`` path (like rubric files, template folders and the dataset) is relative to the
    config file's folder, not to the working folder. ``logprobs``: G-Eval
    probability-weighted scores from the score token's top logprobs (OpenAI-compatible
    servers); a client that scores labels (the ``local`` one) always scores from its
    distribution over "1".."5". ``n`` > 1 samples several verdicts (needs ``temperature`` > 0)
    and records their spread.

    A server may ignore ``logprobs``, ``n`` or the response format and still answer; the
    judgments say what it actually did (fields absent when it did what was asked):
    ``logprobs_missing`` (logprobs asked, none usable came back: the score is the judge's
    stated integer), ``choices_received`` (fewer than ``n`` choices), ``finish_reason`` (when
    not "stop"; an unreadable reply cut off at ``max_tokens`` is unscored with a reason that
    says so), ``structured_output`` (whether the request carried the response format: False
    when the server refused it and the client resent without), ``schema_valid`` (whether the
    reply, as a whole, is JSON that ``VERDICT_SCHEMA`` accepts; absent for a client that scores
    labels) and ``label_mass`` (the local client's probability mass on "1".."5").

    The signature's ``scoring`` option names how the scores were computed: ``json`` (the
    judge's stated integer), ``distribution`` (a label-scoring client), ``logprobs``. After a
    run with ``logprobs`` it says what was actually used per rubric: ``logprobs`` when every
    scored judgment had usable logprobs, ``integer`` when none had (all are stated integers),
    ``mixed`` when some had (the mean mixes weighted and integer scores); one warning per run
    names the rubrics and counts.

    ``judges`` (2 or more client configs, replacing ``client``) makes a jury: the score is the
    ``aggregation`` (``_jury.aggregate``) of the jurors' scored verdicts when at least
    ``quorum`` scored (default: a majority); with ``on_judge_failure: fail`` any juror's
    failure unscores the sample. The judgment keeps each juror's (``jury``) and their
    ``spread``; the signature reads ``judge:jury[provider/model,...]|...|agg:|quorum:|on_fail:``.

    Validation checks the shape only; ``prepare()`` reads rubric files and compiles the
    templates once (``evaluate`` calls it too).
    """

    type: Literal["judge"] = "judge"
    rubrics: tuple[str | Rubric, ...] = Field(default=DEFAULT_RUBRICS, min_length=1)
    client: ClientConfig = Field(default_factory=ClientConfig)
    cache: CacheOption = "default"
    template_dirs: tuple[Path, ...] = ()
    n: int = Field(default=1, ge=1, le=20)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    logprobs: bool = False
    top_logprobs: int = Field(default=10, ge=1, le=20)
    reask: int = Field(default=1, ge=0, le=3)
    max_tokens: int = Field(default=512, ge=1)
    judges: tuple[ClientConfig, ...] = ()
    aggregation: _jury.Aggregation = "mean"
    quorum: int | None = None
    on_judge_failure: _jury.FailurePolicy = "drop"

    kind: ClassVar[MetricKind] = MetricKind.JUDGE

    _rubrics: list[Rubric] | None = PrivateAttr(default=None)
    _renderer: PromptRenderer | None = PrivateAttr(default=None)

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
        if self.n > 1 and self.temperature == 0:
            raise ValueError(f"n={self.n} samples need temperature > 0 (at 0 they are identical)")
        if self.n > 1 and self.logprobs:
            raise ValueError("logprobs weighting reads one reply's score token: use n=1 with it")
        problem = _jury.jury_problem(
            self.judges, self.client, self.aggregation, self.quorum, self.on_judge_failure
        )
        if problem:
            raise ValueError(problem)
        return self

    @property
    def jury_quorum(self) -> int:
        """The fewest jurors that must score a verdict for the sample to be scored."""
        return self.quorum if self.quorum is not None else _jury.default_quorum(len(self.judges))

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

    # ---- preparing ----------------------------------------------------------------------

    def resolved_rubrics(self) -> list[Rubric]:
        """The rubrics, with rubric files read once per evaluator (the config is a snapshot)."""
        if self._rubrics is None:
            self._rubrics = resolve_rubrics(list(self.rubrics))
        return list(self._rubrics)

    def prepare(self) -> None:
        """Check the client config for what must hold before any call (an API key in the
        environment; nothing is called), then read the rubric files and compile every rubric's
        template, once; a missing key, or a template that is missing or does not parse, is a
        ConfigError (for the client, its ``loc`` names the key: ``client.api_key_env``, or a
        juror's: ``judges[1].api_key_env``)."""
        if self.judges:
            _jury.check_jurors(self.judges)
        else:
            check_judge_client(self.client)
        if self._renderer is not None:
            return
        rubrics = self.resolved_rubrics()
        renderer = PromptRenderer(self.template_dirs)
        try:
            for rubric in rubrics:
                renderer.load(rubric)
        except PromptError as exc:
            raise ConfigError(str(exc)) from None
        self._renderer = renderer

    @property
    def renderer(self) -> PromptRenderer:
        self.prepare()
        assert self._renderer is not None
        return self._renderer

    def cache_path(self) -> Path | None:
        """The cache file, the default one resolved now (not at import)."""
        return cache_file(self.cache)

    # ---- metrics ------------------------------------------------------------------------

    def metric_names(self) -> list[str]:
        return [m for r in self.resolved_rubrics() for m in (r.name, r.name + NORM)]

    def metric_info(self, metric: str) -> MetricInfo:
        rubric = metric.removesuffix(NORM)
        if metric.endswith(NORM) and rubric in {r.name for r in self.resolved_rubrics()}:
            return MetricInfo(kind=MetricKind.JUDGE, scale=(0.0, 1.0), normalises=rubric)
        return MetricInfo(kind=MetricKind.JUDGE, scale=(1.0, 5.0))

    def scoring(self, client: LLMClient) -> Scoring:
        if client.scores_labels:
            return "distribution"
        return "logprobs" if self.logprobs else "json"

    def signature(self, metric: str) -> Signature:
        if self.judges:
            return Jurors.of(self, None).jury(self)[metric]
        return self.signatures(make_client(self.client))[metric]

    def signatures(self, client: LLMClient) -> dict[str, Signature]:
        """Every metric's signature when judged by ``client``."""
        out = {}
        for r in self.resolved_rubrics():
            options = {
                "judge": f"{client.provider}/{client.model}",
                "template": self.renderer.template_hash(r),
                "temp": f"{self.temperature:g}",
                # Not "seed": the rendered signature ends with the bootstrap's seed:S.
                "judge_seed": str(self.seed),
                "n": str(self.n),
                "scoring": self.scoring(client),
            }
            if r.per_context:
                options["agg"] = "mean-over-contexts"
            version = {"version": __version__}
            out[r.name] = Signature(name=r.name, options={**options, **version})
            norm = {**options, "scale": "(s-1)/4", **version}
            out[r.name + NORM] = Signature(name=r.name + NORM, options=norm)
        return out

    # ---- building requests ----------------------------------------------------------------

    def _request(self, messages: tuple[ChatMessage, ...], scoring: Scoring) -> CompletionRequest:
        return CompletionRequest(
            messages=messages,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            json_schema=VERDICT_SCHEMA,
            top_logprobs=self.top_logprobs if scoring == "logprobs" else None,
            n=self.n,
            score_labels=SCORE_LABELS if scoring == "distribution" else None,
        )

    def jobs(
        self,
        samples: Sequence[Sample],
        scoring: Scoring,
        result: EvaluatorResult,
        indices: Iterable[int] | None = None,
    ) -> list[Job]:
        """One job per request of the samples at ``indices`` (default: all); a sample that
        lacks an input gets its failure instead."""
        jobs: list[Job] = []
        for i in range(len(samples)) if indices is None else indices:
            sample = samples[i]
            for rubric in self.resolved_rubrics():
                problem = missing_input(rubric, sample)
                if problem:
                    fail(
                        result, i, rubric, Failure(kind=FailureKind.MISSING_INPUT, message=problem)
                    )
                    continue
                targets = range(len(sample.contexts)) if rubric.per_context else [None]
                built = []
                try:
                    for ctx in targets:
                        variables = sample_variables(rubric, sample, ctx)
                        request = self._request(self.renderer.render(rubric, variables), scoring)
                        ctx_id = sample.contexts[ctx].id if ctx is not None else None
                        built.append(Job(i, rubric, ctx, ctx_id, request))
                except PromptError as exc:  # the template cannot render this sample
                    fail(result, i, rubric, Failure(message=str(exc)))
                    continue
                jobs.extend(built)
        return jobs

    def _plan(self, client: LLMClient | Sequence[LLMClient] | None) -> tuple[LLMClient, Scoring]:
        self.prepare()
        if isinstance(client, Sequence):
            raise ValueError(
                f"{len(client)} clients given to a single judge: a list of clients is for a "
                "jury (judges), one per judge; pass one client"
            )
        client = check_capabilities(client) if client is not None else make_client(self.client)
        return client, self.scoring(client)

    def _engine(self, client: LLMClient) -> JudgeEngine:
        return make_engine(self.client, cache=self.cache_path(), client=client)

    # ---- running ----------------------------------------------------------------------------

    def evaluate(
        self, samples: Sequence[Sample], *, client: LLMClient | Sequence[LLMClient] | None = None
    ) -> EvaluatorResult:
        """Judge every sample on every rubric. ``client`` overrides the configured one (a
        jury's: one client per judge, in order)."""
        parts: list[EvaluatorResult] = []
        starts = range(0, max(len(samples), 1), JUDGE_CHUNK)
        chunks = (samples[a : a + JUDGE_CHUNK] for a in starts)
        tail = self.evaluate_chunks(chunks, parts.append, client=client)
        result = EvaluatorResult.concat(parts)
        result.signatures, result.usage = tail.signatures, result.usage + tail.usage
        return result

    def evaluate_chunks(
        self,
        chunks: Iterable[Sequence[Sample]],
        emit: Callable[[EvaluatorResult], None],
        *,
        client: LLMClient | Sequence[LLMClient] | None = None,
    ) -> EvaluatorResult:
        """Judge each chunk's samples on every rubric over one engine (one scheduler, one rate
        limit, one cache): a chunk's prompts are rendered when it is taken and its result
        emitted when its verdicts are in. The final signatures say how the scores were
        computed over every chunk (``scoring:mixed`` when logprobs came back for some)."""
        if self.judges:
            return run_jury(self, chunks, emit, client)
        judge, scoring = self._plan(client)
        signatures = self.signatures(judge)
        used = Used(self.resolved_rubrics(), scoring, self.n)
        current: list[tuple[EvaluatorResult, list[Job]]] = []

        def requests() -> Iterator[list[CompletionRequest]]:
            for samples in chunks:
                result = empty_result(len(samples), signatures)
                current[:] = [(result, self.jobs(samples, scoring, result))]
                yield [j.request for j in current[0][1]]

        def each(outcomes: list[Outcome[Reading]]) -> None:
            result, jobs = current[0]
            fill(result, jobs, outcomes, scoring)
            used.add(result)
            emit(result)

        tail = EvaluatorResult.empty(0, signatures)
        tail.usage = ask_chunks_sync(
            lambda: self._engine(judge),
            requests(),
            lambda reply: read_completion(reply, scoring, max_tokens=self.max_tokens),
            each,
            shape=VERDICT_SHAPE,
            reask=self.reask,
        )
        tail.signatures = used.signatures(signatures)
        return tail

    def dry_run(
        self, samples: Sequence[Sample], *, client: LLMClient | Sequence[LLMClient] | None = None
    ) -> DryRun:
        """What ``evaluate`` would send, spending nothing: prompt count, samples skipped for
        missing inputs, token estimate and cost bound (first requests only; re-asks excluded);
        a jury's summed over its jurors. Spending nothing, it needs no API key (``no_calls``),
        and it reads the cache only where one exists (it creates no file)."""
        if self.judges:
            return jury_dry_run(self, samples, client)
        with no_calls():
            client, scoring = self._plan(client)
            result = empty_result(len(samples), self.signatures(client))
            jobs = self.jobs(samples, scoring, result)
        with (
            open_cache(self.cache_path(), dry=True) as cache,
            make_engine(self.client, cache=cache, client=client) as engine,
        ):
            estimate = engine.dry_run([j.request for j in jobs])
        return DryRun(prompts=len(jobs), skipped=skipped_inputs(result), **estimate)
