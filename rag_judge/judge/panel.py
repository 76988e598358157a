"""Rubric judging over a run, by one judge or a jury (a panel of several).

Every juror has its own session (client, engine with its limits; one shared cache file: the
cache key holds provider and model) and scoring mode, so its own requests. A chunk's requests
of every juror go out concurrently in one event loop (``ask_panel_chunks_sync``); each juror's
outcomes become verdicts (``judging.verdicts``) and a jury reduces them per sample and rubric
(``Jury.reduce``). A sample's missing input is the same for every juror and is reported once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.judge.asking import Outcome, ask_panel_chunks_sync
from rag_judge.judge.judging import Job, Verdict, build_jobs, verdicts
from rag_judge.judge.jury import Jury, juror_names
from rag_judge.judge.prerender import Rendered
from rag_judge.judge.prompts import PromptRenderer
from rag_judge.judge.rubrics import NORM, Rubric
from rag_judge.judge.settings import Judge, JudgeSession, open_cache
from rag_judge.judge.used import Used
from rag_judge.judge.verdicts import (
    SCORE_LABELS,
    VERDICT_SCHEMA,
    VERDICT_SHAPE,
    JudgeVerdict,
    Scoring,
    Unscored,
    read_completion,
)
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMClient, Usage
from rag_judge.report.model import Signature

__all__ = ["JUDGE_CHUNK", "Clients", "Estimate", "RubricPanel", "scoring_of"]

JUDGE_CHUNK = 2_000  # samples whose prompts are rendered and asked together
# A client for each judge in place of the configured one: one, or a jury's list in order.
Clients = LLMClient | Sequence[LLMClient] | None


def scoring_of(client: LLMClient, logprobs: bool) -> Scoring:
    """How ``client``'s verdicts are scored: a label-scoring client from its distribution,
    else from the score token's logprobs when asked, else the stated integer."""
    if client.scores_labels:
        return "distribution"
    return "logprobs" if logprobs else "json"


@dataclass(frozen=True)
class Estimate:
    """What a panel would send for some samples, spending nothing (first requests only)."""

    prompts: int
    skipped: int  # (sample, rubric) pairs left out for a missing input or a bad template
    totals: dict[str, Any]  # the engines' dry runs summed (cost None unless all priced)


class RubricPanel:
    """One run's rubric judging: ``sessions`` (one, or a jury's in order), the rubrics and
    their compiled templates, the sampling of several verdicts (``n``) and logprobs."""

    def __init__(
        self,
        rubrics: Sequence[Rubric],
        renderer: PromptRenderer,
        sessions: Sequence[JudgeSession],
        *,
        n: int = 1,
        logprobs: bool = False,
        top_logprobs: int = 10,
        jury: Jury | None = None,
    ) -> None:
        self.rubrics = list(rubrics)
        self.renderer = renderer
        self.rendered = Rendered(renderer)  # prompts another process rendered, if any
        self.sessions = list(sessions)
        self.n, self.top_logprobs, self.jury = n, top_logprobs, jury
        self.scorings = [scoring_of(s.client, logprobs) for s in self.sessions]
        self.names = juror_names([s.name for s in self.sessions])
        self.planned = [self._signatures(s, m) for s, m in zip(sessions, self.scorings)]

    @classmethod
    def open(
        cls,
        rubrics: Sequence[Rubric],
        renderer: PromptRenderer,
        judges: Sequence[Judge],
        clients: Clients = None,
        **options: Any,
    ) -> RubricPanel:
        """A panel of ``judges``, each session opened on its client in ``clients`` (or its
        configured one); ``options``: those of ``RubricPanel``."""
        given = _clients(clients, len(judges))
        sessions = [j.open(c) for j, c in zip(judges, given, strict=True)]
        return cls(rubrics, renderer, sessions, **options)

    # ---- signatures --------------------------------------------------------------------

    def _signatures(self, session: JudgeSession, scoring: Scoring) -> dict[str, Signature]:
        """Every metric's signature when judged by ``session`` alone."""
        out = {}
        for r in self.rubrics:
            options = {"judge": session.name.text, "template": self.renderer.template_hash(r)}
            options |= {**session.judge.sampling(), "n": str(self.n), "scoring": scoring}
            if r.per_context:
                options["agg"] = "mean-over-contexts"
            version = {"version": __version__}
            named = {"judged_by": (session.name,)}
            out[r.name] = Signature(name=r.name, options={**options, **version}, **named)
            norm = {**options, "scale": "(s-1)/4", **version}
            out[r.name + NORM] = Signature(name=r.name + NORM, options=norm, **named)
        return out

    def signatures(
        self, jurors: Sequence[dict[str, Signature]] | None = None
    ) -> dict[str, Signature]:
        """The panel's signatures from its jurors' (default: as planned, before a run)."""
        jurors = jurors or self.planned
        if self.jury is None:
            return dict(jurors[0])
        return self.jury.signatures(self.names, jurors)

    # ---- requests ------------------------------------------------------------------------

    def _request(self, scoring: Scoring, session: JudgeSession) -> Callable[..., CompletionRequest]:
        def make(messages: tuple[ChatMessage, ...]) -> CompletionRequest:
            return session.judge.request(
                messages,
                VERDICT_SCHEMA,
                top_logprobs=self.top_logprobs if scoring == "logprobs" else None,
                n=self.n,
                score_labels=SCORE_LABELS if scoring == "distribution" else None,
            )

        return make

    def plan(self, samples: Sequence[Sample]) -> tuple[dict[Scoring, list[Job]], list[Verdict]]:
        """The jobs of each scoring mode the jurors use (prompts rendered once per mode) and
        the samples' input failures (once)."""
        jobs: dict[Scoring, list[Job]] = {}
        failed: list[Verdict] = []
        for scoring, session in zip(self.scorings, self.sessions, strict=True):
            if scoring not in jobs:
                built, problems = build_jobs(
                    samples, self.rubrics, self.rendered.render, self._request(scoring, session)
                )
                jobs[scoring] = built
                failed = failed or problems
        return jobs, failed

    # ---- running -------------------------------------------------------------------------

    def run(
        self,
        chunks: Iterable[Sequence[Sample]],
        each: Callable[[Sequence[Sample], list[Verdict]], None],
    ) -> tuple[Usage, dict[str, Signature]]:
        """Judge each chunk; ``each`` gets the chunk and its verdicts (input failures first)
        as soon as every juror's are in. Returns the summed usage and the final signatures
        (each juror's ``scoring`` and ``n`` as its server honoured them)."""
        used = [Used(self.rubrics, s, self.n) for s in self.scorings]
        current: list[tuple[Sequence[Sample], dict[Scoring, list[Job]], list[Verdict]]] = []

        def requests() -> Iterator[list[list[CompletionRequest]]]:
            for samples in _rechunked(chunks):
                jobs, failed = self.plan(samples)
                current[:] = [(samples, jobs, failed)]
                yield [[j.request for j in jobs[s]] for s in self.scorings]

        def answered(outcomes: list[list[Outcome[JudgeVerdict]]]) -> None:
            samples, jobs, failed = current[0]
            per_juror = []
            for k, scoring in enumerate(self.scorings):
                found = verdicts(jobs[scoring], outcomes[k], scoring)
                used[k].add(found)
                per_juror.append(found)
            reduced = per_juror[0] if self.jury is None else self.jury.reduce(self.names, per_juror)
            each(samples, [*failed, *reduced])

        def parse(
            scoring: Scoring, max_tokens: int
        ) -> Callable[[Completion], JudgeVerdict | Unscored]:
            return partial(read_completion, scoring=scoring, max_tokens=max_tokens)

        labels = [f"judge {n.text}" for n in self.names] if self.jury else ["judge"]
        try:
            with open_cache(self.sessions[0].judge.cache_path()) as cache:
                usage = ask_panel_chunks_sync(
                    [partial(s.engine, cache) for s in self.sessions],
                    requests(),
                    [parse(m, s.judge.max_tokens) for m, s in zip(self.scorings, self.sessions)],
                    answered,
                    shape=VERDICT_SHAPE,
                    reask=self.sessions[0].judge.reask,
                    labels=labels,
                )
        finally:
            self.rendered.take([], None)  # the last chunk's prompts are not kept past the run
        final = []
        for planned, tally in zip(self.planned, used, strict=True):
            updates = tally.updates()
            final.append(_updated(planned, updates))
        return usage, self.signatures(final)

    def estimate(self, samples: Sequence[Sample]) -> Estimate:
        """What judging ``samples`` would send, summed over the jurors, spending nothing."""
        jobs, failed = self.plan(samples)
        keys = ("requests", "cache_hits", "prompt_tokens_estimate", "completion_tokens_max")
        totals: dict[str, Any] = dict.fromkeys(keys, 0)
        costs: list[float | None] = []
        for session, scoring in zip(self.sessions, self.scorings, strict=True):
            found = session.estimate([j.request for j in jobs[scoring]])
            for key in keys:
                totals[key] += int(found[key])
            costs.append(found["cost_estimate"])
        totals["cost_estimate"] = None if None in costs else sum(c for c in costs if c is not None)
        prompts = sum(len(jobs[s]) for s in self.scorings)
        return Estimate(prompts=prompts, skipped=len(failed), totals=totals)


def _updated(
    signatures: dict[str, Signature], updates: dict[str, dict[str, str]]
) -> dict[str, Signature]:
    out = dict(signatures)
    for rubric, update in updates.items():
        for metric in (rubric, rubric + NORM):
            sig = out[metric]
            out[metric] = sig.model_copy(update={"options": {**sig.options, **update}})
    return out


def _rechunked(chunks: Iterable[Sequence[Sample]]) -> Iterator[Sequence[Sample]]:
    """Chunks of at most ``JUDGE_CHUNK`` samples (a whole list handed to ``evaluate``): only
    one chunk's prompts and replies are alive at a time."""
    for chunk in chunks:
        starts = range(0, max(len(chunk), 1), JUDGE_CHUNK)
        yield from (chunk[a : a + JUDGE_CHUNK] for a in starts)


def _clients(client: Clients, judges: int) -> list[LLMClient | None]:
    """One client (or None: the configured one) per judge, in order."""
    if client is None:
        return [None] * judges
    if not isinstance(client, Sequence):
        if judges == 1:
            return [client]
        raise ValueError(
            f"a jury of {judges} judges takes one client per judge, in order; got one client"
        )
    if judges == 1:
        raise ValueError(
            f"{len(client)} clients given to a single judge: a list of clients is for a "
            "jury (judges), one per judge; pass one client"
        )
    if len(client) != judges:
        raise ValueError(
            f"a jury of {judges} judges takes one client per judge, in order; "
            f"got {len(client)} clients"
        )
    return list(client)
