"""Tool-call metrics of one trajectory against its reference, as pure functions.

A trajectory is the ordered list of an agent's tool calls (:class:`ToolCall`: a name and its
JSON arguments); the reference is the list the dataset expects. Per trajectory:

- :func:`trajectory_match` under a policy: ``strict``, ``in_order``, ``unordered`` (the
  issue's *any-order*), ``subset`` or ``superset``, with arguments compared by a mode
  (``exact``, ``ignore``, ``subset``, ``superset``) and per-tool overrides, as LangChain's
  agentevals ``create_trajectory_match_evaluator`` defines them (``in_order`` is ours);
- :func:`tool_precision` and :func:`tool_recall`: over tool names as multisets;
- :func:`argument_match`: the share of name-matched calls whose arguments also match;
- :func:`steps_to_answer`: the number of steps taken before the final answer.

A ratio with nothing to divide by is None, never a silent 0 or 1. Aggregation is the
report's job. Definitions, tables and the agentevals correspondence are in
docs/conversations.md ("Tool-call metrics").

Deviations from agentevals (read at commit 946ad15b, python/agentevals/trajectory/):

- Only tool calls are compared. agentevals' ``strict`` also compares the messages' roles
  and count, and treats the parallel calls of one assistant message as unordered. Our steps
  are one flat sequence, so ``strict`` requires the same calls in the same order.
- A call is paired with at most one call of the other side by a maximum bipartite matching.
  agentevals pairs greedily (the first unused call that fits). Both agree when the argument
  comparison is an equivalence (``exact``, ``ignore``, key lists). With ``subset``,
  ``superset`` or a callable, greedy can miss a pairing that exists; we find it.
- A matcher is always called as ``matcher(output_args, reference_args)``. agentevals swaps
  the two in its ``subset`` and ``unordered`` trajectory modes.
- Arguments compare as JSON values: ``true`` differs from ``1`` (Python's ``==`` says they
  are equal), ``1`` equals ``1.0``, a tuple equals a list.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from rag_judge.errors import ConfigError, DataError

__all__ = [
    "ARGS_MODES",
    "POLICIES",
    "ArgsMatcher",
    "ArgsMode",
    "ArgsOverride",
    "Policy",
    "ToolCall",
    "argument_match",
    "canonical_json",
    "policy_name",
    "steps_to_answer",
    "tool_precision",
    "tool_recall",
    "trajectory_match",
]

Policy = Literal["strict", "in_order", "unordered", "subset", "superset"]
ArgsMode = Literal["exact", "ignore", "subset", "superset"]
ArgsMatcher = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
# A mode, a list of dotted key paths compared alone, or a callable (output, reference).
ArgsOverride = ArgsMode | Sequence[str] | ArgsMatcher

POLICIES: tuple[Policy, ...] = get_args(Policy)
ARGS_MODES: tuple[ArgsMode, ...] = get_args(ArgsMode)
_ALIASES: dict[str, Policy] = {"any_order": "unordered"}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolCall:
        """A call whose arguments may be a JSON string, as OpenAI messages carry them.
        An empty string or None is no arguments."""
        if arguments is None or arguments == "":
            return cls(name, {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise DataError(f"tool {name!r}: arguments are not JSON ({exc})") from exc
        if not isinstance(arguments, Mapping):
            raise DataError(f"tool {name!r}: arguments must be a JSON object")
        return cls(name, arguments)


def canonical_json(value: Any) -> str:
    """``value`` as one JSON text: keys sorted, integral floats as integers, tuples as lists.
    Two argument values are equal when their texts are. A value JSON cannot hold is a
    TypeError."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    # bool is an int and is left alone; 2.0 and 2 are one JSON number.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def policy_name(name: str) -> Policy:
    """The policy a config names: hyphens or underscores; ``any-order`` is ``unordered``."""
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in POLICIES:
        choices = ", ".join([*POLICIES, "any_order"])
        raise ConfigError(f"unknown trajectory policy {name!r}: one of {choices}")
    return key


# ---- argument matchers ---------------------------------------------------------------------


def _exact(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    return canonical_json(out) == canonical_json(ref)


def _ignore(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    return True


def _subset(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    # Every argument the agent gave is in the reference, with the same value.
    return all(k in ref and canonical_json(ref[k]) == canonical_json(v) for k, v in out.items())


def _superset(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    return _subset(ref, out)


_MODES: dict[str, ArgsMatcher] = {
    "exact": _exact,
    "ignore": _ignore,
    "subset": _subset,
    "superset": _superset,
}


def _mode(mode: str) -> ArgsMatcher:
    if mode not in _MODES:
        raise ConfigError(f"unknown tool-args match mode {mode!r}: one of {', '.join(ARGS_MODES)}")
    return _MODES[mode]


def _nested(args: Mapping[str, Any], path: str) -> Any:
    # agentevals' get_nested_value: a missing key or a non-object on the way is None.
    current: Any = args
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
        if current is None:
            return None
    return current


def _on_keys(paths: Sequence[str]) -> ArgsMatcher:
    def match(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
        return all(
            canonical_json(_nested(out, p)) == canonical_json(_nested(ref, p)) for p in paths
        )

    return match


def _matchers(
    args: ArgsMode, overrides: Mapping[str, ArgsOverride] | None
) -> Callable[[str], ArgsMatcher]:
    """The argument matcher of each tool name, checked before any call is compared."""
    default = _mode(args)
    table: dict[str, ArgsMatcher] = {}
    for tool, override in (overrides or {}).items():
        # agentevals skips a falsy override (an empty key list): the default mode applies.
        if not override:
            continue
        if isinstance(override, str):
            table[tool] = _mode(override)
        elif callable(override):
            table[tool] = override
        elif isinstance(override, Sequence):
            table[tool] = _on_keys(list(override))
        else:
            raise ConfigError(f"tool-args override of {tool!r}: a mode, key list or callable")
    return lambda name: table.get(name, default)


# ---- pairing ---------------------------------------------------------------------------------


def _edges(
    output: Sequence[ToolCall], reference: Sequence[ToolCall], matcher: Callable[[str], ArgsMatcher]
) -> list[list[int]]:
    """For each reference call, the output calls it may pair with."""
    return [
        [
            i
            for i, out in enumerate(output)
            if out.name == ref.name and matcher(ref.name)(out.arguments, ref.arguments)
        ]
        for ref in reference
    ]


def _matching(edges: list[list[int]], n_out: int) -> int:
    """The size of a maximum matching (augmenting paths found breadth first)."""
    out_to_ref: list[int | None] = [None] * n_out
    ref_to_out: list[int | None] = [None] * len(edges)
    size = 0
    for start in range(len(edges)):
        parent: dict[int, int] = {}  # output call -> the reference call that reached it
        queue, free = [start], None
        for ref in queue:
            for i in edges[ref]:
                if i in parent:
                    continue
                parent[i] = ref
                owner = out_to_ref[i]
                if owner is None:
                    free = i
                    break
                queue.append(owner)
            if free is not None:
                break
        if free is None:
            continue
        at: int | None = free
        while at is not None:  # flip the path back to the start
            ref = parent[at]
            previous = ref_to_out[ref]
            out_to_ref[at], ref_to_out[ref] = ref, at
            at = previous
        size += 1
    return size


def _in_order(
    output: Sequence[ToolCall], reference: Sequence[ToolCall], matcher: Callable[[str], ArgsMatcher]
) -> bool:
    # The earliest fitting output call is always a safe choice for a subsequence.
    pos = 0
    for ref in reference:
        fits = matcher(ref.name)
        while pos < len(output) and not (
            output[pos].name == ref.name and fits(output[pos].arguments, ref.arguments)
        ):
            pos += 1
        if pos == len(output):
            return False
        pos += 1
    return True


# ---- metrics ---------------------------------------------------------------------------------


def trajectory_match(
    output: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    policy: Policy | str = "strict",
    *,
    args: ArgsMode = "exact",
    overrides: Mapping[str, ArgsOverride] | None = None,
) -> bool:
    """Whether ``output`` matches ``reference`` under ``policy`` (True counts 1):

    - ``strict``: the same calls in the same order;
    - ``in_order``: the reference calls appear in the output in order, other calls between;
    - ``unordered``: the same calls in any order (a one-to-one pairing of all calls);
    - ``subset``: every output call pairs with a distinct reference call;
    - ``superset``: every reference call pairs with a distinct output call.

    Two calls pair when their names are equal and their arguments match under ``args``, or
    under ``overrides[name]`` for that tool."""
    name = policy_name(policy)
    matcher = _matchers(args, overrides)
    if name == "strict":
        return len(output) == len(reference) and all(
            out.name == ref.name and matcher(ref.name)(out.arguments, ref.arguments)
            for out, ref in zip(output, reference)
        )
    if name == "in_order":
        return _in_order(output, reference, matcher)
    if name == "unordered" and len(output) != len(reference):
        return False
    if name == "subset" and len(output) > len(reference):
        return False
    if name == "superset" and len(output) < len(reference):
        return False
    need = len(output) if name == "subset" else len(reference)
    return _matching(_edges(output, reference, matcher), len(output)) == need


def _names_matched(output: Sequence[ToolCall], reference: Sequence[ToolCall]) -> int:
    want = Counter(c.name for c in reference)
    got = Counter(c.name for c in output)
    return sum((got & want).values())


def tool_precision(output: Sequence[ToolCall], reference: Sequence[ToolCall]) -> float | None:
    """Output calls whose tool the reference also calls, each reference call used once, over
    the output calls. None when the agent called no tool."""
    if not output:
        return None
    return _names_matched(output, reference) / len(output)


def tool_recall(output: Sequence[ToolCall], reference: Sequence[ToolCall]) -> float | None:
    """Reference calls whose tool the output also calls, each output call used once, over the
    reference calls. None when the reference expects no tool."""
    if not reference:
        return None
    return _names_matched(output, reference) / len(reference)


def argument_match(
    output: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    *,
    args: ArgsMode = "exact",
    overrides: Mapping[str, ArgsOverride] | None = None,
) -> float | None:
    """The share of name-matched calls whose arguments also match. Calls are paired within
    each tool name so that as many arguments match as possible; the denominator is the
    number of name-matched pairs (the numerator of :func:`tool_precision`). None when no
    output call names a reference tool."""
    pairs = _names_matched(output, reference)
    if pairs == 0:
        return None
    matcher = _matchers(args, overrides)
    return _matching(_edges(output, reference, matcher), len(output)) / pairs


def steps_to_answer(steps: Sequence[object], *, answered: bool = True) -> int | None:
    """The number of steps (retrievals and tool calls) taken before the final answer. None
    when there was no final answer: a turn that never answers has no such count."""
    return len(steps) if answered else None
