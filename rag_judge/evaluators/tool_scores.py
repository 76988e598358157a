"""One sample's tool-call metrics (the tools evaluator's scoring), through the pure kernels of
:mod:`rag_judge.metrics.trajectory`.

Each entry of ``expected_tools`` is checked on its own: one naming a ``turn`` against that
turn's calls, one without against every call of the conversation in order. A sample's value
combines its entries: ``trajectory_match`` is 1 only when every entry matches; the ratios are
pooled over the entries (summed numerators over summed denominators). A ratio with nothing to
divide by does not apply to the sample (``not_applicable``, with the reason), never a silent
0 or 1.

With ``args: judge`` two calls' arguments match when they are equal as JSON or the judge
found them equivalent. A pair the judge gave no verdict for is read both ways; a metric whose
value differs between the two readings fails with the judge's reason. The rules are in
docs/conversations.md ("The tools evaluator", "Judged arguments").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from rag_judge.data.sample import Sample
from rag_judge.evaluators.base import missing_fields
from rag_judge.judge.arguments import ArgsPair, ArgumentVerdict, Found, verdict_failure
from rag_judge.metrics.trajectory import (
    ARGS_MODES,
    ArgsMatcher,
    ArgsMode,
    Policy,
    ToolCall,
    argument_match,
    steps_to_answer,
    tool_precision,
    tool_recall,
    trajectory_match,
)
from rag_judge.report.model import Failure, FailureKind

__all__ = [
    "JUDGED",
    "STEPS",
    "TOOLS_ARGS",
    "TOOLS_METRICS",
    "Outcome",
    "ToolsArgs",
    "entry_policies",
    "pairs_to_ask",
    "tool_scores",
]

TOOLS_METRICS = (
    "trajectory_match",
    "tool_precision",
    "tool_recall",
    "argument_match",
    "steps_to_answer",
)
STEPS = "steps_to_answer"
# args: the kernel's modes, or a judge's verdict on each pair of calls.
ToolsArgs = ArgsMode | Literal["judge"]
TOOLS_ARGS: tuple[str, ...] = (*ARGS_MODES, "judge")
# The metrics whose values read the arguments: only they depend on the judge.
JUDGED = ("trajectory_match", "argument_match")
# An expected call that names no arguments takes any: its arguments are this object.
ANY_ARGS: Mapping[str, Any] = MappingProxyType({})

Outcome = float | Failure
# A tool's argument matcher, by the tool's name.
Matchers = Callable[[str], ArgsMatcher]


@dataclass(frozen=True)
class _Entry:
    """One entry of ``expected_tools`` against the calls it covers."""

    output: tuple[ToolCall, ...]
    reference: tuple[ToolCall, ...]
    policy: Policy


def tool_scores(
    sample: Sample,
    metrics: Sequence[str],
    *,
    order: Policy | None = None,
    args: ToolsArgs = "exact",
    verdicts: Mapping[ArgsPair, Found] | None = None,
) -> dict[str, Outcome]:
    """Each of ``metrics`` for one sample: a value, or the failure that says why there is
    none (a missing input, ``not_applicable`` where a ratio has nothing to divide by, or
    the judge's failure). ``verdicts``: the judge's, with ``args: judge``."""
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
    calls, expected = _pooled(entries)
    failed: dict[str, Failure] = {}
    if args == "judge":
        low, high = _Judged(verdicts or {}, False), _Judged(verdicts or {}, True)
        values = _values(entries, calls, expected, low.fits)
        # The kernels are monotone in the pairs that match: when reading every unknown pair
        # as a mismatch and as a match give one value, no verdict could change it.
        upper = _values(entries, calls, expected, high.fits)
        failed = {
            m: low.failure
            for m in JUDGED
            if m in compared and values[m] != upper[m] and low.failure
        }
    else:
        values = _values(entries, calls, expected, _fits(args))
    reasons = {
        "tool_precision": "no tool was called (precision divides by the calls made)",
        "tool_recall": "no tool call is expected (recall divides by the expected calls)",
        "argument_match": _no_arguments(calls, expected),
    }
    for metric in compared:
        value = values[metric]
        out[metric] = value if value is not None else _not_applicable(reasons[metric])
    return {m: out[m] for m in metrics} | failed


def pairs_to_ask(
    samples: Iterable[Sample], order: Policy | None, metrics: Sequence[str]
) -> list[ArgsPair]:
    """The distinct pairs a judge is asked about, sorted: a call and an expected call of the
    same tool in one entry, the expected call stating arguments that differ as JSON. None
    when no metric reads arguments."""
    if not set(JUDGED) & set(metrics):
        return []
    found = {
        ArgsPair.of(ref.name, out.arguments, ref.arguments)
        for sample in samples
        for entry in _entries(sample, order)
        for ref in entry.reference
        if ref.arguments is not ANY_ARGS
        for out in entry.output
        if out.name == ref.name
    }
    return sorted(p for p in found if not p.equal)


def entry_policies(sample: Sample, order: Policy | None) -> set[str]:
    """The match policies the sample's entries are read with."""
    return {e.policy for e in _entries(sample, order)}


class _Judged:
    """The judge's verdicts as argument matchers. A pair without a verdict reads as
    ``unknown``; the first such pair's failure is kept."""

    def __init__(self, verdicts: Mapping[ArgsPair, Found], unknown: bool) -> None:
        self.verdicts, self.unknown = verdicts, unknown
        self.failure: Failure | None = None

    def fits(self, tool: str) -> ArgsMatcher:
        def fits(output: Mapping[str, Any], reference: Mapping[str, Any]) -> bool:
            if reference is ANY_ARGS:
                return True
            pair = ArgsPair.of(tool, output, reference)
            if pair.equal:
                return True
            found = self.verdicts.get(pair)
            if isinstance(found, ArgumentVerdict):
                return found.equivalent
            self.failure = self.failure or verdict_failure(found, tool)
            return self.unknown

        return fits


def _values(
    entries: Sequence[_Entry],
    calls: Sequence[ToolCall],
    expected: Sequence[ToolCall],
    fits: Matchers,
) -> dict[str, float | None]:
    """The four compared metrics' values, arguments matched by ``fits``."""

    def matched(entry: _Entry) -> bool:
        overrides = {name: fits(name) for name in {c.name for c in entry.reference}}
        return trajectory_match(entry.output, entry.reference, entry.policy, overrides=overrides)

    return {
        "trajectory_match": float(all(matched(e) for e in entries)),
        "tool_precision": tool_precision(calls, expected),
        "tool_recall": tool_recall(calls, expected),
        "argument_match": _argument_match(calls, expected, fits),
    }


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


def _fits(args: ArgsMode) -> Matchers:
    """``args``'s rule for two calls' arguments, except that an expected call that names no
    arguments takes any."""

    def fits(output: Mapping[str, Any], reference: Mapping[str, Any]) -> bool:
        if reference is ANY_ARGS:
            return True
        one, other = (ToolCall("", output),), (ToolCall("", reference),)
        return trajectory_match(one, other, "strict", args=args)

    return lambda tool: fits


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
    calls: Sequence[ToolCall], expected: Sequence[ToolCall], fits: Matchers
) -> float | None:
    # Arguments that no expected call states cannot be checked: 1 would be a silent 1.
    if all(c.arguments is ANY_ARGS for c in expected):
        return None
    # A pooled name is "<entry>:<tool>"; the matcher is the tool's.
    overrides = {name: fits(name.partition(":")[2]) for name in {c.name for c in expected}}
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
