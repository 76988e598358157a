"""Rubric LLM judging: every (sample, rubric[, context]) becomes one request, all of a run's
requests go through one engine (one scheduler, one rate limit, one cache), and each reply
becomes a 1–5 score, normalised ``(s-1)/4`` under ``<rubric>_norm``, or an explicit
*unscored* result with its reason.

A reply that cannot be read is re-asked (``reask`` times, default once) with the parse error
quoted; after that the judgment is unscored: its score is None and ``errors[rubric]`` says
``unscored: <why>``, so the report counts it as an error instead of averaging a made-up value.

``judgments[rubric]["attempts"]`` counts the requests made for that verdict (1 + re-asks);
transport retries are in the engine's usage. ``context_relevance`` (``per_context``) judges
each retrieved chunk on its own; the sample's score is the mean of its chunks' scores, and
``judged_relevance`` turns those grades into graded relevance for the retrieval metrics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import Rubric, missing_input, resolve_rubrics
from rag_judge.judge.verdicts import (
    SCORE_LABELS,
    VERDICT_SCHEMA,
    Reading,
    Scoring,
    Unscored,
    read_completion,
    reask_message,
)
from rag_judge.llm import ClientConfig, make_client, make_engine
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMClient, LLMError

__all__ = ["JudgeEvaluator", "judged_relevance", "relevance_grade", "with_judged_relevance"]

DEFAULT_RUBRICS = ("faithfulness", "answer_relevance", "correctness", "context_relevance")
DEFAULT_CACHE = Path(".rag_judge_cache/judge.sqlite")


@dataclass
class _Job:
    index: int
    rubric: Rubric
    context: int | None
    request: CompletionRequest
    context_id: str | None = None
    replies: list[Completion] = field(default_factory=list)
    outcome: Reading | Unscored | LLMError | None = None

    def judgment(self) -> dict[str, Any]:
        raw = self.replies[-1].text if self.replies else ""
        if isinstance(self.outcome, Reading):
            out: dict[str, Any] = {"score": self.outcome.value, "reason": self.outcome.reason}
        elif isinstance(self.outcome, Unscored):
            out = {"score": None, "reason": self.outcome.reason}
        else:
            out = {"score": None, "reason": f"judge call failed: {self.outcome}"}
        out["raw"] = raw
        out["attempts"] = len(self.replies) + isinstance(self.outcome, LLMError)
        out["cached"] = bool(self.replies) and all(c.cached for c in self.replies)
        if isinstance(self.outcome, Reading):
            out.update(self.outcome.extra)
        return out


class JudgeEvaluator(Evaluator):
    """Scores each sample 1–5 on each rubric with an LLM judge (default: the offline stub).

    ``rubrics``: built-in names, ``.yaml`` rubric files, ``.j2`` template files or inline
    rubric mappings. ``cache``: SQLite file of completions (None: no cache). ``logprobs``:
    G-Eval probability-weighted scores from the score token's top logprobs (OpenAI-compatible
    servers); the ``local`` client always scores from its distribution over "1".."5".
    ``n`` > 1 samples several verdicts (needs ``temperature`` > 0) and records their spread.
    """

    type: Literal["judge"] = "judge"
    rubrics: tuple[str | Rubric, ...] = Field(default=DEFAULT_RUBRICS, min_length=1)
    client: ClientConfig = Field(default_factory=ClientConfig)
    cache: Path | None = DEFAULT_CACHE
    template_dirs: tuple[Path, ...] = ()
    n: int = Field(default=1, ge=1, le=20)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    logprobs: bool = False
    top_logprobs: int = Field(default=10, ge=1, le=20)
    reask: int = Field(default=1, ge=0, le=3)
    max_tokens: int = Field(default=512, ge=1)
    progress: bool = False

    _usage: dict[str, Any] = PrivateAttr(default_factory=dict)
    _rubrics: list[Rubric] | None = PrivateAttr(default=None)

    @field_validator("rubrics", mode="before")
    @classmethod
    def _inline(cls, value: Any) -> Any:
        from rag_judge.judge.rubrics import rubric_from_mapping

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
        renderer = PromptRenderer(self.template_dirs)
        try:
            for rubric in self.resolved_rubrics():
                renderer.load(rubric)  # a missing or broken template fails here, not mid-run
        except (ConfigError, PromptError) as exc:
            raise ValueError(str(exc)) from None
        if self.n > 1 and self.temperature == 0:
            raise ValueError(f"n={self.n} samples need temperature > 0 (at 0 they are identical)")
        if self.n > 1 and self.logprobs:
            raise ValueError("logprobs weighting reads one reply's score token: use n=1 with it")
        return self

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """Rubric files and template folders named in a config are relative to its folder."""

        def local(path: Any) -> Any:
            relative = isinstance(path, str) and not Path(path).is_absolute()
            return str(base / path) if relative else path

        rubrics = raw.get("rubrics")
        if isinstance(rubrics, list):
            raw["rubrics"] = [
                local(r) if isinstance(r, str) and r.endswith((".yaml", ".yml", ".j2")) else r
                for r in rubrics
            ]
        if isinstance(raw.get("template_dirs"), list):
            raw["template_dirs"] = [local(d) for d in raw["template_dirs"]]
        return raw

    def resolved_rubrics(self) -> list[Rubric]:
        """The rubrics, with YAML files read once per evaluator (the config is a snapshot)."""
        if self._rubrics is None:
            self._rubrics = resolve_rubrics(list(self.rubrics))
        return list(self._rubrics)

    def metric_names(self) -> list[str]:
        return [m for r in self.resolved_rubrics() for m in (r.name, f"{r.name}_norm")]

    @property
    def usage(self) -> dict[str, Any]:
        """The engine usage of the last ``evaluate`` (requests, cache_hits, retries, ...)."""
        return dict(self._usage)

    def scoring(self, provider: str) -> Scoring:
        if provider == "local":
            return "distribution"
        return "logprobs" if self.logprobs else "json"

    def signatures(self, client: LLMClient, renderer: PromptRenderer) -> dict[str, str]:
        out = {}
        scoring = self.scoring(client.provider)
        for r in self.resolved_rubrics():
            parts = [
                r.name,
                f"judge:{client.provider}/{client.model}",
                f"template:{renderer.template_hash(r)}",
                f"temp:{self.temperature:g}",
                f"seed:{self.seed}",
                f"n:{self.n}",
                f"scoring:{scoring}",
            ]
            if r.per_context:
                parts.append("agg:mean-over-contexts")
            out[r.name] = "|".join([*parts, f"version:{__version__}"])
            out[f"{r.name}_norm"] = "|".join(
                [f"{r.name}_norm", *parts[1:], "scale:(s-1)/4", f"version:{__version__}"]
            )
        return out

    # ---- building requests ------------------------------------------------------------------

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

    def _jobs(
        self,
        samples: Sequence[Sample],
        renderer: PromptRenderer,
        scoring: Scoring,
        result: EvaluatorResult,
    ) -> list[_Job]:
        """One job per request; a sample that lacks an input gets its error instead."""
        jobs: list[_Job] = []
        rubrics = self.resolved_rubrics()
        for i, sample in enumerate(samples):
            for rubric in rubrics:
                problem = missing_input(rubric, sample)
                targets = range(len(sample.contexts)) if rubric.per_context else [None]
                built = []
                for ctx in [] if problem else targets:
                    try:
                        messages = renderer.render(rubric, sample_variables(rubric, sample, ctx))
                    except PromptError as exc:
                        problem = str(exc)
                        break
                    ctx_id = sample.contexts[ctx].id if ctx is not None else None
                    built.append(_Job(i, rubric, ctx, self._request(messages, scoring), ctx_id))
                if problem:
                    _fail(result, i, rubric.name, problem)
                else:
                    jobs.extend(built)
        return jobs

    # ---- running ----------------------------------------------------------------------------

    def evaluate(
        self, samples: Sequence[Sample], *, client: LLMClient | None = None
    ) -> EvaluatorResult:
        """Judge every sample on every rubric. ``client`` overrides the configured one."""
        client = client if client is not None else make_client(self.client)
        renderer = PromptRenderer(self.template_dirs)
        scoring = self.scoring(client.provider)
        result = EvaluatorResult.empty(
            len(samples), self.metric_names(), self.signatures(client, renderer)
        )
        result.judgments = [{} for _ in samples]
        jobs = self._jobs(samples, renderer, scoring, result)
        engine = make_engine(self.client, cache=self.cache, client=client)
        # Every first request of the run goes through one engine.run call: one scheduler.
        self._settle(
            jobs, engine.run_sync([j.request for j in jobs], progress=self.progress), scoring
        )
        for _ in range(self.reask):
            pending = [j for j in jobs if isinstance(j.outcome, Unscored) and j.replies]
            if not pending:
                break
            followups = [_followup(j) for j in pending]
            self._settle(pending, engine.run_sync(followups, progress=self.progress), scoring)
            for j, req in zip(pending, followups):
                j.request = req
        self._usage = engine.usage.model_dump()
        result.usage = dict(self._usage)
        _fill(result, jobs)
        return result

    def _settle(
        self, jobs: list[_Job], outputs: list[Completion | LLMError], scoring: Scoring
    ) -> None:
        for job, out in zip(jobs, outputs):
            if isinstance(out, LLMError):
                job.outcome = out
            else:
                job.replies.append(out)
                job.outcome = read_completion(out, scoring)

    def dry_run(
        self, samples: Sequence[Sample], *, client: LLMClient | None = None
    ) -> dict[str, Any]:
        """What ``evaluate`` would send, spending nothing: prompt count, samples skipped for
        missing inputs, token estimate and cost bound (first requests only; re-asks excluded)."""
        client = client if client is not None else make_client(self.client)
        renderer = PromptRenderer(self.template_dirs)
        result = EvaluatorResult.empty(len(samples), self.metric_names(), {})
        jobs = self._jobs(samples, renderer, self.scoring(client.provider), result)
        engine = make_engine(self.client, cache=self.cache, client=client)
        estimate = engine.dry_run([j.request for j in jobs])
        skipped = sum(1 for errs in result.errors for m in errs if not m.endswith("_norm"))
        return {"prompts": len(jobs), "skipped": skipped, **estimate}


def _followup(job: _Job) -> CompletionRequest:
    """The re-ask: the previous exchange, then the parse error quoted back."""
    assert isinstance(job.outcome, Unscored)
    return job.request.followed_by(job.replies[-1].text, reask_message(job.outcome.reason))


def _fail(result: EvaluatorResult, index: int, rubric: str, message: str) -> None:
    for metric in (rubric, f"{rubric}_norm"):
        result.scores[metric][index] = None
        result.errors[index][metric] = message


def _fill(result: EvaluatorResult, jobs: list[_Job]) -> None:
    groups: dict[tuple[int, str], list[_Job]] = {}
    for job in jobs:
        groups.setdefault((job.index, job.rubric.name), []).append(job)
    for (i, name), group in groups.items():
        per_context = group[0].rubric.per_context
        judged = [j.judgment() for j in group]
        problem = None
        for job, entry in zip(group, judged):
            if per_context:
                ctx = job.context or 0
                entry.update(rank=ctx + 1, id=job.context_id)
            where = f"context {entry['rank']}: " if per_context else ""
            if isinstance(job.outcome, LLMError):
                problem = problem or f"{where}{job.outcome}"
            elif isinstance(job.outcome, Unscored):
                problem = problem or f"unscored: {where}{job.outcome.reason}"
        if per_context:
            scores = [e["score"] for e in judged]
            entry = {
                "score": None if problem else math.fsum(scores) / len(scores),
                "reason": f"mean of {len(scores)} per-context grades",
                "attempts": sum(e["attempts"] for e in judged),
                "cached": all(e["cached"] for e in judged),
                "contexts": judged,
            }
        else:
            entry = judged[0]
        result.judgments[i][name] = entry
        if problem:
            _fail(result, i, name, problem)
        else:
            result.scores[name][i] = entry["score"]
            result.scores[f"{name}_norm"][i] = (entry["score"] - 1.0) / 4.0


# ---- graded relevance from context_relevance ------------------------------------------------


def relevance_grade(score: float) -> int:
    """A 1–5 context_relevance score as a 0–3 relevance grade: 1→0, 2→0, 3→1, 4→2, 5→3.

    Levels 1 (unrelated) and 2 (on topic, but no help) are both "not relevant"; from 3 up each
    level is one grade. A weighted (non-integer) score is rounded half up first.
    """
    return max(0, math.floor(score + 0.5) - 2)


def judged_relevance(
    result: EvaluatorResult, samples: Sequence[Sample], rubric: str = "context_relevance"
) -> list[dict[str, int] | None]:
    """Per sample, {context id: grade 0–3} from the judge's per-context grades; None for a
    sample whose contexts were not all graded (a partial table would rank the rest as 0).
    Contexts without an id are left out (``with_judged_relevance`` grades them in place)."""
    out: list[dict[str, int] | None] = []
    for sample, judged in zip(samples, result.judgments):
        entry = judged.get(rubric)
        if entry is None or entry.get("score") is None:
            out.append(None)
            continue
        out.append(
            {
                c.id: relevance_grade(e["score"])
                for c, e in zip(sample.contexts, entry["contexts"])
                if c.id is not None
            }
        )
    return out


def with_judged_relevance(
    samples: Sequence[Sample], result: EvaluatorResult, rubric: str = "context_relevance"
) -> list[Sample]:
    """Samples with the judge's grades as each context's ``relevance``, for samples that carry
    no judgments of their own (human judgments always win). Feed them to the retrieval metrics."""
    out = []
    for sample, judged in zip(samples, result.judgments):
        entry = judged.get(rubric)
        if sample.judged_grades() is not None or entry is None or entry.get("score") is None:
            out.append(sample)
            continue
        contexts = tuple(
            c.model_copy(update={"relevance": float(relevance_grade(e["score"]))})
            for c, e in zip(sample.contexts, entry["contexts"])
        )
        out.append(sample.model_copy(update={"contexts": contexts}))
    return out
