"""The sacrebleu evaluators (bleu with its options, chrf, ter) through the Pipeline and config:
summaries equal sacrebleu's corpus scores, signatures, per-sample errors, option errors."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from pydantic import ValidationError
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.metrics.ter import TER

import rag_judge
from rag_judge import (
    EVALUATORS,
    BleuEvaluator,
    ChrfEvaluator,
    ConfigError,
    ExperimentConfig,
    Pipeline,
    Sample,
    TerEvaluator,
    load_config,
)
from rag_judge._version import __version__
from rag_judge.evaluators import EvaluatorResult
from rag_judge.evaluators.sacrebleu import CHRF_AGGREGATE, TER_AGGREGATE
from rag_judge.pipeline import summarize
from rag_judge.report.model import FailureKind, MetricKind
from tests.metrics.test_lexical import (
    CORPUS,
    _streams,  # reference streams padded with None
)

V = sacrebleu.__version__


BROKEN = [
    Sample(id="no-answer", references=["no answer here"]),
    Sample(id="no-refs", answer="an answer without references"),
    Sample(id="empty", answer="", references=["an empty answer"]),
]


def _samples(n: int = 150) -> list[Sample]:
    hyps, refs = CORPUS
    good = [Sample(id=f"s{i}", answer=hyps[i], references=refs[i]) for i in range(n)]
    return good[:5] + BROKEN + good[5:]


def _scored(samples: list[Sample]) -> tuple[list[str], list[list[str]]]:
    ok = [s for s in samples if s.answer is not None and s.references]
    return [s.answer or "" for s in ok], [list(s.references) for s in ok]


def test_pipeline_summaries_equal_sacrebleu_corpus_scores() -> None:
    samples = _samples()
    bleu = BleuEvaluator(max_ngram_order=3, smooth_method="floor", smooth_value=0.0)
    evaluators = [
        bleu,
        ChrfEvaluator(),
        ChrfEvaluator(word_order=2, lowercase=True),
        TerEvaluator(normalized=True, case_sensitive=True),
    ]
    report = Pipeline(evaluators).run(samples).report
    hyps, refs = _scored(samples)
    streams = _streams(refs)
    want = {
        "bleu": BLEU(max_ngram_order=3, smooth_method="floor", smooth_value=0.0),
        "chrf": CHRF(),
        "chrf++": CHRF(word_order=2, lowercase=True),
        "ter": TER(normalized=True, case_sensitive=True),
    }
    for metric, sacre in want.items():
        summary = report.summary[metric]
        assert summary.mean == sacre.corpus_score(hyps, streams).score / 100, metric
        assert summary.n == len(hyps) and summary.errors == 2, metric
        assert summary.mean is not None and summary.ci_low is not None
        assert summary.ci_high is not None
        assert summary.ci_low < summary.mean < summary.ci_high, metric
        assert summary.kind is MetricKind.LEXICAL
        # the run's signature holds sacrebleu's corpus signature of the same call
        rendered = report.signatures[metric].render()
        assert f"|corpus:[{sacre.get_signature().format()}]|" in rendered, metric
    assert report.summary["chrf"].aggregate == CHRF_AGGREGATE
    assert report.summary["ter"].aggregate == TER_AGGREGATE
    assert tuple(report.summary["chrf++"].scale) == (0.0, 1.0)
    assert tuple(report.summary["ter"].scale) == (0.0, None)  # an error rate, unbounded above
    # per sample: sentence scores with the same options
    by_id = {r.id: r for r in report.samples}
    ter = TER(normalized=True, case_sensitive=True)
    chrfpp = CHRF(word_order=2, lowercase=True)
    for s in samples[:5] + samples[8:20]:
        scores = by_id[s.id].scores
        assert scores["ter"] == ter.sentence_score(s.answer or "", list(s.references)).score / 100
        want_chrf = chrfpp.sentence_score(s.answer or "", list(s.references)).score / 100
        assert scores["chrf++"] == min(want_chrf, 1.0)
    assert by_id["empty"].scores["chrf"] == 0.0 and by_id["empty"].scores["ter"] == 1.0
    for metric in want:
        assert by_id["no-answer"].errors[metric].text() == "field 'answer' is missing"
        assert by_id["no-refs"].errors[metric].text() == "field 'references' is missing or empty"
        assert by_id["no-refs"].errors[metric].kind is FailureKind.MISSING_INPUT


def test_corpus_scores_agree_across_chunks() -> None:
    """Streamed a chunk at a time, with chunks of different reference counts: the summary is
    one corpus score over everything and the signature says nrefs:var, as one sacrebleu call."""
    samples = _samples(60)
    config = ExperimentConfig(
        evaluators=[ChrfEvaluator(word_order=2), TerEvaluator(), BleuEvaluator()],
        chunk_size=7,
    )
    report = Pipeline(config).run(samples).report
    hyps, refs = _scored(samples)
    streams = _streams(refs)
    chrf, ter, bleu = CHRF(word_order=2), TER(), BLEU()
    assert report.summary["chrf++"].mean == chrf.corpus_score(hyps, streams).score / 100
    assert report.summary["ter"].mean == ter.corpus_score(hyps, streams).score / 100
    assert report.summary["bleu"].mean == bleu.corpus_score(hyps, streams).score / 100
    assert report.signatures["chrf++"].options["corpus"] == f"[{chrf.get_signature().format()}]"
    assert report.signatures["ter"].options["corpus"] == f"[{ter.get_signature().format()}]"
    assert report.signatures["ter"].options["corpus"].startswith("[nrefs:var|")


@pytest.mark.parametrize(
    ("evaluator", "rendered"),
    [
        (
            BleuEvaluator(max_ngram_order=3, smooth_method="floor", smooth_value=0.001),
            f"bleu|corpus:[nrefs:2|case:mixed|eff:no|tok:13a|smooth:floor[0.00]|version:{V}]"
            f"|sentence:[nrefs:2|case:mixed|eff:yes|tok:13a|smooth:floor[0.00]|version:{V}]"
            f"|max_ngram_order:3|smooth_value:0.001|version:{__version__}",
        ),
        (
            BleuEvaluator(effective_order=True, smooth_method="add-k", smooth_value=0),
            f"bleu|corpus:[nrefs:2|case:mixed|eff:yes|tok:13a|smooth:add-k[0.00]|version:{V}]"
            f"|sentence:[nrefs:2|case:mixed|eff:yes|tok:13a|smooth:add-k[0.00]|version:{V}]"
            f"|version:{__version__}",
        ),
        (
            BleuEvaluator(effective_order=False, lowercase=True),
            f"bleu|corpus:[nrefs:2|case:lc|eff:no|tok:13a|smooth:exp|version:{V}]"
            f"|sentence:[nrefs:2|case:lc|eff:no|tok:13a|smooth:exp|version:{V}]"
            f"|version:{__version__}",
        ),
        (
            ChrfEvaluator(),
            f"chrf|corpus:[nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{V}]"
            f"|beta:2|version:{__version__}",
        ),
        (
            ChrfEvaluator(word_order=2, beta=1, eps_smoothing=True, whitespace=True),
            f"chrf++|corpus:[nrefs:2|case:mixed|eff:no|nc:6|nw:2|space:yes|version:{V}]"
            f"|beta:1|version:{__version__}",
        ),
        (
            TerEvaluator(),
            f"ter|corpus:[nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:{V}]"
            f"|version:{__version__}",
        ),
        (
            TerEvaluator(normalized=True, no_punct=True, asian_support=True, case_sensitive=True),
            f"ter|corpus:[nrefs:2|case:mixed|tok:tercom|norm:yes|punct:no|asian:yes|version:{V}]"
            f"|version:{__version__}",
        ),
    ],
)
def test_signatures(evaluator: BleuEvaluator | ChrfEvaluator | TerEvaluator, rendered: str) -> None:
    samples = [Sample(id="a", answer="a b c", references=["a b c d", "a b"])]
    out = evaluator.evaluate(samples)
    assert out.signatures[evaluator.metric_names()[0]].render() == rendered


def test_chrf_metric_names_follow_sacrebleus_plus_signs() -> None:
    assert ChrfEvaluator().metric_names() == ["chrf"]
    assert ChrfEvaluator(word_order=1).metric_names() == ["chrf+"]
    assert ChrfEvaluator(word_order=2).metric_names() == ["chrf++"]
    assert TerEvaluator().metric_names() == ["ter"]


def test_config_with_chrf_and_ter_validates(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"id": "a", "answer": "a b", "references": ["a c"]}\n')
    path = tmp_path / "config.yaml"
    path.write_text(
        f"dataset: {data}\nevaluators:\n"
        "  - {type: chrf}\n"
        "  - {type: chrf, word_order: 2}\n"
        "  - {type: ter, normalized: true, case_sensitive: true}\n"
        "  - {type: bleu, max_ngram_order: 2, smooth_method: add-k, smooth_value: 0,"
        " effective_order: true}\n"
    )
    config = load_config(path)
    chrf, chrfpp, ter, bleu = config.evaluators
    assert isinstance(chrf, ChrfEvaluator) and chrf.metric_names() == ["chrf"]
    assert isinstance(chrfpp, ChrfEvaluator) and chrfpp.metric_names() == ["chrf++"]
    assert isinstance(ter, TerEvaluator) and ter.normalized and ter.case_sensitive
    assert isinstance(bleu, BleuEvaluator) and bleu.smooth_value == 0.0
    assert bleu.max_ngram_order == 2 and bleu.effective_order is True
    report = Pipeline(config).run().report
    assert report.summary["chrf"].mean == CHRF().corpus_score(["a b"], [["a c"]]).score / 100
    # Two plain chrF evaluators would report the same metric twice.
    path.write_text(f"dataset: {data}\nevaluators: [{{type: chrf}}, {{type: chrf, beta: 1}}]\n")
    with pytest.raises(ConfigError, match="metric 'chrf' is produced by evaluators"):
        Pipeline(load_config(path)).prepare()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"type": "bleu", "max_ngram_order": 0}, ["max_ngram_order must be", ">= 1, got 0"]),
        ({"type": "bleu", "smooth_method": "add-k", "smooth_value": -0.1}, [">= 0, got -0.1"]),
        ({"type": "bleu", "smooth_method": "floor", "smooth_value": "inf"}, ["finite", "got inf"]),
        ({"type": "bleu", "smooth_method": "laplace"}, ["'laplace'", "exp, floor, add-k, none"]),
        ({"type": "bleu", "smooth_value": 0}, ["'exp'", "'floor' or 'add-k'"]),
        ({"type": "bleu", "effective_order": "sometimes"}, ["sometimes", "bool"]),
        ({"type": "chrf", "char_order": -1}, ["char_order must be an integer >= 0, got -1"]),
        ({"type": "chrf", "word_order": -2}, ["word_order must be an integer >= 0, got -2"]),
        ({"type": "chrf", "beta": -1}, ["beta must be an integer >= 0, got -1"]),
        ({"type": "chrf", "beta": 1.5}, ["beta", "1.5", "integer"]),
        ({"type": "chrf", "char_order": 0}, ["got char_order=0, word_order=0", "at least one"]),
        ({"type": "chrf", "lowercase": "maybe"}, ["maybe", "bool"]),
        ({"type": "ter", "asian_support": "yes please"}, ["yes please", "bool"]),
        ({"type": "ter", "tokenizer": "13a"}, ["tokenizer", "Extra inputs are not permitted"]),
    ],
)  # fmt: skip
def test_bad_options_name_the_value_and_the_legal_set(
    options: dict[str, object], named: list[str]
) -> None:
    cls = EVALUATORS[str(options["type"])]
    with pytest.raises(ValidationError) as err:
        cls.model_validate(options)
    for text in named:
        assert text in str(err.value), (text, str(err.value))


def test_registered_and_exported() -> None:
    assert EVALUATORS["chrf"] is ChrfEvaluator and EVALUATORS["ter"] is TerEvaluator
    assert rag_judge.ChrfEvaluator is ChrfEvaluator and rag_judge.TerEvaluator is TerEvaluator
    from rag_judge import evaluators

    assert {"ChrfEvaluator", "TerEvaluator"} <= set(evaluators.__all__)


def test_no_usable_sample() -> None:
    samples = [Sample(id="x"), Sample(id="y", answer="a")]
    for ev in (ChrfEvaluator(word_order=2), TerEvaluator()):
        out = ev.evaluate(samples)
        metric = ev.metric_names()[0]
        assert out.scores[metric] == [None, None]
        assert out.errors[0][metric].text() == (
            "field 'answer' is missing; field 'references' is missing or empty"
        )
        corpus = out.corpus[metric]
        summary = summarize(out.scores[metric], resamples=10, confidence=0.9, seed=0, corpus=corpus)
        assert summary.mean is None


def test_corpus_statistic_pickles_with_its_options() -> None:
    """executor: ray ships an EvaluatorResult to the driver: the bound options travel."""
    hyps, refs = CORPUS
    samples = [Sample(id=str(i), answer=hyps[i], references=refs[i]) for i in range(40)]
    for ev, sacre in (
        (ChrfEvaluator(beta=1, eps_smoothing=True), CHRF(beta=1, eps_smoothing=True)),
        (BleuEvaluator(effective_order=True), BLEU(effective_order=True)),
        (TerEvaluator(no_punct=True), TER(no_punct=True)),
    ):
        metric = ev.metric_names()[0]
        stat = pickle.loads(pickle.dumps(ev.evaluate(samples).corpus[metric]))
        want = sacre.corpus_score(hyps[:40], _streams(refs[:40])).score / 100
        assert stat.score(stat.rows) == want, metric


def test_chunks_with_one_reference_count_each_sign_nrefs_var() -> None:
    """Each chunk alone says nrefs:1 or nrefs:2; the run's signature says what one sacrebleu
    call over every sample says."""
    one = [Sample(id=f"a{i}", answer="a b c", references=["a b"]) for i in range(3)]
    two = [Sample(id=f"b{i}", answer="a b c", references=["a b", "c"]) for i in range(3)]
    for ev in (ChrfEvaluator(), TerEvaluator()):
        metric = ev.metric_names()[0]
        emitted: list[EvaluatorResult] = []
        final = ev.prepare().evaluate_chunks([one, two], emitted.append)
        corpus = [r.signatures[metric].options["corpus"][:9] for r in emitted]
        assert corpus == ["[nrefs:1|", "[nrefs:2|"]
        assert final.signatures[metric].options["corpus"].startswith("[nrefs:var|")
        # chunks that agree leave their signature as it is
        assert ev.prepare().evaluate_chunks([one, one], lambda r: None).signatures == {}


def test_a_run_of_many_chunks_keeps_each_distinct_signature_once() -> None:
    """A million samples in a thousand chunks do not keep a thousand signatures per metric:
    one per distinct signature, first seen first, merged as all of them would be."""
    one = [Sample(id="a", answer="a b c", references=["a b"])]
    two = [Sample(id="b", answer="a b c", references=["a b", "c"])]
    ev = BleuEvaluator()
    metric = ev.metric_names()[0]
    run = ev.prepare()
    final = run.evaluate_chunks([one, two, one, two] * 50, lambda r: None)
    kept = list(run._signed[metric].values())
    assert [s.options["corpus"][:9] for s in kept] == ["[nrefs:1|", "[nrefs:2|"]
    every = [ev.prepare().evaluate(c).signatures[metric] for c in [one, two, one, two] * 50]
    assert final.signatures[metric] == ev.merge_signature(every)


def test_ter_is_lower_is_better_in_the_summary_and_the_regression_gate() -> None:
    from rag_judge.analysis.gates import RegressionRule, check_gates

    def run(answer: str) -> Any:
        samples = [Sample(id=f"s{i}", answer=answer, references=["the cat sat on the mat"])
                   for i in range(3)]  # fmt: skip
        return Pipeline([TerEvaluator()]).run(samples).report

    close, far = run("the cat sat on the mat"), run("a dog ran")
    assert close.summary["ter"].lower_is_better and close.summary["ter"].mean == 0.0
    # worse = more edits: fails against the close baseline without naming ter anywhere
    (worse,) = check_gates(far, {}, RegressionRule(baseline=close, max_drop=0.01)).checked
    assert not worse.passed and worse.op == "<="
    (better,) = check_gates(close, {}, RegressionRule(baseline=far, max_drop=0.01)).checked
    assert better.passed
