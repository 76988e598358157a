"""Claim-level grounding (``type: grounding``): the answer split into claims, each claim
checked against the retrieved contexts, its citations checked against its support, and the
answer classified as an abstention or not; scored per sample by
:mod:`rag_judge.evaluators._grounding_score`.

Every request goes through one judge engine per run (scheduler, rate limit, cache, usage),
two rounds per chunk: first the claim lists (``split: judge``; with ``split: sentences`` the
answer's sentences are the claims and the abstention rule of :mod:`rag_judge.text` decides,
without a call), then one verdict request per answer that makes claims (and with ``citations:
{mode: alce}`` a third, on the answer's cited sentences: ALCE's questions). An unreadable
reply is re-asked ``reask`` times with the problem quoted, then the sample is unscored with
its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr

from rag_judge._async import run_sync
from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators._grounding_score import (
    CITATION_METRICS,
    CLAIM_METRICS,
    RATE_METRICS,
    CitationOptions,
    answer_missing,
    score_sample,
    statements,
)
from rag_judge.evaluators._judging import (
    CacheOption,
    cache_file,
    check_judge_client,
    local_cache,
    open_cache,
)
from rag_judge.evaluators.base import DryRun, Evaluator, EvaluatorResult
from rag_judge.judge.asking import Outcome, ask_all
from rag_judge.judge.claims import (
    CITATIONS_RUBRIC,
    CITATIONS_SCHEMA,
    CITATIONS_SHAPE,
    CLAIMS_RUBRIC,
    CLAIMS_SCHEMA,
    CLAIMS_SHAPE,
    VERDICTS_RUBRIC,
    VERDICTS_SCHEMA,
    VERDICTS_SHAPE,
    ClaimList,
    ClaimVerdict,
    StatementVerdict,
    read_claims,
    read_statements,
    read_verdicts,
)
from rag_judge.judge.prompts import PromptRenderer, neutralise
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm import ClientConfig, JudgeEngine, make_client, make_engine
from rag_judge.llm.base import Completion, CompletionRequest, LLMClient, LLMError
from rag_judge.llm.providers import check_capabilities, no_calls
from rag_judge.report.model import GROUNDING, Direction, MetricInfo, MetricKind, Signature
from rag_judge.text import DEFAULT_CITATION_PATTERN, Citations, claim_sentences, is_abstention

__all__ = ["CitationOptions", "GroundingEvaluator"]

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


@dataclass
class _Sample:
    sample: Sample
    split: ClaimList | Unscored | LLMError | None = None
    checked: list[ClaimVerdict] | Unscored | LLMError | None = None
    supported: list[StatementVerdict] | Unscored | LLMError | None = None  # ALCE's round
    attempts: int = 0
    cached: bool = True
    raw: str = ""

    def took(self, outcome: Outcome[Any]) -> None:
        self.attempts += outcome.attempts
        self.cached = self.cached and outcome.cached
        self.raw = outcome.raw


class GroundingEvaluator(Evaluator):
    """Claims, their support and citations, and abstention, per sample (default: the stub).

    ``split``: ``judge`` (the judge splits the answer into atomic claims and says whether it
    abstains) or ``sentences`` (the answer's sentences, and the phrase rule for abstention; no
    call). ``citations``: how citation markers are read (None: no citation metrics).
    ``conditioned``: judge rubrics the run also reports over answered samples only, as
    ``<rubric>_answered`` (abstentions not applicable). ``cache``, ``client``,
    ``temperature``, ``seed``, ``reask`` and ``max_tokens`` as for ``type: judge``.
    """

    type: Literal["grounding"] = "grounding"
    split: Literal["judge", "sentences"] = "judge"
    citations: CitationOptions | None = Field(default_factory=CitationOptions)
    conditioned: tuple[str, ...] = ("faithfulness", "correctness")
    client: ClientConfig = Field(default_factory=ClientConfig)
    cache: CacheOption = "default"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    reask: int = Field(default=1, ge=0, le=3)
    max_tokens: int = Field(default=1024, ge=1)

    kind: ClassVar[MetricKind] = MetricKind.JUDGE

    _renderer: PromptRenderer | None = PrivateAttr(default=None)

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """A cache file named in a config is relative to its folder."""
        local_cache(raw, base)
        return raw

    def prepare(self) -> None:
        """Check the client config (an API key in the environment) and compile the prompts."""
        check_judge_client(self.client)
        if self._renderer is None:
            renderer = PromptRenderer()
            renderer.load(CLAIMS_RUBRIC)
            renderer.load(VERDICTS_RUBRIC)
            renderer.load(CITATIONS_RUBRIC)
            self._renderer = renderer

    @property
    def renderer(self) -> PromptRenderer:
        self.prepare()
        assert self._renderer is not None
        return self._renderer

    def cache_path(self) -> Path | None:
        return cache_file(self.cache)

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

    def signature(self, metric: str) -> Signature:
        return self.signatures(make_client(self.client))[metric]

    def signatures(self, client: LLMClient) -> dict[str, Signature]:
        options = {"judge": f"{client.provider}/{client.model}", "split": self.split}
        if self.split == "judge":
            options["claims"] = self.renderer.template_hash(CLAIMS_RUBRIC)
        else:
            options["abstention"] = "rule"
        options["verdicts"] = self.renderer.template_hash(VERDICTS_RUBRIC)
        # Not "seed": the rendered signature ends with the bootstrap's seed:S.
        options |= {"temp": f"{self.temperature:g}", "judge_seed": str(self.seed)}
        out = {}
        for metric in self.metric_names():
            extra = {}
            if metric in CITATION_METRICS and self.citations is not None:
                c = self.citations
                extra = {"cite": c.refers_to, "required": "yes" if c.required else "no"}
                extra["cite_mode"] = c.mode
                if c.mode == "alce":
                    extra["alce"] = self.renderer.template_hash(CITATIONS_RUBRIC)
                if c.pattern != DEFAULT_CITATION_PATTERN:
                    extra["pattern"] = c.pattern
            out[metric] = Signature(
                name=metric, options={**options, **extra, "version": __version__}
            )
        return out

    # ---- requests -------------------------------------------------------------------------

    def _request(self, messages: Any, schema: dict[str, Any]) -> CompletionRequest:
        return CompletionRequest(
            messages=messages,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            json_schema=schema,
        )

    def _claims_request(self, sample: Sample) -> CompletionRequest:
        variables = {"question": neutralise(sample.question or ""),
                     "answer": neutralise(sample.answer or "")}  # fmt: skip
        return self._request(self.renderer.render(CLAIMS_RUBRIC, variables), CLAIMS_SCHEMA)

    def _verdicts_request(self, sample: Sample, claims: Sequence[str]) -> CompletionRequest:
        reader = self.citations.reader() if self.citations is not None else Citations()
        variables = {
            "question": neutralise(sample.question or ""),
            "contexts": [
                {"rank": r, "text": neutralise(c.text)} for r, c in enumerate(sample.contexts, 1)
            ],
            # the verifier judges what a claim says, not where it says it comes from
            "claims": [neutralise(reader.strip(c)) for c in claims],
        }
        return self._request(self.renderer.render(VERDICTS_RUBRIC, variables), VERDICTS_SCHEMA)

    def _alce(self, sample: Sample) -> list[tuple[str, tuple[int, ...]]]:
        """The sentences ALCE's round asks about: those whose markers all name retrieved
        contexts (none unless ``citations: {mode: alce}``)."""
        if self.citations is None or self.citations.mode != "alce":
            return []
        found = statements(sample, self.citations.reader())
        return [(text, cited) for text, cited in found if cited and 0 not in cited]

    def _citations_request(
        self, sample: Sample, asked: list[tuple[str, tuple[int, ...]]]
    ) -> CompletionRequest:
        shown = sorted({r for _, cited in asked for r in cited})
        variables = {
            "question": neutralise(sample.question or ""),
            "contexts": [
                {"rank": r, "text": neutralise(sample.contexts[r - 1].text)} for r in shown
            ],
            "statements": [{"text": neutralise(t), "cited": list(c)} for t, c in asked],
        }
        return self._request(self.renderer.render(CITATIONS_RUBRIC, variables), CITATIONS_SCHEMA)

    @staticmethod
    def _sentences(answer: str) -> ClaimList:
        abstains = is_abstention(answer)
        return ClaimList(abstention=abstains, claims=() if abstains else claim_sentences(answer))

    # ---- running ----------------------------------------------------------------------------

    def _plan(self, client: LLMClient | None) -> LLMClient:
        self.prepare()
        return check_capabilities(client) if client is not None else make_client(self.client)

    def _engine(self, client: LLMClient) -> JudgeEngine:
        return make_engine(self.client, cache=self.cache_path(), client=client)

    def evaluate(
        self, samples: Sequence[Sample], *, client: LLMClient | None = None
    ) -> EvaluatorResult:
        """Ground every sample's answer. ``client`` overrides the configured one."""
        parts: list[EvaluatorResult] = []
        tail = self.evaluate_chunks([samples], parts.append, client=client)
        result = EvaluatorResult.concat(parts)
        result.usage += tail.usage
        return result

    def evaluate_chunks(
        self,
        chunks: Iterable[Sequence[Sample]],
        emit: Callable[[EvaluatorResult], None],
        *,
        client: LLMClient | None = None,
    ) -> EvaluatorResult:
        """Each chunk in two rounds over one engine: claims, then verdicts."""
        judge = self._plan(client)
        signatures = self.signatures(judge)

        async def run() -> EvaluatorResult:
            async with self._engine(judge) as engine:
                for samples in chunks:
                    emit(await self._chunk(engine, samples, signatures))
            tail = EvaluatorResult.empty(0, signatures)
            tail.usage = engine.usage.model_copy()
            return tail

        return run_sync(run())

    async def _chunk(
        self, engine: JudgeEngine, samples: Sequence[Sample], signatures: dict[str, Signature]
    ) -> EvaluatorResult:
        states = [_Sample(s) for s in samples]
        answered = [st for st in states if answer_missing(st.sample) is None]
        if self.split == "sentences":
            for st in answered:
                st.split = self._sentences(st.sample.answer or "")
        else:
            requests = [self._claims_request(st.sample) for st in answered]
            outcomes = await ask_all(engine, requests, read_claims, shape=CLAIMS_SHAPE,
                                     reask=self.reask, label="grounding claims")  # fmt: skip
            for st, o in zip(answered, outcomes, strict=True):
                st.split = o.result
                st.took(o)
        todo = [
            st
            for st in answered
            if isinstance(st.split, ClaimList) and st.split.claims and st.sample.contexts
        ]
        requests, parsers = [], []
        for st in todo:
            claims = st.split.claims  # type: ignore[union-attr]
            requests.append(self._verdicts_request(st.sample, claims))
            parsers.append(_verdict_reader(len(claims), len(st.sample.contexts)))
        outcomes2 = await ask_all(engine, requests, parsers, shape=VERDICTS_SHAPE,
                                  reask=self.reask, label="grounding verdicts")  # fmt: skip
        for st, checked in zip(todo, outcomes2, strict=True):
            st.checked = checked.result
            st.took(checked)
        # ALCE's questions only where the claims were judged (else no citation metric)
        asking = [(st, self._alce(st.sample)) for st in todo if isinstance(st.checked, list)]
        asking = [(st, asked) for st, asked in asking if asked]
        requests = [self._citations_request(st.sample, asked) for st, asked in asking]
        readers = [_statement_reader([c for _, c in asked]) for _, asked in asking]
        outcomes3 = await ask_all(engine, requests, readers, shape=CITATIONS_SHAPE,
                                  reask=self.reask, label="grounding citations")  # fmt: skip
        for (st, _), supported in zip(asking, outcomes3, strict=True):
            st.supported = supported.result
            st.took(supported)
        return self._result(states, signatures)

    def _result(self, states: list[_Sample], signatures: dict[str, Signature]) -> EvaluatorResult:
        metrics = self.metric_names()
        result = EvaluatorResult.empty(len(states), signatures)
        result.judgments = [{} for _ in states]
        for i, st in enumerate(states):
            scored = score_sample(
                st.sample, metrics, st.split, st.checked, self.citations, supported=st.supported,
                attempts=st.attempts, cached=st.cached and st.attempts > 0, raw=st.raw,
            )  # fmt: skip
            for metric, value in scored.values.items():
                result.scores[metric][i] = value
            result.errors[i].update(scored.failures)
            if scored.judgment is not None:
                result.judgments[i][GROUNDING] = scored.judgment
        return result

    def dry_run(self, samples: Sequence[Sample], *, client: LLMClient | None = None) -> DryRun:
        """What ``evaluate`` would send, spending nothing: with ``split: judge`` one claims
        request per answer, and one verdict request per answer that makes claims, estimated
        from its sentences (the claims the judge will return are not known before it does),
        and with ``citations: {mode: alce}`` one request on its cited sentences. It needs no
        API key (``no_calls``) and creates no cache file."""
        with no_calls():
            return self._dry_run(samples, client)

    def _dry_run(self, samples: Sequence[Sample], client: LLMClient | None) -> DryRun:
        judge = self._plan(client)
        requests = []
        skipped = 0
        for sample in samples:
            if sample.answer is None or answer_missing(sample) is not None:
                skipped += 1
                continue
            if self.split == "judge":
                requests.append(self._claims_request(sample))
            split = self._sentences(sample.answer)
            if split.claims and sample.contexts:
                requests.append(self._verdicts_request(sample, split.claims))
                asked = self._alce(sample)
                if asked:
                    requests.append(self._citations_request(sample, asked))
        with (
            open_cache(self.cache_path(), dry=True) as cache,
            make_engine(self.client, cache=cache, client=judge) as engine,
        ):
            estimate = engine.dry_run(requests)
        return DryRun(prompts=len(requests), skipped=skipped, **estimate)


def _verdict_reader(
    claims: int, contexts: int
) -> Callable[[Completion], list[ClaimVerdict] | Unscored]:
    return lambda reply: read_verdicts(reply, claims, contexts)


def _statement_reader(
    cited: list[tuple[int, ...]],
) -> Callable[[Completion], list[StatementVerdict] | Unscored]:
    return lambda reply: read_statements(reply, cited)
