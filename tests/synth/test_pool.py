"""The BM25 pool equals bm25s called directly; the dense pool ranks by cosine
(docs/synth.md, "The pool")."""

from __future__ import annotations

import itertools
import sys

import bm25s  # type: ignore[import-untyped]
import numpy as np
import pytest

from rag_judge.synth.corpus import Chunk, load_corpus
from rag_judge.synth.pool import BM25Pool, DensePool
from tests import REPO

CHUNKS = load_corpus(REPO / "configs" / "data" / "corpus")
QUERIES = [
    "How much does the Team plan cost per user?",
    "API key rate limit per minute for Enterprise",
    "Which regions keep backups in the same jurisdiction?",
    "SEV1 incident acknowledge page status updates",
    "refund annual plan within 30 days",
    "Zürich Swiss data residency",
]


def chunk(i: int, text: str) -> Chunk:
    return Chunk(id=f"d{i}#0-{len(text)}", doc_id=f"d{i}", start=0, end=len(text), text=text)


def direct(texts: list[str], query: str, k: int) -> list[tuple[int, float]]:
    """bm25s's own retrieval with its defaults, positive scores only."""
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    query_tokens = bm25s.tokenize(query, stopwords="en", show_progress=False)
    docs, scores = retriever.retrieve(
        query_tokens, k=min(k, len(texts)), show_progress=False, backend_selection="numpy"
    )
    return [(int(d), float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]


@pytest.fixture(scope="module")
def pool() -> BM25Pool:
    return BM25Pool(CHUNKS)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("k", [1, 5, 20])
def test_ranking_and_scores_equal_bm25s(pool: BM25Pool, query: str, k: int) -> None:
    got = pool.search(query, k)
    want = direct([c.text for c in CHUNKS], query, k)
    assert got  # every query names words of the corpus
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)
    if len(set(scores)) == len(scores):
        assert got == want
    else:  # bm25s orders tied scores by an unstable sort: compare up to that order
        assert scores == [s for _, s in want]
        assert sorted(got) == sorted(want)
    for _, score in got:
        assert isinstance(score, float) and score == float(np.float32(score))


def test_scores_are_bm25s_float32_values(pool: BM25Pool) -> None:
    retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    retriever.index(
        bm25s.tokenize([c.text for c in CHUNKS], stopwords="en", show_progress=False),
        show_progress=False,
    )
    tokens = bm25s.tokenize(QUERIES[0], stopwords="en", return_ids=False, show_progress=False)
    raw = retriever.get_scores(tokens[0])
    assert raw.dtype == np.float32
    assert pool.search(QUERIES[0], 1000) == [
        (int(i), float(raw[i])) for i in sorted(np.flatnonzero(raw > 0), key=lambda i: -raw[i])
    ]


def test_ties_go_to_the_lower_index() -> None:
    texts = ["apple pie", "banana bread", "apple pie", "apple pie", "cherry tart", "apple pie"]
    pool = BM25Pool([chunk(i, t) for i, t in enumerate(texts)])
    got = pool.search("apple", 3)
    assert [i for i, _ in got] == [0, 2, 3]
    assert len({s for _, s in got}) == 1
    # bm25s finds the same tied chunks with the same score, in an order of its own.
    full = direct(texts, "apple", 6)
    assert sorted(i for i, _ in full) == [0, 2, 3, 5]
    assert {s for _, s in full} == {got[0][1]}


def test_k_larger_than_the_matches_gives_the_matches() -> None:
    texts = ["the red fox jumps high", "a blue whale", "red wine", "green tea"]
    pool = BM25Pool([chunk(i, t) for i, t in enumerate(texts)])
    got = pool.search("red", 50)
    assert [i for i, _ in got] == [i for i, _ in direct(texts, "red", 4)]
    assert [i for i, _ in got] == [2, 0]  # the shorter chunk first
    assert pool.search("red", 0) == []


@pytest.mark.parametrize("query", ["", "   ", "the and of", "zebra", "!!"])
def test_a_query_with_no_corpus_word_finds_nothing(pool: BM25Pool, query: str) -> None:
    assert pool.search(query, 10) == []
    assert direct([c.text for c in CHUNKS], query, 10) == []


def test_an_empty_pool_finds_nothing() -> None:
    assert BM25Pool([]).search("anything", 5) == []


@pytest.mark.slow
def test_dense_pool_ranks_by_cosine_of_mean_pooled_embeddings() -> None:
    texts = [
        "Refunds for annual plans are given pro rata in the first 30 days.",
        "The API returns HTTP 429 when a key exceeds its rate limit.",
        "Backups are kept for 35 days.",
        "Rate limiting: clients that send too many requests get HTTP 429.",
    ]
    chunks = [chunk(i, t) for i, t in enumerate(texts)]
    pool = DensePool(chunks, batch_size=3)  # two batches, one of them padded
    vectors = pool.embed(texts)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Embedding in a batch or alone gives the same vector (the mask drops the padding).
    for i, text in enumerate(texts):
        assert np.allclose(pool.embed([text])[0], vectors[i], atol=1e-5)
    got = pool.search("too many requests, rate limit exceeded", 2)
    assert [i for i, _ in got] == [3, 1]
    query = pool.embed(["too many requests, rate limit exceeded"])[0]
    assert got[0][1] == pytest.approx(float(vectors[3] @ query), abs=1e-6)
    all_scores = [s for _, s in pool.search("too many requests, rate limit exceeded", 10)]
    assert all(a >= b for a, b in itertools.pairwise(all_scores))


def test_without_bm25s_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bm25s", None)  # an import of it fails
    with pytest.raises(ImportError, match=r"pip install 'rag-judge\[synth\]'"):
        BM25Pool(CHUNKS)
