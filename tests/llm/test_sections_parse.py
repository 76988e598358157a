"""parse_sections finds its sections with str.find; the grammar is still the regular expression
``_SECTION``, and on any text, well formed or not, both read the same sections."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.llm.sections import _SECTION, parse_sections, section

# Pieces that make near-misses likely: names cut short or too long, END lines of other names,
# missing and doubled newlines, angle brackets in the data.
_NAMES = ["ANSWER", "CONTEXT 1", "CONTEXT 12", "A", "ANSWER 1 CONTEXT 3", "X" * 64, "Y" * 65]
_PIECES = st.sampled_from(
    [
        "<<<BEGIN ",
        "<<<END ",
        ">>>",
        ">>>\n",
        "\n",
        "<",
        ">",
        " ",
        "text",
        "lower case",
        "ä",
        *_NAMES,
        *(f"<<<BEGIN {n}>>>\n" for n in _NAMES),
        *(f"<<<END {n}>>>" for n in _NAMES),
        *(f"\n<<<END {n}>>>" for n in _NAMES),
    ]
)


def _by_regex(prompt: str) -> dict[str, str]:
    return {name: body for name, body in _SECTION.findall(prompt)}


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=40))
def test_the_same_sections_as_the_regular_expression(pieces: list[str]) -> None:
    prompt = "".join(pieces)
    assert parse_sections(prompt) == _by_regex(prompt)


@given(st.dictionaries(st.sampled_from(_NAMES[:5]), st.text(max_size=30), max_size=5))
def test_written_sections_read_back(bodies: dict[str, str]) -> None:
    prompt = "Rate the answer.\n" + "\n\n".join(section(n, b) for n, b in bodies.items())
    found = parse_sections(prompt)
    assert found == _by_regex(prompt)
    assert set(found) == set(bodies)


def test_edge_cases() -> None:
    cases = {
        "<<<BEGIN A>>>\n<<<END A>>>": {"A": ""},
        "<<<BEGIN A>>>\n\n<<<END A>>>": {"A": ""},
        "<<<BEGIN A>>>\n\n\n<<<END A>>>": {"A": "\n"},
        "<<<BEGIN A>>>\nx\n<<<END B>>>": {},
        "<<<BEGIN A>>>\n<<<BEGIN B>>>\nb\n<<<END B>>>\n<<<END A>>>": {
            "A": "<<<BEGIN B>>>\nb\n<<<END B>>>"
        },
        "<<<BEGIN A>>>\nno end <<<BEGIN B>>>\nb\n<<<END B>>>": {"B": "b"},
        "<<<BEGIN A>>>\none\n<<<END A>>><<<BEGIN A>>>\ntwo\n<<<END A>>>": {"A": "two"},
        "<<<BEGIN a>>>\nx\n<<<END a>>>": {},
    }
    for prompt, expected in cases.items():
        assert parse_sections(prompt) == expected == _by_regex(prompt), prompt
