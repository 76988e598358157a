"""Columns and corpus rows kept in files past a few values (``data.column``) read back exactly
as the same values kept in memory, and a reader lets their pages go (``stats.pages``)."""

from __future__ import annotations

import io
import math
import mmap
import pickle
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_judge.data import column as column_
from rag_judge.data.column import Column, FileArray, Rows
from rag_judge.data.rows import RowWriter, line_offsets
from rag_judge.report import samples as samples_
from rag_judge.report.samples import Ids
from rag_judge.stats import bootstrap as bootstrap_
from rag_judge.stats import pages
from rag_judge.stats.bootstrap import SumStatistic, exact_sums, summed
from rag_judge.stats.pages import mapped, release

values = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
# a chunk's values, or a push of one value at a position this far past the column's end
steps = st.lists(
    st.one_of(st.lists(values, max_size=9).map(lambda v: ("extend", v)),
              st.tuples(st.integers(0, 5), st.floats(allow_nan=False), st.booleans())
              .map(lambda p: ("push", p))),
    max_size=12,
)  # fmt: skip


def _built(moves: list[tuple[str, object]], spill: Path | None, start: int = 0) -> Column:
    c = Column(start, spill)
    for kind, arg in moves:
        if kind == "extend":
            c.extend(arg)  # type: ignore[arg-type]
        else:
            gap, value, flag = arg  # type: ignore[misc]
            c.push(len(c) + gap, value, flag)
    return c


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.tobytes() == b.tobytes()  # NaN payloads and -0.0 too


@settings(max_examples=150, deadline=None)
@given(moves=steps, start=st.integers(0, 6), extra=st.integers(0, 4))
def test_a_spilled_column_reads_as_the_column_in_memory(
    tmp_path_factory: pytest.TempPathFactory, moves: list[tuple[str, object]], start: int,
    extra: int,
) -> None:  # fmt: skip
    folder = tmp_path_factory.mktemp("spill")
    kept = _built(moves, None, start)
    mp = pytest.MonkeyPatch()
    mp.setattr(column_, "TAIL", 3)
    try:
        _check_spilled(kept, _built(moves, folder, start), extra, folder)
    finally:
        mp.undo()


def _check_spilled(kept: Column, spilled: Column, extra: int, folder: Path) -> None:
    assert len(spilled) == len(kept)
    assert spilled.spilled == (len(kept) >= 3)
    n = len(kept) + extra  # a column shorter than its samples: the rest have no value
    for a, b in zip(spilled.arrays(n), kept.arrays(n), strict=True):
        assert _same(a, b)
        assert a.flags.writeable == bool(extra)  # a view of the values, or a padded copy
    for i in range(n):
        got, want = spilled.get(i), kept.get(i)
        assert got is None if want is None else _same(np.float64(got), np.float64(want))
    for lo, hi in [(0, n), (1, n - 1), (n // 2, n + 2)]:
        got_w, want_w = spilled.window(lo, hi), kept.window(lo, hi)
        assert len(got_w) == len(want_w) == max(0, hi - lo)
        assert [v is None for v in got_w] == [v is None for v in want_w]
        assert _same(np.array([math.nan if v is None else v for v in got_w]),
                     np.array([math.nan if v is None else v for v in want_w]))  # fmt: skip
    back = pickle.loads(pickle.dumps(spilled))  # to another process: the values, spilled again
    assert back.spilled == spilled.spilled and not pickle.loads(pickle.dumps(kept)).spilled
    assert all(_same(a, b) for a, b in zip(back.arrays(n), kept.arrays(n), strict=True))
    assert list(folder.iterdir()) == []  # unnamed files: nothing left to clean up


def test_spilled_ids_offsets_and_index_read_as_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(column_, "TAIL", 5)
    monkeypatch.setattr(samples_, "_READ", 4)
    ids = [f"q{i}-é" * (i % 3) for i in range(23)]  # empty ids, and more than one byte a char
    kept, spilled = Ids(ids), Ids(ids, spill=tmp_path)
    assert list(spilled) == list(kept) == ids and spilled[22] == ids[22] and spilled[0] == ""
    assert spilled[-1] == ids[-1] and spilled[3:7] == ids[3:7]
    back = pickle.loads(pickle.dumps(spilled))
    assert list(back) == ids
    w = RowWriter(tmp_path / "f.jsonl", spill=tmp_path)
    for sid in ids:
        w.write(sid.encode())
    offsets = w.close()
    assert isinstance(offsets, np.memmap) or mapped(offsets)
    assert offsets.tolist() == line_offsets(tmp_path / "f.jsonl").tolist()
    assert w.offsets is not None and w.offsets.item(len(offsets) - 1) == offsets[-1]
    a = FileArray("i", tmp_path)
    a.extend(range(12))
    assert a.spilled and a.read(3, 9).tolist() == list(range(3, 9)) and a.item(11) == 11
    assert a.read(10, 40).tolist() == [10, 11] and a.read(5, 2).tolist() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl"]


def test_a_long_column_is_a_map_of_its_files_and_grows_after_it_is_read(tmp_path: Path) -> None:
    c = Column(spill=tmp_path)
    c.extend([float(i) for i in range(20_000)])
    values, present = c.arrays()
    assert isinstance(values.base, mmap.mmap) or isinstance(values, np.memmap)
    assert values.sum() == sum(range(20_000)) and present.all()
    c.extend([None, 1.5])  # a reader's map stays as it was; the next read sees the new values
    assert len(values) == 20_000
    v2, p2 = c.arrays()
    assert len(v2) == 20_002 and not p2[20_000] and v2[20_001] == 1.5 and c.get(20_000) is None


@given(chunks=st.lists(st.integers(0, 7), max_size=6), width=st.sampled_from([(), (3,)]))
@settings(max_examples=60, deadline=None)
def test_spilled_rows_are_the_chunks_joined(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[int], width: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(len(chunks))
    parts = [rng.integers(0, 9, size=(k, *width)).astype(np.float64) for k in chunks]
    kept, spilled = Rows(), Rows(tmp_path_factory.mktemp("rows"))
    for p in parts:
        kept.append(p)
        spilled.append(p)
    if not parts:  # no rows yet: none, of no known width
        assert len(kept.array()) == len(spilled.array()) == 0
        return
    want = np.concatenate(parts)
    for rows in (kept.array(), spilled.array()):
        assert rows.shape == want.shape and _same(rows, want)
    assert _same(kept.array(), want)  # asked twice: the same


@given(n=st.integers(1, 40), block=st.integers(1, 9), k=st.integers(1, 4))
@settings(max_examples=80, deadline=None)
def test_counts_times_rows_in_blocks_is_the_whole_product(n: int, block: int, k: int) -> None:
    rng = np.random.default_rng(n * 31 + block)
    rows = rng.integers(0, 1000, size=(n, k)).astype(np.float64)
    counts = rng.integers(0, 4, size=(3, n)).astype(np.float64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bootstrap_, "_ROWS", block)
        assert exact_sums(rows)
        assert _same(summed(counts, rows), counts @ rows)
        rows[n // 2, 0] = 0.5  # not an integer, in whichever block it falls
        assert not exact_sums(rows)
        rows[n // 2, 0] = math.inf
        assert not exact_sums(rows)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_release_lets_a_mapped_columns_pages_go(tmp_path: Path) -> None:
    c = Column(spill=tmp_path)
    for start in range(0, 8_000_000, 500_000):  # 64 MB of values
        c.extend(np.arange(start, start + 500_000, dtype=np.float64).tolist())
    values, _ = c.arrays()
    before = _rss_kib()
    assert float(values.sum()) == 8_000_000 * 7_999_999 / 2  # every page read
    touched = _rss_kib()
    release(values[10:])  # a view of the map will do
    after = _rss_kib()
    assert touched - before > 40_000  # KiB: the pages were there
    assert touched - after > 40_000  # and are gone
    assert float(values[-1]) == 7_999_999  # still readable: mapped again from the file
    release(np.zeros(3))  # an array in memory: nothing to let go


def test_a_corpus_statistic_of_rows_in_a_file_is_the_one_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bootstrap_, "_ROWS", 7)  # summed 7 rows at a time
    rows = np.random.default_rng(3).integers(0, 50, size=(50, 4)).astype(np.float64)
    kept = Rows(tmp_path)
    kept.append(rows[:20])
    kept.append(rows[20:])
    rows_mapped = kept.array()
    assert isinstance(rows_mapped, np.memmap)
    statistic = SumStatistic(lambda s: (s[0] + 0.1) / (s[1] + 0.3) - s[2] * s[3] / 7.0)
    assert statistic(rows_mapped) == statistic(rows)
    halves = rows + 0.5  # not integers: summed whole, as before
    other = Rows(tmp_path)
    other.append(halves)
    assert statistic(other.array()) == statistic(halves)


def test_dump_and_load_copy_arrays_a_block_at_a_time(tmp_path: Path) -> None:
    big = FileArray("d", tmp_path)
    for start in range(0, 2_000_000, 250_000):  # 16 MB, in its file
        big.extend(np.arange(start, start + 250_000, dtype=np.float64).tolist())
    small = FileArray("q")  # in memory: stays there
    small.extend([3, 1, 4])
    ids = Ids([f"s{i}" for i in range(20_000)], spill=tmp_path)
    path = tmp_path / "index.bin"
    tracemalloc.start()
    try:
        with path.open("wb") as fh:
            column_.dump({"big": big, "small": small, "ids": ids, "n": 7, "again": big}, fh)
        written = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        with path.open("rb") as fh:
            back = column_.load(fh)
        read = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written < 4e6 and read < 4e6  # bytes: a block or two, not the 16 MB array
    assert back["n"] == 7 and back["big"].spilled and not back["small"].spilled
    assert back["again"] is back["big"]  # reached twice: written and read once
    assert back["big"].numpy().tobytes() == big.numpy().tobytes()
    assert back["small"].numpy().tolist() == [3, 1, 4] and list(back["ids"]) == list(ids)
    with path.open("rb") as fh:  # a file cut short says so
        cut = io.BytesIO(fh.read()[:-100])
    with pytest.raises(EOFError):
        column_.load(cut)


def test_weighing_a_mapped_column_in_blocks_is_the_whole_product(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "BLOCK", 7)  # 7 values at a time, pages let go after each
    monkeypatch.setattr(column_, "TAIL", 4)  # the 50 values in a file
    c = Column(spill=tmp_path)
    values = np.random.default_rng(9).normal(size=50)
    c.extend(values.tolist())
    column = c.arrays()[0]
    assert mapped(np.asarray(column)[3:])  # a view of a view of the map
    counts = np.random.default_rng(1).integers(0, 4, size=(3, 50)).astype(np.float64)
    out = np.empty((3, 50))
    assert _same(bootstrap_.multiplied(counts, np.asarray(column), out), counts * values)
    spilled_cis = bootstrap_.bootstrap_cis([column], resamples=40, seed=4)
    assert spilled_cis == bootstrap_.bootstrap_cis([values], resamples=40, seed=4)
