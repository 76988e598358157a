"""Tool-call metrics of a conversation (``type: tools``): an agent's tool calls against the
ones its sample expects, through the pure kernels of :mod:`rag_judge.metrics.trajectory`.

Each entry of ``expected_tools`` is checked on its own: one naming a ``turn`` against that
turn's calls, one without against every call of the conversation in order. A sample's value
combines its entries: ``trajectory_match`` is 1 only when every entry matches; the ratios are
pooled over the entries (summed numerators over summed denominators). A ratio with nothing to
divide by does not apply to the sample (``not_applicable``, with the reason), never a silent
0 or 1. With ``args: judge`` a judge decides whether two calls' arguments are equivalent
(:mod:`rag_judge.judge.arguments`). The rules and worked examples are in
docs/conversations.md ("The tools evaluator", "Judged arguments").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from rag_judge._async import run_sync
from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import DryRun, Evaluator, EvaluatorRun, Final, pick
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.evaluators.tool_scores import (
    JUDGED,
    STEPS,
    TOOLS_ARGS,
    TOOLS_METRICS,
    ToolsArgs,
    entry_policies,
    pairs_to_ask,
    tool_scores,
)
from rag_judge.judge.arguments import ArgsPair, ArgumentsAsk, Found
from rag_judge.judge.settings import JUDGE_KEYS, Judge, flat_judge, judge_keys, local_cache
from rag_judge.llm.base import LLMClient
from rag_judge.llm.providers import no_calls
from rag_judge.metrics.trajectory import POLICIES, Policy, policy_name
from rag_judge.report.model import Direction, Failure, MetricInfo, MetricKind, Signature

__all__ = ["TOOLS_ARGS", "TOOLS_METRICS", "ToolsEvaluator", "ToolsRun", "tool_scores"]

# The signature's order before any entry is read: each entry's own.
ENTRY = "entry"


class ToolsEvaluator(Evaluator):
    """Tool selection precision and recall, trajectory match, argument match and steps to
    answer, per sample (a conversation, or a single-turn sample).

    ``order``: a match policy for every entry (default: each entry's own ``order``).
    ``args``: how the arguments of two calls of one tool compare; an expected call that names
    no arguments takes any. ``args: judge`` asks a judge (its keys ``client``, ``cache``,
    ``temperature``, ``seed``, ``reask``, ``max_tokens`` as for ``type: judge``; the default
    is the offline stub), and only then may the judge's keys be given."""

    type: Literal["tools"] = "tools"
    kind: ClassVar[MetricKind] = MetricKind.TOOLS
    metrics: tuple[str, ...] = Field(default=TOOLS_METRICS, min_length=1)
    order: Policy | None = None
    args: ToolsArgs = "exact"
    # None unless args is judge, and then left out of a dump: configs without it dump as before.
    judge: Judge | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="wrap")
    @classmethod
    def _judge_keys(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        if isinstance(data, Mapping):
            given = [k for k in (*JUDGE_KEYS, "judge") if k in data]
            judged = data.get("args") == "judge"
            if given and not judged:
                raise ValueError(f"{given[0]!r} is a judge setting: it needs args: judge")
            if judged and not given:
                data = {**data, "judge": Judge()}
        return judge_keys(data, Judge(), handler)

    @model_serializer(mode="wrap")
    def _flat(self, handler: Callable[[Any], Any]) -> Any:
        return flat_judge(handler(self))

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return pick("tools metric", value, TOOLS_METRICS)

    @field_validator("order", mode="before")
    @classmethod
    def _known_order(cls, value: Any) -> Any:
        # Hyphens and the alias any-order, as the entries' own order takes them.
        return policy_name(value) if isinstance(value, str) else value

    @field_validator("args", mode="before")
    @classmethod
    def _known_args(cls, value: Any) -> Any:
        return pick("tools args mode", (value,), TOOLS_ARGS)[0] if isinstance(value, str) else value

    @classmethod
    def resolve_paths(cls, raw: dict[str, Any], base: Path) -> dict[str, Any]:
        """A judge's cache file named in a config is relative to its folder."""
        local_cache(raw, base)
        return raw

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def metric_info(self, metric: str) -> MetricInfo:
        if metric == STEPS:
            # Fewer steps is no better when a needed lookup was skipped: a gate on it states
            # its own direction through a threshold.
            return MetricInfo(kind=self.kind, scale=(0.0, None), direction=Direction.NEUTRAL)
        return MetricInfo(kind=self.kind)

    def signature(self, metric: str) -> Signature:
        return self.signatures()[metric]

    def signatures(self) -> dict[str, Signature]:
        # One judge session for every metric: opening one makes a client.
        asker, policies = self.asker(None), (self.order,) if self.order else ()
        return {m: self.signed(m, policies, asker) for m in self.metric_names()}

    def signed(
        self, metric: str, policies: Sequence[str], asker: ArgumentsAsk | None = None
    ) -> Signature:
        """``metric``'s signature, given the match policies its entries were read with, and
        the judge of the arguments (``args: judge``), which signs the metrics it decides."""
        options: dict[str, str] = {}
        if metric == "trajectory_match":
            used = [p for p in POLICIES if p in policies]
            options |= {"order": "+".join(used) or ENTRY, "args": self.args, "entries": "all"}
        elif metric == "argument_match":
            options |= {"args": self.args, "entries": "pooled"}
        elif metric == STEPS:
            options["turns"] = "sum"
        else:
            options |= {"names": "multiset", "entries": "pooled"}
        if asker is None or metric not in JUDGED:
            return Signature(name=metric, options={**options, "version": __version__})
        options |= asker.options()
        return Signature(name=metric, options={**options, "version": __version__},
                         judged_by=(asker.session.name,))  # fmt: skip

    def asker(self, client: LLMClient | None) -> ArgumentsAsk | None:
        """The judge of the arguments over ``client`` (else the configured one); None unless
        ``args: judge``."""
        return ArgumentsAsk(self.judge.open(client)) if self.judge is not None else None

    def wants_gpu(self) -> bool:
        return self.judge is not None and self.judge.client.provider == "local"

    def for_shard(self, shards: int, k: int) -> ToolsEvaluator:
        if self.judge is None:
            return self
        return self.model_copy(update={"judge": self.judge.divided(shards, k)})

    def prepare(self, *, client: LLMClient | None = None) -> ToolsRun:
        """With ``args: judge``, check the client config (an API key in the environment;
        nothing is called) and compile the prompt; ``client`` overrides the configured one."""
        if self.judge is not None:
            self.judge.check()
        return ToolsRun(self, self.asker(client))

    def dry_run(
        self, samples: Sequence[Sample], *, client: LLMClient | None = None
    ) -> DryRun | None:
        """What ``args: judge`` would send, spending nothing: one request per distinct pair
        of calls whose arguments differ. Samples without ``expected_tools`` are skipped. None
        for the other modes, which call no model."""
        if self.judge is None:
            return None
        with no_calls():
            self.judge.check()
            asker = self.asker(client)
            assert asker is not None
            pairs = pairs_to_ask(samples, self.order, self.metrics)
            estimate = asker.session.estimate([asker.request(p) for p in pairs])
        skipped = sum(not s.expected_tools for s in samples)
        return DryRun(prompts=len(pairs), skipped=skipped, **estimate)


class ToolsRun(EvaluatorRun):
    """A run of :class:`ToolsEvaluator`: each sample's outcome as values or failures, and the
    match policies its entries were read with, which ``trajectory_match``'s signature says."""

    evaluator: ToolsEvaluator

    def __init__(self, evaluator: ToolsEvaluator, asker: ArgumentsAsk | None) -> None:
        super().__init__(evaluator)
        self._policies: set[str] = set()
        self.asker = asker
        # Each pair is asked once per run; a later chunk reads the verdict found here.
        self.verdicts: dict[ArgsPair, Found] = {}

    def signatures(self) -> dict[str, Signature]:
        ev = self.evaluator
        policies = (ev.order,) if ev.order else ()
        return {m: ev.signed(m, policies, self.asker) for m in ev.metric_names()}

    def evaluate_chunks(
        self, chunks: Iterable[Sequence[Sample]], emit: Callable[[EvaluatorResult], None]
    ) -> Final:
        """Without a judge, each chunk as the base class scores it. With one, each chunk's
        new pairs are asked first, over one engine for the run (one scheduler, rate limit
        and cache), then the chunk is scored."""
        asker = self.asker
        if asker is None:
            return super().evaluate_chunks(chunks, emit)
        ev = self.evaluator

        async def run() -> Final:
            async with asker.session.engine() as engine:
                for samples in chunks:
                    new = [
                        p
                        for p in pairs_to_ask(samples, ev.order, ev.metrics)
                        if p not in self.verdicts
                    ]
                    self.verdicts |= await asker.ask(engine, new)
                    emit(self.evaluate(samples))
            return replace(self.finish(), usage=engine.usage.model_copy())

        return run_sync(run())

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        ev = self.evaluator
        names = ev.metric_names()
        result = EvaluatorResult.empty(len(samples), self.signatures())
        policies: set[str] = set()
        verdicts = self.verdicts if self.asker is not None else None
        for i, sample in enumerate(samples):
            scores = tool_scores(sample, names, order=ev.order, args=ev.args, verdicts=verdicts)
            for metric, outcome in scores.items():
                if isinstance(outcome, Failure):
                    result.fail(i, outcome, [metric])
                else:
                    result.scores[metric][i] = outcome
            if isinstance(scores.get("trajectory_match"), float):
                policies |= entry_policies(sample, ev.order)
        self._policies |= policies
        for metric in names:
            result.signatures[metric] = ev.signed(metric, sorted(policies), self.asker)
        return result

    def finish(self) -> Final:
        """The signatures over the whole run: every policy the scored entries were read with."""
        ev, asker = self.evaluator, self.asker
        policies = sorted(self._policies)
        return Final(signatures={m: ev.signed(m, policies, asker) for m in ev.metric_names()})
