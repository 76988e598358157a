"""Tool-call metrics: hand-built trajectories for every policy, agentevals' own cases, and
invariants that hold by definition (hypothesis).

The cases marked "agentevals" mirror langchain-ai/agentevals, commit 946ad15b,
python/tests/test_trajectory.py, one flat call list per side (their messages' tool calls in
order). The in_order column is ours, worked by hand."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.errors import ConfigError, DataError
from rag_judge.metrics.trajectory import (
    ARGS_MODES,
    POLICIES,
    ArgsMode,
    ToolCall,
    argument_match,
    canonical_json,
    policy_name,
    steps_to_answer,
    tool_precision,
    tool_recall,
    trajectory_match,
)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


def weather(city: str) -> ToolCall:
    return call("get_weather", city=city)


def scores(out: list[ToolCall], ref: list[ToolCall], **kw: Any) -> dict[str, bool]:
    return {p: trajectory_match(out, ref, p, **kw) for p in POLICIES}


def expect(strict: bool, in_order: bool, unordered: bool, subset: bool, superset: bool) -> Any:
    return dict(
        strict=strict, in_order=in_order, unordered=unordered, subset=subset, superset=superset
    )


# ---- agentevals' cases ---------------------------------------------------------------------


def test_same_call_matches_under_every_policy() -> None:
    # agentevals: test_trajectory_match (the messages' texts differ; only calls count).
    t = [weather("San Francisco")]
    assert scores(t, list(t)) == expect(True, True, True, True, True)


def test_reordered_calls_fail_strict_and_in_order_only() -> None:
    # agentevals: test_trajectory_with_different_message_count (strict 0, the rest 1).
    out, ref = [weather("SF"), weather("London")], [weather("London"), weather("SF")]
    assert scores(out, ref) == expect(False, False, True, True, True)


def test_parallel_calls_are_ordered_in_a_flat_trajectory() -> None:
    # agentevals: test_trajectory_with_different_tool_message_order gives strict 1, because
    # both calls sit in one assistant message. Our steps are flat: a documented deviation.
    out, ref = [weather("SF"), weather("London")], [weather("London"), weather("SF")]
    assert not trajectory_match(out, ref, "strict")
    assert trajectory_match(out, ref, "unordered")


def test_missing_call_is_a_subset_only() -> None:
    # agentevals: test_trajectory_subset_tool_call.
    out, ref = [weather("SF")], [weather("London"), weather("SF")]
    assert scores(out, ref) == expect(False, False, False, True, False)


def test_another_tool_matches_under_no_policy() -> None:
    # agentevals: test_exact_matcher_with_different_called_tools and
    # test_trajectory_match_with_langchain_messages_failure.
    out, ref = [weather("SF")], [call("accuweather_forecast", city="San Francisco")]
    assert scores(out, ref) == expect(False, False, False, False, False)


def test_extra_call_with_an_ignore_override_is_a_superset() -> None:
    # agentevals: test_trajectory_with_extra_tool_calls_and_override.
    out, ref = [weather("San Francisco"), weather("London")], [weather("SF and London")]
    got = scores(out, ref, overrides={"get_weather": "ignore"})
    assert got == expect(False, True, False, False, True)
    assert scores(out, ref) == expect(False, False, False, False, False)


def test_fewer_calls_with_an_ignore_override_is_a_subset() -> None:
    # agentevals: test_trajectory_with_subset_tool_calls_and_override.
    out, ref = [weather("SF and London")], [weather("San Francisco"), weather("London")]
    got = scores(out, ref, overrides={"get_weather": "ignore"})
    assert got == expect(False, False, False, True, False)


def test_callable_override() -> None:
    # agentevals: test_trajectory_match_with_langchain_messages_and_override.
    def sf(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
        return out["city"] in ("SF", "San Francisco") and ref["city"] in ("SF", "San Francisco")

    out, ref = [weather("SF")], [weather("San Francisco")]
    assert scores(out, ref, overrides={"get_weather": sf}) == expect(True, True, True, True, True)
    assert scores(out, ref) == expect(False, False, False, False, False)


FLIGHT = call("fetch_user_flight_information")
SEARCH = call("search_flights", start_time="2025-03-22T18:34:40Z", departure_airport="CDG")


def test_callable_override_sees_output_then_reference() -> None:
    # agentevals: test_trajectory_match_with_overrides.
    def upgrade(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
        return "upgrade" in out["query"] if "upgrade" in ref["query"] else True

    policy = "lookup_policy"
    out = [FLIGHT, SEARCH, call(policy, query="flight upgrades"), call(policy, query="first class")]
    ref = [FLIGHT, call(policy, query="upgrade to first class"), call(policy, query="foo")]
    got = scores(out, ref, overrides={policy: upgrade})
    assert got == expect(False, True, False, False, True)
    assert not any(scores(out, ref).values())


def test_key_list_override_compares_nested_fields_only() -> None:
    # agentevals: test_trajectory_match_with_nested_field_overrides.
    def lookup(query: str, end: str) -> ToolCall:
        return call(
            "lookup_policy", query=query, time={"start": "2025-03-22T18:34:40Z", "end": end}
        )

    user = call("fetch_user_flight_information", user_id="123")
    out = [user, lookup("flight upgrades", "2025-03-22T20:34:40Z"), lookup("first class", "x")]
    ref = [user, lookup("foo", "baz"), lookup("bar", "baz")]
    assert not any(scores(out, ref).values())
    assert all(scores(out, ref, overrides={"lookup_policy": ["time.start"]}).values())


@pytest.mark.parametrize(
    ("mode", "extra_in_output", "extra_in_reference"),
    # agentevals: test_tool_args_match_mode_superset, _subset and _exact (strict trajectory).
    [
        ("exact", False, False), ("ignore", True, True),
        ("subset", False, True), ("superset", True, False),
    ],
)  # fmt: skip
def test_args_modes(mode: ArgsMode, extra_in_output: bool, extra_in_reference: bool) -> None:
    flight = call("get_flight_info", flight_no="LX0112")
    more = call("get_flight_info", flight_no="LX0112", is_cool=True)
    assert trajectory_match([more], [flight], args=mode) is extra_in_output
    assert trajectory_match([flight], [more], args=mode) is extra_in_reference
    assert trajectory_match([flight], [flight], args=mode)


# ---- edge cases ----------------------------------------------------------------------------


def test_empty_trajectories() -> None:
    a = [call("a")]
    assert scores([], []) == expect(True, True, True, True, True)
    assert scores(a, []) == expect(False, True, False, False, True)
    assert scores([], a) == expect(False, False, False, True, False)


def test_repeated_tools_pair_each_call_once() -> None:
    s = call("search", q="x")
    assert scores([s], [s, s]) == expect(False, False, False, True, False)
    assert scores([s, s], [s]) == expect(False, True, False, False, True)
    assert tool_precision([s], [s, s]) == 1.0
    assert tool_recall([s], [s, s]) == 0.5


def test_in_order_allows_gaps_but_not_reordering() -> None:
    a, b, c = call("a"), call("b"), call("c")
    assert trajectory_match([a, c, b, c], [a, b], "in_order")
    assert trajectory_match([c, a, b], [a, b], "in-order")
    assert not trajectory_match([b, c, a], [a, b], "in_order")
    assert not trajectory_match([a, c], [a, b], "in_order")


def test_argument_difference_fails_every_policy_but_not_ignore() -> None:
    out, ref = [call("search", q="cats")], [call("search", q="dogs")]
    assert not any(scores(out, ref).values())
    assert all(scores(out, ref, args="ignore").values())


def test_maximum_matching_finds_the_pairing_greedy_misses() -> None:
    # agentevals pairs greedily: reference f(a=1) takes the first output call that holds a=1,
    # f(a=1, b=2), and f(a=1, b=2) then finds nothing. A one-to-one pairing exists.
    out = [call("f", a=1, b=2), call("f", a=1, c=3)]
    ref = [call("f", a=1), call("f", a=1, b=2)]
    assert not _greedy_superset(out, ref, _superset_args)
    assert trajectory_match(out, ref, "superset", args="superset")
    assert trajectory_match(out, ref, "unordered", args="superset")


def test_arguments_compare_as_json() -> None:
    assert ToolCall.parse("f", '{"b": [1, 2], "a": 1.0}') == ToolCall("f", {"b": [1, 2], "a": 1.0})
    assert trajectory_match(
        [ToolCall.parse("f", '{"b": [1, 2], "a": 1}')], [call("f", a=1.0, b=(1, 2))]
    )
    assert not trajectory_match([call("f", a=True)], [call("f", a=1)])
    assert (
        canonical_json({"b": {"y": 2.0, "x": None}, "a": "é"}) == '{"a":"é","b":{"x":null,"y":2}}'
    )
    assert ToolCall.parse("f", "") == ToolCall.parse("f", None) == ToolCall("f", {})
    with pytest.raises(DataError, match="not JSON"):
        ToolCall.parse("f", "{oops")
    with pytest.raises(DataError, match="JSON object"):
        ToolCall.parse("f", "[1]")


def test_policy_names_and_bad_options() -> None:
    assert policy_name("any-order") == policy_name("any_order") == "unordered"
    assert policy_name("In-Order") == "in_order"
    with pytest.raises(ConfigError, match="unknown trajectory policy 'exactish'"):
        trajectory_match([], [], "exactish")
    with pytest.raises(ConfigError, match="tool-args match mode 'fuzzy'"):
        trajectory_match([], [], args="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool-args match mode 'fuzzy'"):
        trajectory_match([], [], overrides={"f": "fuzzy"})


# ---- precision, recall, arguments, steps ---------------------------------------------------


def test_precision_and_recall_by_hand() -> None:
    out = [call("search"), call("search"), call("calc"), call("mail")]
    ref = [call("search"), call("calc"), call("calc"), call("book")]
    # matched: search once (ref has one), calc once (out has one) -> 2
    assert tool_precision(out, ref) == 2 / 4
    assert tool_recall(out, ref) == 2 / 4
    assert tool_precision([], ref) is None
    assert tool_recall(out, []) is None
    assert tool_precision(out, []) == 0.0
    assert tool_recall([], ref) == 0.0


def test_argument_match_pairs_for_the_most_matches() -> None:
    a, b, c = (call("search", q=q) for q in "abc")
    assert argument_match([b, a], [a, b]) == 1.0
    assert argument_match([a, c], [a, b]) == 0.5
    assert argument_match([a, c, call("calc", x=1)], [a, b, call("calc", x=2)]) == pytest.approx(
        1 / 3
    )
    assert argument_match([a, a, a], [a]) == 1.0  # one pair by name, and it matches
    assert argument_match([a], [call("calc")]) is None
    assert argument_match([a, c], [a, b], args="ignore") == 1.0


def test_steps_to_answer() -> None:
    steps = [{"query": "q", "contexts": []}, call("calc", x=1), call("search")]
    assert steps_to_answer(steps) == 3
    assert steps_to_answer([]) == 0
    assert steps_to_answer(steps, answered=False) is None


# ---- invariants ----------------------------------------------------------------------------


def _greedy_superset(out: list[ToolCall], ref: list[ToolCall], matcher: Any) -> bool:
    """agentevals' _is_trajectory_superset (python/agentevals/trajectory/utils.py), transcribed:
    each reference call takes the first unused output call of its name that fits."""
    used: set[int] = set()
    for r in ref:
        for i, o in enumerate(out):
            if o.name == r.name and i not in used and matcher(o.arguments, r.arguments):
                used.add(i)
                break
        else:
            return False
    return True


def _superset_args(out: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    return all(k in out and out[k] == v for k, v in ref.items())


ORACLE_MATCHERS = {"exact": lambda o, r: dict(o) == dict(r), "ignore": lambda o, r: True}

calls = st.builds(
    ToolCall,
    st.sampled_from("abc"),
    st.dictionaries(st.sampled_from("xy"), st.integers(0, 1), max_size=2),
)
trajectories = st.lists(calls, max_size=6)
modes = st.sampled_from(ARGS_MODES)
SWAPPED: dict[ArgsMode, ArgsMode] = {
    "exact": "exact", "ignore": "ignore", "subset": "superset", "superset": "subset",
}  # fmt: skip


@given(trajectories, modes)
@settings(max_examples=200, deadline=None)
def test_a_trajectory_matches_itself(t: list[ToolCall], mode: ArgsMode) -> None:
    assert all(scores(t, list(t), args=mode).values())
    if t:
        assert tool_precision(t, t) == tool_recall(t, t) == argument_match(t, t) == 1.0


@given(trajectories, trajectories, modes)
@settings(max_examples=400, deadline=None)
def test_policies_imply_each_other(
    out: list[ToolCall], ref: list[ToolCall], mode: ArgsMode
) -> None:
    got = scores(out, ref, args=mode)
    assert not got["strict"] or got["in_order"]
    assert not got["strict"] or got["unordered"]
    assert not got["in_order"] or got["superset"]
    # A pairing of every reference call and one of every output call give a pairing of all.
    assert got["unordered"] == (got["subset"] and got["superset"])
    assert not got["unordered"] or len(out) == len(ref)
    # A subsequence as long as the whole is the whole.
    assert got["strict"] == (got["in_order"] and len(out) == len(ref))
    assert got["subset"] == trajectory_match(ref, out, "superset", args=SWAPPED[mode])


@given(trajectories, trajectories, st.sampled_from(["exact", "ignore"]))
@settings(max_examples=400, deadline=None)
def test_agrees_with_agentevals_for_equivalence_modes(
    out: list[ToolCall], ref: list[ToolCall], mode: ArgsMode
) -> None:
    # agentevals' superset, subset (swapped) and unordered (both), from their _scorer()s.
    m = ORACLE_MATCHERS[mode]
    sup, sub = _greedy_superset(out, ref, m), _greedy_superset(ref, out, m)
    assert trajectory_match(out, ref, "superset", args=mode) == sup
    assert trajectory_match(out, ref, "subset", args=mode) == sub
    assert trajectory_match(out, ref, "unordered", args=mode) == (sup and sub)


@given(trajectories, trajectories)
@settings(max_examples=300, deadline=None)
def test_precision_recall_and_argument_match(out: list[ToolCall], ref: list[ToolCall]) -> None:
    p, r, a = tool_precision(out, ref), tool_recall(out, ref), argument_match(out, ref)
    for value in (p, r, a):
        assert value is None or 0.0 <= value <= 1.0
    same_names = Counter(c.name for c in out) == Counter(c.name for c in ref)
    assert trajectory_match(out, ref, "unordered", args="ignore") == same_names
    if out and ref:
        assert (p == r == 1.0) == same_names
    if trajectory_match(out, ref, "unordered"):
        assert a in (None, 1.0)
    if trajectory_match(out, ref, "superset", args="ignore") and ref:
        assert r == 1.0
    if a is not None:
        assert argument_match(out, ref, args="ignore") == 1.0
