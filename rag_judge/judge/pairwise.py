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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample, duplicate_id
from rag_judge.data.units import turn_samples, unit_of
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
from rag_judge.judge.prompts import PromptError, PromptRenderer, compiled, sample_variables
from rag_judge.judge.rubrics import FILE_SUFFIXES, Rubric, check_specs, resolve_rubrics
from rag_judge.judge.settings import Judge, JudgeSession, flat_judge, judge_keys
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import ChatMessage, CompletionRequest, LLMClient
from rag_judge.report.model import Failure, FailureKind, Signature
from rag_judge.stats import bootstrap_ci, clustered_bootstrap_ci

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
    judge: Judge = Field(default_factory=Judge)
    seed: int = 0
    resamples: int = Field(default=1000, ge=1)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    template: str = "_pairwise.j2"
    template_dirs: tuple[Path, ...] = ()
    # ``turn``: judge each turn of a conversation on its own (paired by conversation id and
    # turn index), the win rate's interval resampling conversations.
    level: Literal["conversation", "turn"] = "conversation"

    @model_validator(mode="wrap")
    @classmethod
    def _judge_keys(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        # Its own ``seed`` seeds the requests and the bootstrap; the verdict is asked at 0.
        return judge_keys(data, Judge(), handler, keys=_KEYS)

    @model_serializer(mode="wrap")
    def _flat(self, handler: Callable[[Any], Any]) -> Any:
        dumped = handler(self)
        if isinstance(dumped, dict) and isinstance(dumped.get("judge"), dict):
            dumped["judge"] = {k: v for k, v in dumped["judge"].items() if k in _KEYS}
        return flat_judge(dumped)

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

    def prepare(self) -> PreparedPair:
        """Read the rubric (a file) and compile the pairwise template; a problem is a
        ConfigError."""
        rubric = self._pick(resolve_rubrics([self.rubric]))
        return PreparedPair(rubric, compiled([rubric], self.template_dirs))

    def signature(self, client: LLMClient, prepared: PreparedPair | None = None) -> Signature:
        rubric, renderer = prepared or self.prepare()
        session = self.judge.open(client)
        return Signature(
            name="pairwise_win_rate",
            options={
                "rubric": rubric.name,
                "judge": session.name.text,
                "template": renderer.template_hash(rubric),
                "temp": "0",
                "scoring": "distribution" if client.scores_labels else "json",
                "orders": "both",
                "inconsistent": "tie",
                "reask": str(self.judge.reask),
                **({"level": "turn"} if self.level == "turn" else {}),
                "version": __version__,
            },
            run={
                "ci": f"bootstrap-{self.resamples}@{self.confidence:g}",
                "seed": str(self.seed),
                **({"cluster": "conversation"} if self.level == "turn" else {}),
            },
            judged_by=(session.name,),
        )

    def _problem(self, rubric: Rubric, a: Sample, b: Sample) -> str | None:
        """Why the pair cannot be judged, naming the side and field, or None."""
        needs = rubric.inputs
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
        self, prepared: PreparedPair, a: Sample, b: Sample, order: Order
    ) -> tuple[ChatMessage, ...]:
        rubric, renderer = prepared
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

    def _request(
        self, session: JudgeSession, messages: tuple[ChatMessage, ...]
    ) -> CompletionRequest:
        if session.client.scores_labels:  # the reply's first token is the verdict
            return session.judge.request(
                (*messages, ChatMessage("assistant", WINNER_PREFIX)),
                None,
                temperature=0.0,
                seed=self.seed,
                max_tokens=1,
                score_labels=WINNER_LABELS,
            )
        return session.judge.request(messages, PAIRWISE_SCHEMA, temperature=0.0, seed=self.seed)

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
        prepared = self.prepare()
        if self.level == "turn":  # each turn a sample of its own, id <conversation>#t<turn>
            a_samples = [u for s in a_samples for u in turn_samples(s)]
            b_samples = [u for s in b_samples for u in turn_samples(s)]
        a_by_id, b_by_id = _by_id(a_samples, "A"), _by_id(b_samples, "B")
        ids = [i for i in a_by_id if i in b_by_id]
        session = self.judge.open(client)
        pairs = [PairOutcome(i, None, None, None, []) for i in ids]
        calls: list[tuple[int, Order]] = []
        requests: list[CompletionRequest] = []
        for p, sid in enumerate(ids):
            a, b = a_by_id[sid], b_by_id[sid]
            problem = self._problem(prepared.rubric, a, b)
            orders: tuple[Order, Order] = ("AB", "BA")
            try:
                built = [] if problem else [(o, self._messages(prepared, a, b, o)) for o in orders]
            except PromptError as exc:
                problem = str(exc)
            if problem:
                pairs[p].reason = problem
                continue
            for order, messages in built:
                calls.append((p, order))
                requests.append(self._request(session, messages))
        outcomes, usage = ask_sync(
            session.engine,
            requests,
            read_preference,
            shape=PAIRWISE_SHAPE,
            reask=self.judge.reask,
            label="pairwise",
        )
        for (p, order), outcome in zip(calls, outcomes, strict=True):
            pairs[p].verdicts.append(_verdict(order, outcome))
        for pair in pairs:
            _decide(pair)
        decided = [p for p in pairs if p.outcome is not None]
        values = outcome_values([p.outcome for p in decided if p.outcome is not None])
        clusters = [unit_of(a_by_id[p.id]).conversation for p in decided]
        low, high = (
            clustered_bootstrap_ci(
                values, clusters, resamples=self.resamples, confidence=self.confidence,
                seed=self.seed,
            )
            if self.level == "turn"
            else bootstrap_ci(
                values, resamples=self.resamples, confidence=self.confidence, seed=self.seed
            )
        )  # fmt: skip
        return PairwiseResult(
            rubric=prepared.rubric.name,
            signature=self.signature(session.client, prepared),
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


class PreparedPair(NamedTuple):
    """What ``prepare`` read: the rubric, pointed at the pairwise template, and its template."""

    rubric: Rubric
    renderer: PromptRenderer


_KEYS = ("client", "cache", "reask", "max_tokens")  # the judge keys pairwise takes


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
    else:
        if isinstance(found, Unscored):
            verdict.failure = Failure(kind=FailureKind.UNSCORED, message=found.reason)
        else:
            verdict.failure = Failure(message=f"judge call failed: {found}")
        verdict.reason = verdict.failure.text()
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
