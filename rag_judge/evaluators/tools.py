"""Tool-call metrics of a conversation (``type: tools``): an agent's tool calls against the
ones its sample expects, through the pure kernels of :mod:`rag_judge.metrics.trajectory`.

Each entry of ``expected_tools`` is checked on its own: one naming a ``turn`` against that
turn's calls, one without against every call of the conversation in order. A sample's value
combines its entries: ``trajectory_match`` is 1 only when every entry matches; the ratios are
pooled over the entries (summed numerators over summed denominators). A ratio with nothing to
divide by does not apply to the sample (``not_applicable``, with the reason), never a silent
0 or 1. The rules and worked examples are in docs/conversations.md ("The tools evaluator").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from rag_judge._version import __version__
from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import Evaluator, EvaluatorRun, Final, missing_fields, pick
from rag_judge.evaluators.result import EvaluatorResult
from rag_judge.metrics.trajectory import (
    ARGS_MODES,
    POLICIES,
    ArgsMatcher,
    ArgsMode,
    Policy,
    ToolCall,
    argument_match,
    policy_name,
    steps_to_answer,
    tool_precision,
    tool_recall,
    trajectory_match,
)
from rag_judge.report.model import (
    Direction,
    Failure,
    FailureKind,
    MetricInfo,
    MetricKind,
    Signature,
)

__all__ = ["TOOLS_METRICS", "ToolsEvaluator", "ToolsRun", "tool_scores"]

TOOLS_METRICS = (
    "trajectory_match",
    "tool_precision",
    "tool_recall",
    "argument_match",
    "steps_to_answer",
)
STEPS = "steps_to_answer"
# An expected call that names no arguments takes any: its arguments are this object.
ANY_ARGS: Mapping[str, Any] = MappingProxyType({})
# The signature's order before any entry is read: each entry's own.
ENTRY = "entry"

Outcome = float | Failure


@dataclass(frozen=True)
class _Entry:
    """One entry of ``expected_tools`` against the calls it covers."""

    output: tuple[ToolCall, ...]
    reference: tuple[ToolCall, ...]
    policy: Policy


class ToolsEvaluator(Evaluator):
    """Tool selection precision and recall, trajectory match, argument match and steps to
    answer, per sample (a conversation, or a single-turn sample).

    ``order``: a match policy for every entry (default: each entry's own ``order``).
    ``args``: how the arguments of two calls of one tool compare; an expected call that names
    no arguments takes any."""

    type: Literal["tools"] = "tools"
    kind: ClassVar[MetricKind] = MetricKind.TOOLS
    metrics: tuple[str, ...] = Field(default=TOOLS_METRICS, min_length=1)
    order: Policy | None = None
    args: ArgsMode = "exact"

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
        return pick("tools args mode", (value,), ARGS_MODES)[0] if isinstance(value, str) else value

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def metric_info(self, metric: str) -> MetricInfo:
        if metric == STEPS:
            # Fewer steps is no better when a needed lookup was skipped: a gate on it states
            # its own direction through a threshold.
            return MetricInfo(kind=self.kind, scale=(0.0, None), direction=Direction.NEUTRAL)
        return MetricInfo(kind=self.kind)

    def signature(self, metric: str) -> Signature:
        return self.signed(metric, (self.order,) if self.order else ())

    def signed(self, metric: str, policies: Sequence[str]) -> Signature:
        """``metric``'s signature, given the match policies its entries were read with."""
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
        return Signature(name=metric, options={**options, "version": __version__})

    def prepare(self) -> ToolsRun:
        return ToolsRun(self)


class ToolsRun(EvaluatorRun):
    """A run of :class:`ToolsEvaluator`: each sample's outcome as values or failures, and the
    match policies its entries were read with, which ``trajectory_match``'s signature says."""

    evaluator: ToolsEvaluator

    def __init__(self, evaluator: ToolsEvaluator) -> None:
        super().__init__(evaluator)
        self._policies: set[str] = set()

    def evaluate(self, samples: Sequence[Sample]) -> EvaluatorResult:
        ev = self.evaluator
        names = ev.metric_names()
        result = EvaluatorResult.empty(len(samples), self.signatures())
        policies: set[str] = set()
        for i, sample in enumerate(samples):
            scores = tool_scores(sample, names, order=ev.order, args=ev.args)
            for metric, outcome in scores.items():
                if isinstance(outcome, Failure):
                    result.fail(i, outcome, [metric])
                else:
                    result.scores[metric][i] = outcome
            if isinstance(scores.get("trajectory_match"), float):
                policies |= {e.policy for e in _entries(sample, ev.order)}
        self._policies |= policies
        for metric in names:
            result.signatures[metric] = ev.signed(metric, sorted(policies))
        return result

    def finish(self) -> Final:
        """The signatures over the whole run: every policy the scored entries were read with."""
        ev = self.evaluator
        policies = sorted(self._policies)
        return Final(signatures={m: ev.signed(m, policies) for m in ev.metric_names()})


def tool_scores(
    sample: Sample, metrics: Sequence[str], *, order: Policy | None = None, args: ArgsMode = "exact"
) -> dict[str, Outcome]:
    """Each of ``metrics`` for one sample: a value, or the failure that says why there is
    none (a missing input, or ``not_applicable`` where a ratio has nothing to divide by)."""
    out: dict[str, Outcome] = {}
    if STEPS in metrics:
        out[STEPS] = _steps(sample)
    compared = [m for m in metrics if m != STEPS]
    if not compared:
        return out
    missing = missing_fields(sample, ("expected_tools",))
    if missing:
        lacks = Failure(kind=FailureKind.MISSING_INPUT, message="; ".join(missing))
        out |= dict.fromkeys(compared, lacks)
        return {m: out[m] for m in metrics}
    entries = _entries(sample, order)
    fits = _fits(args)
    calls, expected = _pooled(entries)
    overrides = dict.fromkeys({c.name for e in entries for c in e.reference}, fits)
    values: dict[str, float | None] = {
        "trajectory_match": float(
            all(
                trajectory_match(e.output, e.reference, e.policy, args=args, overrides=overrides)
                for e in entries
            )
        ),
        "tool_precision": tool_precision(calls, expected),
        "tool_recall": tool_recall(calls, expected),
        "argument_match": _argument_match(calls, expected, fits),
    }
    reasons = {
        "tool_precision": "no tool was called (precision divides by the calls made)",
        "tool_recall": "no tool call is expected (recall divides by the expected calls)",
        "argument_match": _no_arguments(calls, expected),
    }
    for metric in compared:
        value = values[metric]
        out[metric] = value if value is not None else _not_applicable(reasons[metric])
    return {m: out[m] for m in metrics}


def _entries(sample: Sample, order: Policy | None) -> list[_Entry]:
    """Each expected-tools entry with the calls it covers, under ``order`` or its own."""
    turns = sample.conversation_turns()
    out = []
    for entry in sample.expected_tools or ():
        covered = turns if entry.turn is None else (turns[entry.turn],)
        output = tuple(ToolCall(c.tool, c.arguments) for t in covered for c in t.tool_calls())
        reference = tuple(
            ToolCall(c.tool, ANY_ARGS if c.arguments is None else c.arguments) for c in entry.calls
        )
        out.append(_Entry(output, reference, order or entry.order))
    return out


def _fits(args: ArgsMode) -> ArgsMatcher:
    """``args``'s rule for two calls' arguments, except that an expected call that names no
    arguments takes any."""

    def fits(output: Mapping[str, Any], reference: Mapping[str, Any]) -> bool:
        if reference is ANY_ARGS:
            return True
        one, other = (ToolCall("", output),), (ToolCall("", reference),)
        return trajectory_match(one, other, "strict", args=args)

    return fits


def _pooled(entries: Sequence[_Entry]) -> tuple[list[ToolCall], list[ToolCall]]:
    """Every entry's calls as one trajectory, each entry's tools renamed apart (``0:search``,
    ``1:search``), so that a call pairs only within its entry and a kernel's ratio over the
    whole is the pooled ratio: summed numerators over summed denominators."""
    calls, expected = [], []
    for k, entry in enumerate(entries):
        calls += [ToolCall(f"{k}:{c.name}", c.arguments) for c in entry.output]
        expected += [ToolCall(f"{k}:{c.name}", c.arguments) for c in entry.reference]
    return calls, expected


def _argument_match(
    calls: Sequence[ToolCall], expected: Sequence[ToolCall], fits: ArgsMatcher
) -> float | None:
    # Arguments that no expected call states cannot be checked: 1 would be a silent 1.
    if all(c.arguments is ANY_ARGS for c in expected):
        return None
    overrides = dict.fromkeys({c.name for c in expected}, fits)
    return argument_match(calls, expected, overrides=overrides)


def _no_arguments(calls: Sequence[ToolCall], expected: Sequence[ToolCall]) -> str:
    """Why argument_match has nothing to divide by: no pair of calls, or no stated arguments."""
    if not expected:
        return "no tool call is expected"
    if tool_precision(calls, expected) in (None, 0.0):
        return "no call was made to an expected tool"
    return "no expected call states its arguments"


def _steps(sample: Sample) -> Outcome:
    """The steps of every turn (a single-turn sample's one retrieval counts 1), or a missing
    input naming the turns that have no answer."""
    turns = sample.conversation_turns()
    counts = [steps_to_answer(t.steps, answered=t.answer is not None) for t in turns]
    unanswered = [str(i) for i, n in enumerate(counts) if n is None]
    if not unanswered:
        return float(sum(n for n in counts if n is not None))
    if not sample.is_conversation():
        message = "; ".join(missing_fields(sample, ("answer",)))
    else:
        turn = "turn" if len(unanswered) == 1 else "turns"
        message = f"no answer in {turn} {', '.join(unanswered)} (turns count from 0)"
    return Failure(kind=FailureKind.MISSING_INPUT, message=message)


def _not_applicable(message: str) -> Failure:
    return Failure(kind=FailureKind.NOT_APPLICABLE, message=message)
