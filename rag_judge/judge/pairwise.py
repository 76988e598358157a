"""Pairwise judging: which of two variants' answers to the same question is better on a rubric.

Every question is judged twice, A shown as ANSWER 1 and B as ANSWER 2, then swapped, and both
verdicts are mapped back to A/B. When the two orders agree that is the pair's outcome; when they
disagree (the verdict follows the position, not the answer) the pair is a tie and counted as
position-inconsistent. The win rate of B over A is ``(wins_B + 0.5 * ties) / n`` over the scored
pairs, with a seeded percentile-bootstrap CI over pairs. A reply without a readable winner is
re-asked (``reask`` times); after that the pair is *unscored* with its reason, never a tie.
A client that scores labels (the local model) gives each verdict from its next-token
distribution over "1", "2", "tie" (one forward pass, nothing generated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample, duplicate_id
from rag_judge.errors import ConfigError, DataError
from rag_judge.judge.asking import Outcome, ask_sync
from rag_judge.judge.pairwise_result import PairOutcome, PairVerdict, PairwiseResult
from rag_judge.judge.preference import (
    PAIRWISE_SCHEMA,
    PAIRWISE_SHAPE,
    WINNER_LABELS,
    WINNER_PREFIX,
    Order,
    Preference,
    combine,
    outcome_values,
    read_preference,
    to_side,
)
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import FILE_SUFFIXES, Rubric, check_specs, resolve_rubrics
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm import ClientConfig, make_client, make_engine
from rag_judge.llm.base import ChatMessage, CompletionRequest, LLMClient
from rag_judge.llm.cache import CacheOption, cache_file
from rag_judge.llm.providers import check_capabilities
from rag_judge.report.model import Signature
from rag_judge.stats import bootstrap_ci

__all__ = ["PairOutcome", "PairVerdict", "PairwiseJudge", "PairwiseResult"]


class PairwiseJudge(BaseModel):
    """Judges B's answers against A's on one rubric, in both orders (default: offline stub).

    ``rubric``: a built-in name, a ``.yaml`` rubric file or a Rubric that reads the answer; its
    description and criteria are shown to the judge. ``cache``: SQLite file of completions;
    ``"default"`` (the default) is the judge cache every config shares (``judge.sqlite`` in
    rag-judge's cache folder), so an interrupted or repeated comparison resumes; None: off.
    ``seed`` seeds the judge requests and the bootstrap. Validation checks the shape only;
    ``prepare()`` (called by ``compare``) reads a rubric file and compiles the template.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rubric: str | Rubric = "correctness"
    client: ClientConfig = Field(default_factory=ClientConfig)
    cache: CacheOption = "default"
    reask: int = Field(default=1, ge=0, le=3)
    seed: int = 0
    resamples: int = Field(default=1000, ge=1)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    max_tokens: int = Field(default=512, ge=1)
    template: str = "_pairwise.j2"
    template_dirs: tuple[Path, ...] = ()

    _rubric: Rubric | None = PrivateAttr(default=None)
    _renderer: PromptRenderer | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> PairwiseJudge:
        try:
            check_specs([self.rubric])
            if not (isinstance(self.rubric, str) and self.rubric.endswith(FILE_SUFFIXES)):
                self._pick(resolve_rubrics([self.rubric]))  # no file to read: check it all now
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def _pick(self, found: list[Rubric]) -> Rubric:
        if len(found) != 1:
            raise ConfigError(f"rubric {self.rubric!r} holds {len(found)} rubrics; give one")
        rubric = found[0]
        if "answer" not in rubric.inputs or rubric.per_context:
            raise ConfigError(
                f"rubric '{rubric.name}' cannot compare answers: it reads "
                f"{list(rubric.inputs)}{' per context' if rubric.per_context else ''}; "
                "pairwise judging needs a rubric on the whole answer"
            )
        if not rubric.criteria.strip():
            raise ConfigError(f"rubric '{rubric.name}' has no criteria to show the pairwise judge")
        return rubric.model_copy(update={"template": self.template})

    def prepare(self) -> None:
        """Read the rubric (a file, once) and compile the pairwise template; a problem is a
        ConfigError. Idempotent."""
        if self._renderer is not None:
            return
        rubric = self._pick(resolve_rubrics([self.rubric]))
        renderer = PromptRenderer(self.template_dirs)
        try:
            renderer.load(rubric)
        except PromptError as exc:
            raise ConfigError(str(exc)) from None
        self._rubric, self._renderer = rubric, renderer

    @property
    def resolved_rubric(self) -> Rubric:
        """The rubric, pointed at the pairwise template."""
        self.prepare()
        assert self._rubric is not None
        return self._rubric

    @property
    def renderer(self) -> PromptRenderer:
        self.prepare()
        assert self._renderer is not None
        return self._renderer

    def signature(self, client: LLMClient) -> Signature:
        rubric = self.resolved_rubric
        return Signature(
            name="pairwise_win_rate",
            options={
                "rubric": rubric.name,
                "judge": f"{client.provider}/{client.model}",
                "template": self.renderer.template_hash(rubric),
                "temp": "0",
                "scoring": "distribution" if client.scores_labels else "json",
                "orders": "both",
                "inconsistent": "tie",
                "reask": str(self.reask),
                "version": __version__,
            },
            run={"ci": f"bootstrap-{self.resamples}@{self.confidence:g}", "seed": str(self.seed)},
        )

    def _problem(self, a: Sample, b: Sample) -> str | None:
        """Why the pair cannot be judged, naming the side and field, or None."""
        needs = self.resolved_rubric.inputs
        for label, s in (("A", a), ("B", b)):
            if s.answer is None or not s.answer.strip():
                return f"field 'answer': missing or empty in {label}"
            if "contexts" in needs and not s.contexts:
                return f"field 'contexts': the rubric needs them; none in {label}"
        qa, qb = (a.question or "").strip(), (b.question or "").strip()
        if qa and qb and qa != qb:
            return "field 'question': A and B ask different questions under this id"
        if "question" in needs and not (qa or qb):
            return "field 'question': the rubric needs it; missing in A and B"
        if "references" in needs and not any(r.strip() for r in (*a.references, *b.references)):
            return "field 'references': the rubric needs a reference answer; none in A or B"
        return None

    def _messages(self, a: Sample, b: Sample, order: Order) -> tuple[ChatMessage, ...]:
        rubric = self.resolved_rubric
        # Question and references are the pair's, shown the same in both orders.
        shared = a.model_copy(
            update={
                "question": a.question or b.question,
                "references": a.references
                if any(r.strip() for r in a.references)
                else b.references,
            }
        )
        variables = {
            k: v
            for k, v in sample_variables(rubric, shared).items()
            if k in ("question", "references")
        }
        first, second = (a, b) if order == "AB" else (b, a)
        for n, s in (("1", first), ("2", second)):
            own = sample_variables(rubric, s)
            variables[f"answer_{n}"] = own["answer"]
            if "contexts" in own:
                variables[f"contexts_{n}"] = own["contexts"]
        return self.renderer.render(rubric, variables)

    def _request(self, messages: tuple[ChatMessage, ...], scoring: bool) -> CompletionRequest:
        if scoring:  # the reply's first token is the verdict: read the labels' distribution
            return CompletionRequest(
                messages=(*messages, ChatMessage("assistant", WINNER_PREFIX)),
                temperature=0.0,
                seed=self.seed,
                max_tokens=1,
                score_labels=WINNER_LABELS,
            )
        return CompletionRequest(
            messages=messages,
            temperature=0.0,
            seed=self.seed,
            max_tokens=self.max_tokens,
            json_schema=PAIRWISE_SCHEMA,
        )

    def compare(
        self,
        a_samples: Sequence[Sample],
        b_samples: Sequence[Sample],
        *,
        client: LLMClient | None = None,
        labels: tuple[str, str] = ("A", "B"),
    ) -> PairwiseResult:
        """Judge every question both variants answered. ``client`` overrides the configured
        one; ``labels`` name A and B in the outputs (e.g. their file names)."""
        self.prepare()
        a_by_id, b_by_id = _by_id(a_samples, "A"), _by_id(b_samples, "B")
        ids = [i for i in a_by_id if i in b_by_id]
        judge = check_capabilities(client) if client is not None else make_client(self.client)
        pairs = [PairOutcome(i, None, None, None, []) for i in ids]
        calls: list[tuple[int, Order]] = []
        requests: list[CompletionRequest] = []
        for p, sid in enumerate(ids):
            a, b = a_by_id[sid], b_by_id[sid]
            problem = self._problem(a, b)
            orders: tuple[Order, Order] = ("AB", "BA")
            try:
                built = [] if problem else [(o, self._messages(a, b, o)) for o in orders]
            except PromptError as exc:
                problem = str(exc)
            if problem:
                pairs[p].reason = problem
                continue
            for order, messages in built:
                calls.append((p, order))
                requests.append(self._request(messages, judge.scores_labels))
        outcomes, usage = ask_sync(
            lambda: make_engine(self.client, cache=cache_file(self.cache), client=judge),
            requests,
            read_preference,
            shape=PAIRWISE_SHAPE,
            reask=self.reask,
            label="pairwise",
        )
        for (p, order), outcome in zip(calls, outcomes, strict=True):
            pairs[p].verdicts.append(_verdict(order, outcome))
        for pair in pairs:
            _decide(pair)
        values = outcome_values([p.outcome for p in pairs if p.outcome is not None])
        low, high = bootstrap_ci(
            values, resamples=self.resamples, confidence=self.confidence, seed=self.seed
        )
        return PairwiseResult(
            rubric=self.resolved_rubric.name,
            signature=self.signature(judge),
            labels=labels,
            pairs=pairs,
            only_a=[i for i in a_by_id if i not in b_by_id],
            only_b=[i for i in b_by_id if i not in a_by_id],
            win_rate=math.fsum(values) / len(values) if len(values) else None,
            ci=(low, high),
            resamples=self.resamples,
            confidence=self.confidence,
            seed=self.seed,
            usage=usage,
        )


def _by_id(samples: Sequence[Sample], label: str) -> dict[str, Sample]:
    dup = duplicate_id(s.id for s in samples)
    if dup is not None:
        raise DataError(f"{label}: sample id {dup!r} appears twice; ids must be unique")
    return {s.id: s for s in samples}


def _verdict(order: Order, outcome: Outcome[Preference]) -> PairVerdict:
    verdict = PairVerdict(
        order=order, raw=outcome.raw, attempts=outcome.attempts, cached=outcome.cached
    )
    found = outcome.result
    if isinstance(found, Preference):
        verdict.winner, verdict.reason, verdict.probs = found.winner, found.reason, found.probs
        verdict.preferred = to_side(found.winner, order)
    elif isinstance(found, Unscored):
        verdict.reason = f"unscored: {found.reason}"
    else:
        verdict.reason = f"judge call failed: {found}"
    return verdict


def _decide(pair: PairOutcome) -> None:
    if pair.reason is not None:
        return
    failed = [v for v in pair.verdicts if v.preferred is None]
    if failed:
        pair.reason = "; ".join(f"order {v.order}: {v.reason}" for v in failed)
        return
    ab, ba = (v.preferred for v in sorted(pair.verdicts, key=lambda v: v.order))
    assert ab is not None and ba is not None
    pair.outcome, pair.consistent = combine(ab, ba)
