"""The retrieval evaluator's options beyond the kernels: span and document labels mapped onto
chunks (checked at document level against pytrec_eval), judged@k by default with its warning
and gate, trec_eval's -M, gm_map's geometric summary, and relevance_from: context_relevance."""

from __future__ import annotations

import math

import pytest
import pytrec_eval
from pydantic import ValidationError

from rag_judge import Pipeline
from rag_judge.analysis.gates import check_gates
from rag_judge.config import ExperimentConfig
from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.retrieval import RetrievalEvaluator
from rag_judge.judge.relevance import relevance_grade
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import WarningKind

QRELS = [
    {"doc_id": "A", "start": 100, "end": 160, "relevance": 2},
    {"doc_id": "A", "start": 250, "end": 280, "relevance": 1},
    {"doc_id": "B", "relevance": 0},
    {"doc_id": "D", "relevance": 3},  # never retrieved
]
CHUNKS = [
    {"id": "c1", "doc_id": "C", "start": 0, "end": 90},
    {"id": "c2", "doc_id": "A", "start": 90, "end": 200},
    {"id": "c3", "doc_id": "A", "start": 130, "end": 170},
    {"id": "c4", "doc_id": "B", "start": 0, "end": 50},
    {"id": "c5", "doc_id": "A", "start": 240, "end": 300},
]
SPANS = Sample.model_validate({"id": "q1", "contexts": CHUNKS, "qrels": QRELS})


def test_chunk_level_scores_the_mapped_grades():
    ev = RetrievalEvaluator(metrics=["ndcg@5", "recall@5", "precision@5", "bpref"])
    out = ev.evaluate([SPANS])
    # ranked grades [0, 2, 0, 0, 1]; ideal units [3, 2, 1, 0] plus judged non-relevant chunks
    dcg = 2 / math.log2(3) + 1 / math.log2(6)
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert out.scores["ndcg@5"] == [pytest.approx(dcg / idcg, abs=1e-15)]
    assert out.scores["recall@5"] == [2 / 3] and out.scores["precision@5"] == [2 / 5]
    assert out.scores["judged@5"] == [4 / 5]  # c1's document C carries no label
    sig = out.signatures["ndcg@5"].render()
    assert "|unit:chunk,overlap>=1c|" in sig
    strict = RetrievalEvaluator(metrics=["recall@5"], overlap={"min_chars": 40})
    assert strict.evaluate([SPANS]).scores["recall@5"] == [1 / 3]  # c2 holds 60, c5 only 30
    assert "overlap>=40c" in strict.evaluate([SPANS]).signatures["recall@5"].render()


TREC = {"map", "ndcg", "P_5", "recall_5", "bpref", "num_rel_ret", "recip_rank"}
OURS = {"map": "map", "ndcg": "ndcg", "precision@5": "P_5", "recall@5": "recall_5",
        "bpref": "bpref", "num_rel_ret": "num_rel_ret", "mrr": "recip_rank"}  # fmt: skip


def test_document_level_equals_pytrec_eval_on_the_first_occurrence_run():
    ev = RetrievalEvaluator(level="document", metrics=list(OURS))
    out = ev.evaluate([SPANS])
    assert "doc_ndcg" in out.scores and "doc_judged@5" in out.scores
    qrels = {"q1": {"A": 2, "B": 0, "D": 3}}
    run = {"q1": {"C": 3.0, "A": 2.0, "B": 1.0}}  # each document at its first occurrence
    ref = pytrec_eval.RelevanceEvaluator(qrels, TREC).evaluate(run)["q1"]
    for ours, trec in OURS.items():
        assert out.scores[f"doc_{ours}"] == [pytest.approx(ref[trec], abs=1e-12)], ours
    assert "|unit:doc|" in out.signatures["doc_ndcg"].render()


def test_both_levels_in_one_config_and_bad_options_named():
    cfg = ExperimentConfig(
        evaluators=[{"type": "retrieval"}, {"type": "retrieval", "level": "document"}]
    )
    names = [m for e in cfg.evaluators for m in e.metric_names()]
    assert "ndcg@5" in names and "doc_ndcg@5" in names and "doc_judged@5" in names
    with pytest.raises(ValidationError, match="'chunk' or 'document'"):
        RetrievalEvaluator(level="page")
    with pytest.raises(ValidationError, match="needs level 'chunk'"):
        RetrievalEvaluator(level="document", overlap={"min_chars": 5})
    with pytest.raises(ValidationError, match="min_share"):
        RetrievalEvaluator(overlap={"min_share": 1.5})


def test_judged_at_k_rides_along_at_the_deepest_cut_off():
    assert RetrievalEvaluator().metric_names()[-1] == "judged@5"
    assert RetrievalEvaluator(metrics=["ndcg@10", "mrr"]).metric_names() == [
        "ndcg@10", "mrr", "judged@10",
    ]  # fmt: skip
    assert RetrievalEvaluator(metrics=["map"]).metric_names() == ["map", "judged@10"]
    assert RetrievalEvaluator(metrics=["ndcg@10", "judged@3"]).metric_names()[-1] == "judged@3"
    assert RetrievalEvaluator(metrics=["mrr"], judged=False).metric_names() == ["mrr"]


def _stale(n: int) -> list[Sample]:
    """Samples whose labels name the old chunk ids: one in five retrieved ids is still known."""
    return [
        Sample(id=f"q{i}", contexts=[{"id": f"new{i}-{r}"} for r in range(4)] + [{"id": "old"}],
               relevance={"old": 1, "gone": 2})
        for i in range(n)
    ]  # fmt: skip


def test_collapsed_judged_at_k_warns_and_gates():
    cfg = ExperimentConfig(
        evaluators=[{"type": "retrieval", "metrics": ["ndcg@5"]}],
        gates={"judged@5": ">= 0.8"},
        bootstrap={"resamples": 0},
    )
    report = Pipeline(cfg).run(_stale(3)).report
    assert report.summary["judged@5"].mean == pytest.approx(0.2)
    (warning,) = report.warnings
    assert warning.kind is WarningKind.UNJUDGED and warning.metric == "judged@5"
    assert warning.value == pytest.approx(0.2) and warning.threshold == 0.8
    assert "## Warnings" in render_markdown(report) and "relabel" in warning.message
    (gate,) = check_gates(report, cfg.gates).checked
    assert gate.metric == "judged@5" and not gate.passed
    lenient = cfg.model_copy(
        update={"evaluators": [RetrievalEvaluator(metrics=["ndcg@5"], min_judged=0.2)]}
    )
    assert Pipeline(lenient).run(_stale(3)).report.warnings == []


def test_what_a_retrieval_evaluator_declares_to_the_pipeline():
    assert RetrievalEvaluator().reads() == ()
    graded = RetrievalEvaluator(relevance_from="context_relevance")
    assert graded.reads() == ("context_relevance",) and not graded.wants_gpu()
    # The stale-label warning is the evaluator's own conclusion from the finished report.
    cfg = ExperimentConfig(
        evaluators=[{"type": "retrieval", "metrics": ["ndcg@5"]}], bootstrap={"resamples": 0}
    )
    report = Pipeline(cfg).run(_stale(3)).report
    assert cfg.evaluators[0].conclusions(report) == report.warnings != []
    assert RetrievalEvaluator(metrics=["ndcg@5"], judged=False).conclusions(report) == []


def test_max_docs_cuts_every_ranking_as_trec_eval_m():
    sample = Sample(id="q", contexts=[{"id": "a"}, {"id": "b"}, {"id": "c"}],
                    relevance={"a": 0, "c": 1})  # fmt: skip
    full = RetrievalEvaluator(metrics=["map", "num_ret"]).evaluate([sample]).scores
    cut = RetrievalEvaluator(metrics=["map", "num_ret"], max_docs=2).evaluate([sample])
    assert full["map"] == [1 / 3] and full["num_ret"] == [3.0]
    assert cut.scores["map"] == [0.0] and cut.scores["num_ret"] == [2.0]
    assert "|max_docs:2|" in cut.signatures["map"].render()


def test_gm_map_summary_is_the_geometric_mean():
    samples = [
        Sample(id="a", contexts=[{"id": "x"}, {"id": "y"}], relevance={"y": 1}),  # AP 0.5
        Sample(id="b", contexts=[{"id": "x"}], relevance={"x": 1}),  # AP 1
        Sample(id="c", contexts=[{"id": "x"}], relevance={"z": 1}),  # AP 0 -> floor 1e-5
    ]
    cfg = ExperimentConfig(evaluators=[{"type": "retrieval", "metrics": ["gm_map", "map"]}])
    report = Pipeline(cfg).run(samples).report
    logs = [math.log(0.5), 0.0, math.log(1e-5)]
    assert [r.scores["gm_map"] for r in report.samples] == pytest.approx(logs, abs=1e-15)
    assert report.summary["gm_map"].mean == pytest.approx(math.exp(sum(logs) / 3), rel=1e-12)
    assert report.summary["gm_map"].aggregate == "geometric mean"
    assert "|agg:geometric|" in report.signatures["gm_map"].render()


def test_count_summaries_are_sums():
    """num_rel, num_rel_ret and num_ret total over the queries, as trec_eval's all line."""
    samples = [
        Sample(id="a", contexts=[{"id": "x"}, {"id": "y"}], relevance={"y": 1, "z": 2}),
        Sample(id="b", contexts=[{"id": "x"}, {"id": "w"}, {"id": "v"}], relevance={"x": 1}),
    ]
    counts = ["num_rel", "num_rel_ret", "num_ret"]
    cfg = ExperimentConfig(evaluators=[{"type": "retrieval", "metrics": [*counts, "map"]}])
    report = Pipeline(cfg).run(samples).report
    assert {m: report.summary[m].mean for m in counts} == {
        "num_rel": 3.0, "num_rel_ret": 2.0, "num_ret": 5.0,
    }  # fmt: skip
    for m in counts:
        summary = report.summary[m]
        assert summary.aggregate == "sum" and summary.scale == (0.0, None)
        assert summary.ci_low is not None and summary.ci_high is not None
        assert summary.ci_low <= summary.mean <= summary.ci_high  # resampled sums
        assert "|agg:sum|" in report.signatures[m].render()
    assert report.summary["map"].aggregate == "mean"
    assert "agg:" not in report.signatures["map"].render()


# ---- a chunk that earns several labels --------------------------------------------------------

# Five labels: two spans of document A and the documents B, C, D. The first chunk holds both
# spans of A; the next three are B, C, D; six unlabelled chunks follow. Every label is found.
FIVE = [
    {"doc_id": "A", "start": 0, "end": 10, "relevance": 1},
    {"doc_id": "A", "start": 20, "end": 30, "relevance": 2},
    *({"doc_id": d, "relevance": 1} for d in "BCD"),
]
PACKED = Sample.model_validate({
    "id": "q", "qrels": FIVE,
    "contexts": [{"doc_id": "A", "start": 0, "end": 40}, *({"doc_id": d} for d in "BCD"),
                 *({"doc_id": f"X{i}"} for i in range(6))],
})  # fmt: skip


def test_a_chunk_earning_two_labels_finds_both():
    """Recall is labels earned / labels: 1, not 4 relevant chunks / 5 labels = 0.8."""
    metrics = ["recall@10", "r_precision", "set_recall", "num_rel_ret", "num_rel", "map",
               "bpref", "iprec@1", "precision@10", "mrr", "ndcg@10", "rprec_mult@1"]  # fmt: skip
    scores = RetrievalEvaluator(metrics=metrics).evaluate([PACKED]).scores
    got = {m: v[0] for m, v in scores.items()}
    assert got["recall@10"] == 1.0 and got["set_recall"] == 1.0  # were 0.8
    assert got["r_precision"] == 1.0  # the top R = 5 chunks earn all 5 labels
    assert got["num_rel_ret"] == 5.0 and got["num_rel"] == 5.0
    assert got["map"] == 1.0 and got["bpref"] == 1.0 and got["iprec@1"] == 1.0
    # as ranked items the four relevant chunks count once each
    assert got["precision@10"] == 0.4 and got["mrr"] == 1.0 and got["rprec_mult@1"] == 0.8
    # the gain rule: the chunk's gain is its best label's grade (2), the ideal gives each
    # label its own rank, so packing two labels into one chunk cannot reach nDCG 1
    dcg = 2 + sum(1 / math.log2(r + 1) for r in (2, 3, 4))
    idcg = 2 + sum(1 / math.log2(r + 1) for r in (2, 3, 4, 5))
    assert got["ndcg@10"] == pytest.approx(dcg / idcg, abs=1e-15)
    # at threshold 2 only the grade-2 span is relevant: one label, earned first
    strict = RetrievalEvaluator(metrics=["recall@10", "map"], relevance_threshold=2)
    assert strict.evaluate([PACKED]).scores == {"recall@10": [1.0], "map": [1.0],
                                                "judged@10": [0.4]}  # fmt: skip
    # the labels a chunk past max_docs earns are not found
    late = PACKED.model_copy(update={"contexts": PACKED.contexts[1:] + PACKED.contexts[:1]})
    cut = RetrievalEvaluator(metrics=["recall@10", "num_rel_ret"], max_docs=9)
    assert cut.evaluate([late]).scores["recall@10"] == [3 / 5]
    assert RetrievalEvaluator(metrics=["recall@10"]).evaluate([late]).scores["recall@10"] == [1.0]


# ---- relevance_from: context_relevance ---------------------------------------------------------

TEXTS = ["Paris is the capital of France.", "Bananas are yellow.", "France borders Spain."]


def _judged_samples() -> list[Sample]:
    ctx = [{"id": f"d{i}", "text": t} for i, t in enumerate(TEXTS)]
    return [
        Sample(id="q1", question="What is the capital of France?", contexts=ctx),
        Sample(id="q2", question="What is the capital of France?", contexts=ctx,
               relevance={"d1": 2}),  # human judgments win
    ]  # fmt: skip


def test_relevance_from_context_relevance_grades_unjudged_samples():
    judge = {"type": "judge", "rubrics": ["context_relevance"], "cache": None}
    retrieval = {"type": "retrieval", "metrics": ["ndcg@3", "precision@3"],
                 "relevance_from": "context_relevance"}  # fmt: skip
    # the retrieval evaluator is listed first: it still runs after the judge
    cfg = ExperimentConfig(evaluators=[retrieval, judge], bootstrap={"resamples": 0})
    result = Pipeline(cfg).run(_judged_samples())
    report = result.report
    per_ctx = report.samples[0].judgments["context_relevance"].contexts
    assert per_ctx is not None
    grades = [relevance_grade(j.score) for j in per_ctx if j.score is not None]
    assert len(grades) == 3
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(grades))
    ideal = sorted(grades, reverse=True)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    expected = dcg / idcg if idcg else 0.0
    assert report.samples[0].scores["ndcg@3"] == pytest.approx(expected, abs=1e-15)
    assert report.samples[1].scores["precision@3"] == pytest.approx(1 / 3)  # its own d1
    sig = report.signatures["ndcg@3"].render()
    assert "|ideal:judged+retrieved|" in sig
    assert "|rel_from:context_relevance(1-5:0,0,1,2,3)|" in sig
    assert list(result.steps)[:2] == ["evaluators[0] (retrieval)", "evaluators[1] (judge)"]
    only_judge = Pipeline(cfg).run(_judged_samples()[:1]).report
    assert "|ideal:retrieved|" in only_judge.signatures["ndcg@3"].render()


def test_relevance_from_needs_a_judge_of_that_rubric():
    config = ExperimentConfig(
        evaluators=[{"type": "retrieval", "relevance_from": "context_relevance"},
                    {"type": "judge", "rubrics": ["faithfulness"], "cache": None}]
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"relevance_from: 'context_relevance' needs a judge"):
        Pipeline(config).prepare()  # a judge's rubrics are known once its files are read
    with pytest.raises(ValidationError, match="context_relevance"):
        RetrievalEvaluator(relevance_from="faithfulness")


def test_the_readme_options_block_is_a_valid_evaluator():
    import yaml

    from tests.test_readme import BLOCKS

    (block,) = [b for b in BLOCKS if b.lang == "yaml" and "min_judged" in b.code]
    (options,) = yaml.safe_load(block.code)
    ev = RetrievalEvaluator(**options)
    assert ev.metric_names() == ["ndcg@10", "recall@10", "bpref", "judged@10"]
    assert ev.overlap.render() == "overlap>=20c&0.5"


def test_the_k_chart_leaves_out_recall_levels_and_multiples():
    from rag_judge.report.html import k_families

    samples = [Sample(id="a", contexts=[{"id": "x"}, {"id": "y"}], relevance={"y": 1})]
    metrics = ["ndcg@1", "ndcg@2", "iprec@0", "iprec@1", "rprec_mult@1", "rprec_mult@2"]
    cfg = ExperimentConfig(evaluators=[{"type": "retrieval", "metrics": metrics}])
    report = Pipeline(cfg).run(samples).report
    assert set(k_families(report.summary)) == {"ndcg"}
    assert report.summary["iprec@1"].mean == 0.5 and report.summary["rprec_mult@2"].mean == 0.5
