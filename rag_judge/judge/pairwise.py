"""Pairwise judging: which of two variants' answers to the same question is better on a rubric.

Every question is judged twice, A shown as ANSWER 1 and B as ANSWER 2, then swapped, and both
verdicts are mapped back to A/B. When the two orders agree that is the pair's outcome; when they
disagree (the verdict follows the position, not the answer) the pair is a tie and counted as
position-inconsistent. The win rate of B over A is ``(wins_B + 0.5 * ties) / n`` over the scored
pairs, with a seeded percentile-bootstrap CI over pairs. A reply without a readable winner is
re-asked (``reask`` times); after that the pair is *unscored* with its reason, never a tie.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError, DataError
from rag_judge.judge.pairwise_result import PairOutcome, PairwiseResult
from rag_judge.judge.preference import (
    PAIRWISE_SCHEMA,
    Order,
    Preference,
    always_tie,
    combine,
    outcome_values,
    pairwise_lexical,
    parse_preference,
    reask_message,
    to_side,
)
from rag_judge.judge.prompts import PromptError, PromptRenderer, sample_variables
from rag_judge.judge.rubrics import Rubric, resolve_rubrics
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm import ClientConfig, make_client, make_engine
from rag_judge.llm.base import ChatMessage, Completion, CompletionRequest, LLMClient, LLMError
from rag_judge.llm.providers.stub import StubClient
from rag_judge.stats import bootstrap_ci

__all__ = ["PairOutcome", "PairwiseJudge", "PairwiseResult"]

# ---- the judge --------------------------------------------------------------------------------


@dataclass
class _Call:
    pair: int
    order: Order
    request: CompletionRequest
    replies: list[Completion] = field(default_factory=list)
    outcome: Preference | Unscored | LLMError | None = None

    def verdict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"order": self.order, "winner": None, "preferred": None}
        if isinstance(self.outcome, Preference):
            out.update(winner=self.outcome.winner, reason=self.outcome.reason)
            out["preferred"] = to_side(self.outcome.winner, self.order)
        elif isinstance(self.outcome, Unscored):
            out["reason"] = f"unscored: {self.outcome.reason}"
        else:
            out["reason"] = f"judge call failed: {self.outcome}"
        out["raw"] = self.replies[-1].text if self.replies else ""
        out["attempts"] = len(self.replies) + isinstance(self.outcome, LLMError)
        out["cached"] = bool(self.replies) and all(c.cached for c in self.replies)
        return out


class PairwiseJudge(BaseModel):
    """Judges B's answers against A's on one rubric, in both orders (default: offline stub).

    ``rubric``: a built-in name, a ``.yaml`` rubric file or a Rubric that reads the answer; its
    description and criteria are shown to the judge. ``cache``: SQLite file of completions.
    ``seed`` seeds the judge requests and the bootstrap.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rubric: str | Rubric = "correctness"
    client: ClientConfig = Field(default_factory=ClientConfig)
    cache: Path | None = None
    reask: int = Field(default=1, ge=0, le=3)
    seed: int = 0
    resamples: int = Field(default=1000, ge=1)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    max_tokens: int = Field(default=512, ge=1)
    template: str = "_pairwise.j2"
    template_dirs: tuple[Path, ...] = ()

    _rubric: Rubric | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> PairwiseJudge:
        try:
            found = resolve_rubrics([self.rubric])
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if len(found) != 1:
            raise ValueError(f"rubric {self.rubric!r} holds {len(found)} rubrics; give one")
        rubric = found[0]
        if "answer" not in rubric.inputs or rubric.per_context:
            raise ValueError(
                f"rubric '{rubric.name}' cannot compare answers: it reads "
                f"{list(rubric.inputs)}{' per context' if rubric.per_context else ''}; "
                "pairwise judging needs a rubric on the whole answer"
            )
        if not rubric.criteria.strip():
            raise ValueError(f"rubric '{rubric.name}' has no criteria to show the pairwise judge")
        self._rubric = rubric.model_copy(update={"template": self.template})
        try:
            PromptRenderer(self.template_dirs).load(self._rubric)
        except PromptError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def resolved_rubric(self) -> Rubric:
        """The rubric, pointed at the pairwise template."""
        assert self._rubric is not None  # set by the validator
        return self._rubric

    def make_client(self) -> LLMClient:
        """The configured client; the stub provider gets the pairwise stub (the scoring stubs
        reply with 1-5 scores, which a pairwise verdict cannot use)."""
        if self.client.provider != "stub":
            return make_client(self.client)
        if self.client.stub == "fixed":
            return StubClient(always_tie, model=self.client.model or "stub-pairwise-tie")
        return StubClient(pairwise_lexical(), model=self.client.model)

    def signature(self, client: LLMClient, renderer: PromptRenderer) -> str:
        rubric = self.resolved_rubric
        return "|".join(
            [
                "pairwise_win_rate",
                f"rubric:{rubric.name}",
                f"judge:{client.provider}/{client.model}",
                f"template:{renderer.template_hash(rubric)}",
                "temp:0",
                "orders:both",
                "inconsistent:tie",
                f"reask:{self.reask}",
                f"version:{__version__}",
                f"ci:bootstrap-{self.resamples}@{self.confidence:g}",
                f"seed:{self.seed}",
            ]
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

    def _messages(
        self, renderer: PromptRenderer, a: Sample, b: Sample, order: Order
    ) -> tuple[ChatMessage, ...]:
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
        return renderer.render(rubric, variables)

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
        a_by_id, b_by_id = _by_id(a_samples, "A"), _by_id(b_samples, "B")
        ids = [i for i in a_by_id if i in b_by_id]
        client = client if client is not None else self.make_client()
        renderer = PromptRenderer(self.template_dirs)
        pairs = [PairOutcome(i, None, None, None, []) for i in ids]
        calls: list[_Call] = []
        for p, sid in enumerate(ids):
            a, b = a_by_id[sid], b_by_id[sid]
            problem = self._problem(a, b)
            orders: tuple[Order, Order] = ("AB", "BA")
            try:
                built = [] if problem else [(o, self._messages(renderer, a, b, o)) for o in orders]
            except PromptError as exc:
                problem = str(exc)
            if problem:
                pairs[p].reason = problem
                continue
            calls += [_Call(p, o, self._request(m)) for o, m in built]
        engine = make_engine(self.client, cache=self.cache, client=client)
        # Every first request of the comparison goes through one run: one scheduler, one cache.
        _settle(calls, engine.run_sync([c.request for c in calls]))
        for _ in range(self.reask):
            pending = [c for c in calls if isinstance(c.outcome, Unscored) and c.replies]
            if not pending:
                break
            followups = [_followup(c) for c in pending]
            _settle(pending, engine.run_sync(followups))
            for c, req in zip(pending, followups):
                c.request = req
        for c in calls:
            pairs[c.pair].verdicts.append(c.verdict())
        for pair in pairs:
            _decide(pair)
        values = outcome_values([p.outcome for p in pairs if p.outcome is not None])
        low, high = bootstrap_ci(
            values, resamples=self.resamples, confidence=self.confidence, seed=self.seed
        )
        return PairwiseResult(
            rubric=self.resolved_rubric.name,
            signature=self.signature(client, renderer),
            labels=labels,
            pairs=pairs,
            only_a=[i for i in a_by_id if i not in b_by_id],
            only_b=[i for i in b_by_id if i not in a_by_id],
            win_rate=math.fsum(values) / len(values) if len(values) else None,
            ci=(low, high),
            resamples=self.resamples,
            confidence=self.confidence,
            seed=self.seed,
            usage=engine.usage.model_dump(),
        )

    def _request(self, messages: tuple[ChatMessage, ...]) -> CompletionRequest:
        return CompletionRequest(
            messages=messages,
            temperature=0.0,
            seed=self.seed,
            max_tokens=self.max_tokens,
            json_schema=PAIRWISE_SCHEMA,
        )


def _by_id(samples: Sequence[Sample], label: str) -> dict[str, Sample]:
    out: dict[str, Sample] = {}
    for s in samples:
        if s.id in out:
            raise DataError(f"{label}: sample id {s.id!r} appears twice; ids must be unique")
        out[s.id] = s
    return out


def _settle(calls: list[_Call], outputs: list[Completion | LLMError]) -> None:
    for call, out in zip(calls, outputs):
        if isinstance(out, LLMError):
            call.outcome = out
        else:
            call.replies.append(out)
            call.outcome = parse_preference(out.text)


def _followup(call: _Call) -> CompletionRequest:
    """The re-ask: the previous exchange, then the parse error quoted back."""
    assert isinstance(call.outcome, Unscored)
    return call.request.followed_by(call.replies[-1].text, reask_message(call.outcome.reason))


def _decide(pair: PairOutcome) -> None:
    if pair.reason is not None:
        return
    failed = [v for v in pair.verdicts if v["preferred"] is None]
    if failed:
        pair.reason = "; ".join(f"order {v['order']}: {v['reason']}" for v in failed)
        return
    ab, ba = (v["preferred"] for v in sorted(pair.verdicts, key=lambda v: v["order"]))
    pair.outcome, pair.consistent = combine(ab, ba)


# ---- command line -----------------------------------------------------------------------------
