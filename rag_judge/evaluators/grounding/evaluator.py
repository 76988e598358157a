"""Claim-level grounding (``type: grounding``): the answer split into claims, each claim
checked against the retrieved contexts, its citations checked against its support, and the
answer classified as an abstention or not.

The judge's rounds are :mod:`rag_judge.judge.grounding`; the scores of what came back are
:mod:`rag_judge.evaluators.grounding.score`. Every request of a run goes through one engine
(scheduler, rate limit, cache, usage). An unreadable reply is re-asked ``reask`` times with
the problem quoted, then the sample is unscored with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_serializer, model_validator

from rag_judge._async import run_sync
from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import DryRun, Evaluator, EvaluatorRun, Final, Restated
from rag_judge.evaluators.grounding.score import (
    CITATION_METRICS,
    CLAIM_METRICS,
    RATE_METRICS,
    score_sample,
)
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.judge.grounding.claims import CITATIONS_RUBRIC, CLAIMS_RUBRIC, VERDICTS_RUBRIC
from rag_judge.judge.grounding.rounds import (
    CitationOptions,
    Grounded,
    GroundingAsk,
    Split,
    grounding_renderer,
)
from rag_judge.judge.settings import Judge, flat_judge, judge_keys, local_cache
from rag_judge.llm.base import LLMClient
from rag_judge.llm.providers import no_calls
from rag_judge.report.model import GROUNDING, Direction, MetricInfo, MetricKind, Signature
from rag_judge.text import DEFAULT_CITATION_PATTERN

__all__ = ["CitationOptions", "GroundingEvaluator", "GroundingRun"]

# The metrics that do not improve upward (the rest do): rates of a bad outcome and a rank fall
# as the system improves; the claim count and the answer rate are right neither high nor low
# (answering helps only where the question is answerable, which the two rates measure).
_DIRECTIONS = {
    "claim_contradiction": Direction.LOWER,
    "support_rank": Direction.LOWER,
    "misattribution": Direction.LOWER,
    "over_refusal_rate": Direction.LOWER,
    "unsupported_answer_rate": Direction.LOWER,
    "claims": Direction.NEUTRAL,
    "answer_rate": Direction.NEUTRAL,
}


class GroundingEvaluator(Evaluator):
    """Claims, their support and citations, and abstention, per sample (default: the stub).

    ``split``: ``judge`` (the judge splits the answer into atomic claims and says whether it
    abstains) or ``sentences`` (the answer's sentences, and the phrase rule for abstention; no
    call). ``citations``: how citation markers are read (None: no citation metrics).
    ``conditioned``: judge rubrics the run also reports over answered samples only, as
    ``<rubric>_answered`` (abstentions not applicable). The judge's keys (``client``,
    ``cache``, ``temperature``, ``seed``, ``reask``, ``max_tokens``) as for ``type: judge``.
    """

    type: Literal["grounding"] = "grounding"
    split: Split = "judge"
    citations: CitationOptions | None = Field(default_factory=CitationOptions)
    conditioned: tuple[str, ...] = ("faithfulness", "correctness")
    judge: Judge = Field(default_factory=lambda: Judge(max_tokens=1024))

    kind: ClassVar[MetricKind] = MetricKind.JUDGE

    @model_validator(mode="wrap")
    @classmethod
    def _judge_keys(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        return judge_keys(data, Judge(max_tokens=1024), handler)

    @model_serializer(mode="wrap")
    def _flat(self, handler: Callable[[Any], Any]) -> Any:
        return flat_judge(handler(self))

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """A cache file named in a config is relative to its folder."""
        local_cache(raw, base)
        return raw

    # ---- metrics ------------------------------------------------------------------------

    def metric_names(self) -> list[str]:
        cited = CITATION_METRICS if self.citations is not None else ()
        return [*CLAIM_METRICS, *cited, *RATE_METRICS]

    def metric_info(self, metric: str) -> MetricInfo:
        direction = _DIRECTIONS.get(metric, Direction.HIGHER)
        if metric == "claims":
            return MetricInfo(kind=MetricKind.JUDGE, scale=(0.0, None), direction=direction)
        if metric == "support_rank":
            return MetricInfo(kind=MetricKind.JUDGE, scale=(1.0, None), direction=direction)
        return MetricInfo(kind=MetricKind.JUDGE, scale=(0.0, 1.0), direction=direction)

    def restated(self) -> Restated:
        """The judge rubrics of ``conditioned``, over the samples whose answer answers."""
        return Restated(gate="answer_rate", metrics=self.conditioned, suffix="_answered",
                        given="answered")  # fmt: skip

    def signature(self, metric: str) -> Signature:
        return self.signatures()[metric]

    def signatures(self) -> dict[str, Signature]:
        return self._ask(None).signatures(self.metric_names())

    def wants_gpu(self) -> bool:
        return self.judge.client.provider == "local"

    def for_shard(self, shards: int, k: int) -> GroundingEvaluator:
        return self.model_copy(update={"judge": self.judge.divided(shards, k)})

    # ---- running --------------------------------------------------------------------------

    def _ask(self, client: LLMClient | None) -> _Signed:
        return _Signed(self, GroundingAsk(self.judge.open(client), grounding_renderer(),
                                          self.split, self.citations))  # fmt: skip

    def prepare(self, *, client: LLMClient | None = None) -> GroundingRun:
        """Check the client config (an API key in the environment) and compile the prompts;
        ``client`` overrides the configured one."""
        self.judge.check()
        return GroundingRun(self, self._ask(client))

    def dry_run(self, samples: Sequence[Sample], *, client: LLMClient | None = None) -> DryRun:
        """What ``evaluate`` would send, spending nothing (see ``GroundingAsk.first_requests``).
        It needs no API key (``no_calls``) and creates no cache file."""
        with no_calls():
            self.judge.check()
            ask = self._ask(client).ask
            requests, skipped = ask.first_requests(samples)
            estimate = ask.session.estimate(requests)
        return DryRun(prompts=len(requests), skipped=skipped, **estimate)


class _Signed:
    """A grounding ask with its evaluator's signatures."""

    def __init__(self, evaluator: GroundingEvaluator, ask: GroundingAsk) -> None:
        self.evaluator, self.ask = evaluator, ask

    def signatures(self, metrics: list[str]) -> dict[str, Signature]:
        ev, renderer, session = self.evaluator, self.ask.renderer, self.ask.session
        options = {"judge": session.name.text, "split": ev.split}
        if ev.split == "judge":
            options["claims"] = renderer.template_hash(CLAIMS_RUBRIC)
        else:
            options["abstention"] = "rule"
        options["verdicts"] = renderer.template_hash(VERDICTS_RUBRIC)
        options |= session.judge.sampling()
        out = {}
        for metric in metrics:
            extra = {}
            if metric in CITATION_METRICS and ev.citations is not None:
                c = ev.citations
                extra = {"cite": c.refers_to, "required": "yes" if c.required else "no"}
                extra["cite_mode"] = c.mode
                if c.mode == "alce":
                    extra["alce"] = renderer.template_hash(CITATIONS_RUBRIC)
                if c.pattern != DEFAULT_CITATION_PATTERN:
                    extra["pattern"] = c.pattern
            out[metric] = Signature(name=metric, options={**options, **extra,
                                    "version": __version__}, judged_by=(session.name,))  # fmt: skip
        return out


class GroundingRun(EvaluatorRun):
    """One run of grounding: each chunk in its rounds over one engine."""

    evaluator: GroundingEvaluator

    def __init__(self, evaluator: GroundingEvaluator, signed: _Signed) -> None:
        super().__init__(evaluator)
        self.signed = signed

    def signatures(self) -> dict[str, Signature]:
        return self.signed.signatures(self.metric_names())

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> Final:
        signatures = self.signatures()
        ask = self.signed.ask

        async def run() -> Final:
            async with ask.session.engine() as engine:
                for samples in chunks:
                    emit(self._result(await ask.ask(engine, samples), signatures))
            return Final(usage=engine.usage.model_copy())

        return run_sync(run())

    def _result(self, states: list[Grounded], signatures: dict[str, Signature]) -> EvaluatorResult:
        metrics = self.metric_names()
        result = EvaluatorResult.empty(len(states), signatures)
        result.judgments = [{} for _ in states]
        for i, st in enumerate(states):
            scored = score_sample(
                st.sample, metrics, st.split, st.checked, self.evaluator.citations,
                supported=st.supported, attempts=st.attempts,
                cached=st.cached and st.attempts > 0, raw=st.raw,
            )  # fmt: skip
            for metric, value in scored.values.items():
                result.scores[metric][i] = value
            result.errors[i].update(scored.failures)
            if scored.judgment is not None:
                result.judgments[i][GROUNDING] = scored.judgment
        return result
