"""BERTScore's disk cache: an SQLite index with the vectors in segment files, one per writer;
vectors that never reached the disk read as absent. Needs no model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rag_judge.metrics.bertscore.cache import EmbeddingCache, TokenEmbeddings


def _emb(n: int, seed: int) -> TokenEmbeddings:
    rng = np.random.default_rng(seed)
    return TokenEmbeddings(np.arange(n, dtype=np.int64) + 100, rng.random((n, 8), np.float32))


def test_round_trip_of_vectors_and_ids(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    written = {f"k{i}": _emb(2 + i, i) for i in range(5)}
    cache.put_later(list(written.items())[:2])
    cache.put_later(list(written.items())[2:])  # a second batch, appended to the same segment
    cache.close()
    again = EmbeddingCache(tmp_path)
    read = again.get_many([*written, "absent"])
    assert sorted(read) == sorted(written)
    for key, emb in written.items():
        assert read[key].ids.tolist() == emb.ids.tolist()
        assert np.array_equal(read[key].vectors, emb.vectors)
        assert not read[key].vectors.flags.writeable  # views of the mapped file
    ids_only = again.get_many(["k3"], vectors=False)["k3"]
    assert ids_only.ids.tolist() == written["k3"].ids.tolist() and ids_only.vectors.size == 0
    again.close()
    assert len(list((tmp_path / "embedding-vectors").iterdir())) == 1


def test_each_writer_appends_to_a_segment_of_its_own(tmp_path: Path) -> None:
    first, second = EmbeddingCache(tmp_path), EmbeddingCache(tmp_path)
    first.put_later([("a", _emb(3, 0))])
    second.put_later([("b", _emb(4, 1))])
    first.flush()
    second.flush()
    assert sorted(first.get_many(["a", "b"])) == ["a", "b"]  # each sees the other's rows
    first.close()
    second.close()
    assert len(list((tmp_path / "embedding-vectors").iterdir())) == 2


def test_vectors_missing_from_the_disk_read_as_absent(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.put_later([("whole", _emb(3, 0)), ("cut", _emb(3, 1))])
    cache.close()
    (segment,) = (tmp_path / "embedding-vectors").iterdir()
    with segment.open("r+b") as fh:
        fh.truncate(3 * 8 * 4 + 6)  # the second entry cut short, mid-float
    cache = EmbeddingCache(tmp_path)
    assert sorted(cache.get_many(["whole", "cut"])) == ["whole"]
    segment.unlink()
    assert cache.get_many(["whole", "cut"]) == {}
    assert sorted(cache.get_many(["whole", "cut"], vectors=False)) == ["cut", "whole"]
    cache.put_later([("cut", _emb(3, 1))])  # encoded again: the row now points to a new segment
    cache.flush()
    assert np.array_equal(cache.get_many(["cut"])["cut"].vectors, _emb(3, 1).vectors)
    cache.close()
