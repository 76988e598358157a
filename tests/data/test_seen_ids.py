"""A streamed dataset's ids are checked for repeats through 64-bit hashes in sorted runs, not a
set of strings; a shared hash is confirmed against the file, so only a real repeat stops a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_judge import DataError
from rag_judge.data import stream
from rag_judge.data.stream import JsonlSource, SeenIds


@given(st.lists(st.lists(st.sampled_from("abcdefghij") | st.text(max_size=3), max_size=9)))
def test_the_positions_flagged_are_the_ids_seen_before(chunks: list[list[str]]) -> None:
    seen, ids = SeenIds(), set()
    for chunk in chunks:
        expected = []
        for at, sid in enumerate(chunk):
            if sid in ids:
                expected.append(at)
            ids.add(sid)
        assert seen.add(chunk) == expected  # str hashes of distinct short texts do not collide
    assert len(seen) == sum(map(len, chunks))


def write(path: Path, ids: list[str]) -> Path:
    rows = [{"id": sid, "question": "q", "answer": "a"} for sid in ids]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ids_that_share_a_hash_are_not_a_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "hash", lambda _: 7, raising=False)  # every id collides
    data = write(tmp_path / "d.jsonl", [f"s{i}" for i in range(7)])
    assert [s.id for c in JsonlSource(data).chunks(3) for s in c] == [f"s{i}" for i in range(7)]
    dup = write(tmp_path / "dup.jsonl", ["a", "b", "c", "d", "b", "e"])
    with pytest.raises(
        DataError, match=r"dup.jsonl:5: field 'id': sample id 'b' already used on line 2"
    ):
        list(JsonlSource(dup).chunks(2))
