"""JSON inside a reply, apart from what it means: braces, repairs, cut-off objects, schemas."""

from __future__ import annotations

import pytest

from rag_judge.judge.reply_json import FENCE, braced, conforms, lenient_loads, scan, schema_valid

WINNER = {
    "type": "object",
    "properties": {"winner": {"type": "string", "enum": ["A", "B", "tie"]}},
    "required": ["winner"],
    "additionalProperties": False,
}


def test_braced_skips_braces_inside_strings_and_fences_are_found() -> None:
    text = 'Sure: {"reason": "a {brace} here", "n": {"x": 1}} and {"b": 2}'
    assert [chunk for chunk, _ in braced(text)] == [
        '{"reason": "a {brace} here", "n": {"x": 1}}',
        '{"b": 2}',
    ]
    assert [m.group(1) for m in FENCE.finditer('```json\n{"a": 1}\n```')] == ['{"a": 1}\n']


def test_lenient_loads_repairs_near_json_and_refuses_the_rest() -> None:
    assert lenient_loads("{'winner': 'A',}") == {"winner": "A"}
    assert lenient_loads('{"a": [1, 2,],}') == {"a": [1, 2]}
    assert lenient_loads("winner: A") is None
    assert lenient_loads("{not json") is None


def test_scan_closes_an_object_cut_off_mid_string() -> None:
    found, cut = scan('x {"a": 1} {"winner": "A", "reason": "cut in the mid')
    assert found == [('{"a": 1}', 2)]
    assert cut is not None and cut.depth == 1 and cut.offset == 11
    closed, _ = cut.closed()
    assert lenient_loads(closed) == {"winner": "A", "reason": "cut in the mid"}
    _, dangling = scan('{"winner": "B", "rea')
    assert dangling is not None and lenient_loads(dangling.closed()[1]) == {"winner": "B"}


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"winner": "tie"}, True),
        ({"winner": "C"}, False),
        ({"winner": "A", "why": "x"}, False),
        ({}, False),
        (["A"], False),
    ],
)
def test_conforms_reads_type_enum_required_and_additional_properties(
    value: object, ok: bool
) -> None:
    assert conforms(value, WINNER) is ok


def test_json_true_is_not_the_integer_one() -> None:
    assert conforms(True, {"type": "integer"}) is False
    assert conforms(1, {"enum": [True]}) is False
    assert conforms(2.0, {"type": "integer"}) is True


def test_schema_valid_is_the_whole_text_under_any_schema() -> None:
    assert schema_valid('{"winner": "B"}', WINNER)
    assert not schema_valid('Verdict: {"winner": "B"}', WINNER)
    assert not schema_valid("{'winner': 'B'}", WINNER)  # lenient reading is not conformity
