"""Claim-level grounding kernels (toward issue 13): the sentence splitter and the per-answer
metrics, against hand-counted cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge.metrics.grounding import Claim, grounding, split_claims


@pytest.mark.parametrize(
    ("text", "claims"),
    [
        ("The plan costs $12. It renews monthly!", ["The plan costs $12.", "It renews monthly!"]),
        ("Use e.g. the CLI. Version 3.5 is out.", ["Use e.g. the CLI.", "Version 3.5 is out."]),
        (
            "Dr. Smith wrote it. J. R. R. Tolkien too?",
            ["Dr. Smith wrote it.", "J. R. R. Tolkien too?"],
        ),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("- first item\n- second item", ["- first item", "- second item"]),
        ("no final stop", ["no final stop"]),
        ("   \n ", []),
        ("Cited claim [1]. Another [d3].", ["Cited claim [1].", "Another [d3]."]),
    ],
)
def test_split_claims(text: str, claims: list[str]) -> None:
    assert split_claims(text) == claims


@given(st.text(max_size=200))
def test_split_claims_keeps_every_word(text: str) -> None:
    assert " ".join(split_claims(text)).split() == text.split()


def test_grounding_by_hand() -> None:
    claims = [
        Claim("a", "supported", support=(2, 3), cited=(2,)),
        Claim("b", "supported", support=(4,), cited=(1,)),  # misattributed: support uncited
        Claim("c", "contradicted", support=(), cited=(1,)),
        Claim("d", "unsupported"),
    ]
    g = grounding(claims, retrieved=5)
    assert (g.claims, g.claim_support, g.claim_contradiction) == (4, 0.5, 0.25)
    assert g.support_rank == 2 and g.context_utilisation == 3 / 5
    assert g.citations == 3 and g.citation_recall == 1 / 4
    assert g.citation_precision == 1 / 3 and g.misattributed == 1


def test_no_claims_and_no_citations_are_not_zeros() -> None:
    g = grounding([], retrieved=3)
    assert (g.claims, g.claim_support, g.support_rank, g.context_utilisation) == (0, None, None, 0)
    g = grounding([Claim("x", "unsupported")], retrieved=0)
    assert g.claim_support == 0 and g.context_utilisation is None
    assert g.citation_recall is None and g.citation_precision is None
