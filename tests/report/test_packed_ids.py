"""The index's ids are packed (bytes and ends), and read back as the strings they were."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge.report.samples import Ids

TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)


@given(st.lists(TEXT, max_size=20), st.integers(-25, 25), st.integers(-25, 25))
def test_ids_read_back_as_the_list_they_were(ids: list[str], a: int, b: int) -> None:
    packed = Ids(ids)
    assert len(packed) == len(ids) and list(packed) == ids and packed == ids
    assert packed[a:b] == ids[a:b] and packed[::-2] == ids[::-2]
    for i in range(-len(ids), len(ids)):
        assert packed[i] == ids[i]
    with pytest.raises(IndexError):
        packed[len(ids)]


def test_a_lone_surrogate_survives_and_unequal_lists_differ() -> None:
    ids = ["a\ud800b", "", "é"]
    assert list(Ids(ids)) == ids
    assert Ids(ids) != ids[:2] and Ids(ids) != ["a", "", "é"]
