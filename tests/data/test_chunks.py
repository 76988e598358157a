"""Span and document labels mapped onto chunks (rag_judge.data.chunks): hand-worked cases of
the overlap rule, credit given once, document-level first occurrence, and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_judge.data.chunks import OverlapRule, graded
from rag_judge.data.sample import Sample


def sample(contexts, qrels=None, relevance=None) -> Sample:
    return Sample.model_validate(
        {"id": "q", "contexts": contexts, "qrels": qrels, "relevance": relevance}
    )


# doc A is 300 characters; the evidence is A[100:160] (grade 2) and A[250:280] (grade 1).
QRELS = [
    {"doc_id": "A", "start": 100, "end": 160, "relevance": 2},
    {"doc_id": "A", "start": 250, "end": 280, "relevance": 1},
    {"doc_id": "B", "relevance": 0},  # B judged, nothing in it relevant
]


def test_chunks_earn_the_spans_they_overlap_once_each():
    chunks = [
        {"doc_id": "A", "start": 0, "end": 120},  # 20 chars of the grade-2 span
        {"doc_id": "A", "start": 120, "end": 240},  # rest of the grade-2 span: already credited
        {"doc_id": "B", "start": 0, "end": 100},  # judged document, no relevant span
        {"doc_id": "C", "start": 0, "end": 100},  # unlabelled document: unjudged
        {"doc_id": "A", "start": 240, "end": 300},  # the grade-1 span
    ]
    g = graded(sample(chunks, QRELS))
    assert g.ranked == [2.0, 0.0, 0.0, 0.0, 1.0]
    assert g.known == [True, True, True, False, True]
    # the labels' grades, then a judged non-relevant unit per known chunk that earned nothing
    assert sorted(g.ideal) == [0.0, 0.0, 0.0, 1.0, 2.0]


def test_min_chars_and_min_share_decide_the_overlap():
    chunks = [{"doc_id": "A", "start": 0, "end": 120}]  # 20 of 60 span chars: share 1/3
    assert graded(sample(chunks, QRELS), rule=OverlapRule(min_chars=20)).ranked == [2.0]
    assert graded(sample(chunks, QRELS), rule=OverlapRule(min_chars=21)).ranked == [0.0]
    assert graded(sample(chunks, QRELS), rule=OverlapRule(min_share=1 / 3)).ranked == [2.0]
    assert graded(sample(chunks, QRELS), rule=OverlapRule(min_share=0.34)).ranked == [0.0]
    # the share is of the shorter of the two: a chunk inside the span has share 1
    inside = [{"doc_id": "A", "start": 110, "end": 120}]
    assert graded(sample(inside, QRELS), rule=OverlapRule(min_share=1.0)).ranked == [2.0]


def test_touching_is_not_overlapping():
    chunks = [{"doc_id": "A", "start": 0, "end": 100}, {"doc_id": "A", "start": 160, "end": 250}]
    assert graded(sample(chunks, QRELS)).ranked == [0.0, 0.0]


def test_a_chunk_over_two_spans_takes_the_best_and_credits_both():
    chunks = [{"doc_id": "A", "start": 150, "end": 260}, {"doc_id": "A", "start": 255, "end": 270}]
    assert graded(sample(chunks, QRELS)).ranked == [2.0, 0.0]


def test_document_labels_cover_every_chunk_of_the_document():
    qrels = [{"doc_id": "A", "relevance": 3}]
    chunks = [{"doc_id": "A", "start": 0, "end": 10}, {"doc_id": "A"}, {"doc_id": "Z"}]
    g = graded(sample(chunks, qrels))
    assert g.ranked == [3.0, 0.0, 0.0] and g.known == [True, True, False]


def test_document_level_keeps_each_document_at_its_first_occurrence():
    chunks = [
        {"doc_id": "C", "start": 0, "end": 50},
        {"doc_id": "A", "start": 0, "end": 50},  # no span overlap; the document is still A
        {"doc_id": "C", "start": 50, "end": 90},
        {"doc_id": "A", "start": 100, "end": 150},
        {"doc_id": "B", "start": 0, "end": 20},
    ]
    g = graded(sample(chunks, QRELS), level="document")
    assert g.ranked == [0.0, 2.0, 0.0]  # C, A (its best label), B
    assert g.known == [False, True, True]
    assert sorted(g.ideal) == [0.0, 2.0]


def test_document_level_without_qrels_reads_relevance_by_document():
    chunks = [
        {"id": "a#1", "doc_id": "A"},
        {"id": "a#2", "doc_id": "A"},
        {"id": "x", "relevance": 1},  # no doc_id: the id is the document
    ]
    g = graded(sample(chunks, relevance={"A": 2, "D": 1}), level="document")
    assert g.ranked == [2.0, 1.0] and g.known == [True, True]
    assert sorted(g.ideal) == [1.0, 1.0, 2.0]


def test_chunk_level_without_qrels_is_the_old_behaviour():
    s = sample([{"id": "d1"}, {"id": "d2", "relevance": 2}, {"id": "d3"}], relevance={"d1": 1})
    g = graded(s)
    assert g.ranked == s.ranked_grades() == [1.0, 2.0, 0.0]
    assert g.known == [True, True, False]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"doc_id": "A", "start": 5}, "both 'start' and 'end'"),
        ({"doc_id": "A", "start": 5, "end": 5}, "0 <= start < end"),
        ({"start": 0, "end": 5}, "needs the 'doc_id'"),
    ],
)
def test_bad_offsets_are_named(bad, message):
    with pytest.raises(ValidationError, match=message):
        sample([bad])
    # a qrel always names its document: the field is required
    with pytest.raises(ValidationError, match=message if "doc_id" in bad else "qrels.0.doc_id"):
        sample([], [{"relevance": 1, **bad}])


spans = st.tuples(st.integers(0, 200), st.integers(1, 60))


@settings(max_examples=200, deadline=None)
@given(
    labels=st.lists(st.tuples(spans, st.integers(0, 3)), min_size=1, max_size=5),
    chunks=st.lists(spans, max_size=12),
    min_chars=st.integers(1, 30),
)
def test_credit_is_bounded_by_the_labels(labels, chunks, min_chars):
    """However the document is chunked, the relevant chunks found never outnumber the relevant
    labels, and each relevant chunk's grade is some label's grade."""
    qrels = [{"doc_id": "A", "start": s, "end": s + n, "relevance": g} for (s, n), g in labels]
    ctx = [{"doc_id": "A", "start": s, "end": s + n} for s, n in chunks]
    g = graded(sample(ctx, qrels), rule=OverlapRule(min_chars=min_chars))
    relevant = [x for x in g.ranked if x > 0]
    assert len(relevant) <= sum(1 for _, grade in labels if grade > 0)
    assert all(x in {grade for _, grade in labels} for x in relevant)
    assert len(g.ranked) == len(ctx) and all(g.known)


def test_a_chunk_over_two_spans_keeps_the_other_as_found():
    chunks = [{"doc_id": "A", "start": 150, "end": 260}, {"doc_id": "A", "start": 0, "end": 300}]
    g = graded(sample(chunks, QRELS))
    assert g.ranked == [2.0, 0.0] and g.extra == [(0, 1.0)]  # the grade-1 span, at rank 1


BOUNDED = ["recall@3", "recall@20", "r_precision", "map", "map@3", "set_recall", "set_f1",
           "f1@3", "bpref", "infap", "iprec@0.5", "iprec@1", "11pt_avg", "ndcg", "ndcg_exp@3",
           "precision@3", "mrr", "rprec_mult@0.4"]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    queries=st.lists(
        st.tuples(
            st.lists(st.tuples(spans, st.integers(0, 3)), min_size=1, max_size=5),
            st.lists(spans, max_size=12),
        ),
        min_size=1,
        max_size=4,
    ),
    threshold=st.sampled_from([1, 2, 3]),
    max_docs=st.sampled_from([None, 1, 4]),
)
def test_chunk_metrics_count_labels_and_stay_in_unit_interval(queries, threshold, max_docs):
    """However spans fall into chunks: recall over the whole ranking is the share of relevant
    labels that some retrieved chunk earns (counted here by brute force), num_rel_ret never
    exceeds num_rel, every bounded metric stays in [0, 1], and a batch equals its queries one
    at a time."""
    from rag_judge.evaluators.retrieval import RetrievalEvaluator

    batch = []
    for labels, chunks in queries:
        qrels = [{"doc_id": "A", "start": s, "end": s + n, "relevance": g} for (s, n), g in labels]
        ctx = [{"doc_id": "A", "start": s, "end": s + n} for s, n in chunks]
        batch.append(sample(ctx, qrels))
    metrics = [*BOUNDED, "num_rel_ret", "num_rel"]
    ev = RetrievalEvaluator(metrics=metrics, relevance_threshold=threshold, max_docs=max_docs)
    together = ev.evaluate(batch).scores
    rule = OverlapRule()
    for i, s in enumerate(batch):
        alone = ev.evaluate([s]).scores
        assert {m: v[i] for m, v in together.items()} == {m: v[0] for m, v in alone.items()}
        relevant = [q for q in s.qrels or () if q.relevance >= threshold]
        top = s.contexts[:max_docs]
        earned = sum(1 for q in relevant if any(rule.earns(c, q) for c in top))
        want = earned / len(relevant) if relevant else 0.0
        assert alone["set_recall"][0] == pytest.approx(want, abs=1e-15)
        assert alone["num_rel_ret"][0] == earned and alone["num_rel"][0] == len(relevant)
        for m in BOUNDED:
            assert 0.0 <= alone[m][0] <= 1.0 + 1e-12, m


def test_qrels_and_offsets_read_from_csv_and_jsonl(tmp_path):
    import csv
    import json

    from rag_judge.data.readers import load_dataset

    row = {
        "id": "q1",
        "contexts": json.dumps([{"doc_id": "A", "start": 90, "end": 200}]),
        "qrels": json.dumps(QRELS[:1]),
    }
    path = tmp_path / "d.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    (from_csv,) = load_dataset(path)
    assert from_csv.qrels is not None and from_csv.qrels[0].start == 100
    assert graded(from_csv).ranked == [2.0]
    jsonl = tmp_path / "d.jsonl"
    bad = {"id": "q1", "qrels": [{"doc_id": "A", "relevance": 1, "start": 9}]}
    jsonl.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"d\.jsonl:1.*qrels"):
        load_dataset(jsonl)
