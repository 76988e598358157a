"""The corpus reader and the chunking rule (docs/synth.md, "The corpus and its chunks")."""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_judge.errors import DataError
from rag_judge.messages import input_problems
from rag_judge.synth.corpus import (
    BOUNDARIES,
    Boundary,
    Chunking,
    Document,
    chunk_document,
    load_corpus,
    read_corpus,
)
from tests import REPO, assert_plain

SHIPPED = REPO / "configs" / "data" / "corpus"


def spans(text: str, **chunking: object) -> list[tuple[int, int]]:
    chunks = chunk_document(Document(id="d", text=text), Chunking.model_validate(chunking))
    return [(c.start, c.end) for c in chunks]


def texts(text: str, **chunking: object) -> list[str]:
    return [text[s:e] for s, e in spans(text, **chunking)]


def write_jsonl(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ---- the chunking rule -------------------------------------------------------------------


def test_sentence_cut_at_the_last_sentence_end_in_the_window() -> None:
    text = "One two. Three four! Five six? Seven eight nine ten eleven."
    # The window of 32 holds "One two. Three four! Five six? Se": the last end is after "?".
    assert texts(text, size=32, overlap=0) == [
        "One two. Three four! Five six?",
        "Seven eight nine ten eleven.",
    ]


def test_a_blank_line_ends_a_sentence() -> None:
    text = "# Heading\n\nBody text goes on here"
    assert texts(text, size=20, overlap=0) == ["# Heading", "Body text goes on", "here"]


def test_without_a_sentence_end_the_cut_is_at_the_last_word_end() -> None:
    assert texts("alpha beta gamma delta", size=13, overlap=0) == ["alpha beta", "gamma delta"]


def test_a_word_longer_than_the_window_is_cut_hard() -> None:
    assert texts("abcdefghijkl mn", size=5, overlap=0) == ["abcde", "fghij", "kl mn"]


def test_a_cut_leaves_the_chunk_longer_than_the_overlap() -> None:
    # "A." ends a sentence at 2, inside the first `overlap` characters: not a cut there.
    assert spans("A. bbbb cccc dddd", size=12, overlap=4)[0] == (0, 12)


def test_the_next_chunk_starts_at_a_sentence_start_within_the_overlap() -> None:
    text = "First one here. Second one here. Third one."
    got = texts(text, size=33, overlap=20)
    assert got == ["First one here. Second one here.", "Second one here. Third one."]


def test_else_at_the_first_word_start_within_the_overlap() -> None:
    text = "aaa bbb ccc ddd eee fff ggg"
    assert spans(text, size=12, overlap=5) == [(0, 11), (8, 19), (16, 27)]


def test_overlap_zero_shares_nothing_and_whitespace_is_trimmed() -> None:
    text = "  One. \n\n  Two three.  "
    assert spans(text, size=8, overlap=0) == [(2, 6), (11, 14), (15, 21)]
    assert spans(text, size=10, overlap=0) == [(2, 6), (11, 21)]


def test_char_windows_are_fixed_and_untrimmed() -> None:
    assert spans("abcdefghij", size=4, overlap=1, boundary="char") == [
        (0, 4), (3, 7), (6, 10),
    ]  # fmt: skip
    # A window of whitespace alone is no chunk.
    assert texts("ab    cd", size=3, overlap=0, boundary="char") == ["ab ", "cd"]


def test_chunk_ids_name_the_document_and_span() -> None:
    chunks = chunk_document(Document(id="a/b", text="One. Two."), Chunking(size=5, overlap=0))
    assert [c.id for c in chunks] == ["a/b#0-4", "a/b#5-9"]
    assert all(c.doc_id == "a/b" for c in chunks)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": 10, "overlap": 10},
         "field 'overlap': must be less than size (10): 0 to 9, got 10"),
        ({"boundary": "word"},
         "field 'boundary': 'word' is not a legal value; legal values: sentence, char"),
        ({"size": 0}, "field 'size': must be at least 1, got 0"),
        ({"overlap": -1}, "field 'overlap': must be at least 0, got -1"),
    ],
)  # fmt: skip
def test_chunking_is_validated(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        Chunking.model_validate(options)
    assert [str(p) for p in input_problems(info.value, Chunking)] == [message]


_ALPHABET = st.sampled_from([*"ab c.!?\n\t", "xyz", "\n\n", ". "])


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_ALPHABET, max_size=120).map("".join),
    size=st.integers(1, 40),
    share=st.floats(0, 0.99),
    boundary=st.sampled_from(BOUNDARIES),
)
def test_chunks_cover_the_document_with_their_spans(
    text: str, size: int, share: float, boundary: Boundary
) -> None:
    overlap = int(share * size)
    doc = Document(id="d", text=text)
    chunks = chunk_document(doc, Chunking(size=size, overlap=overlap, boundary=boundary))
    covered: set[int] = set()
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.id == f"d#{chunk.start}-{chunk.end}"
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert chunk.end - chunk.start <= size
        assert not chunk.text.isspace()
        if boundary == "sentence":
            assert chunk.text == chunk.text.strip()
        covered.update(range(chunk.start, chunk.end))
    assert {i for i, ch in enumerate(text) if not ch.isspace()} <= covered
    for before, after in itertools.pairwise(chunks):
        assert before.start < after.start
        assert before.end - after.start <= overlap
    assert chunk_document(doc, Chunking(size=size, overlap=overlap, boundary=boundary)) == chunks


# ---- reading a corpus --------------------------------------------------------------------


def test_the_shipped_corpus_reads_as_eight_documents() -> None:
    corpus = read_corpus(SHIPPED)
    files = sorted(SHIPPED.glob("*.md"))
    assert corpus.documents == 8 == len(files)
    assert corpus.skipped == []
    assert not corpus.pre_chunked
    doc_ids = list(dict.fromkeys(c.doc_id for c in corpus.chunks))
    assert doc_ids == [f.stem for f in files]
    for file in files:
        text = file.read_text(encoding="utf-8")
        assert 300 <= len(text.split()) <= 620
        for chunk in (c for c in corpus.chunks if c.doc_id == file.stem):
            assert text[chunk.start : chunk.end] == chunk.text
            assert len(chunk.text) <= 800


def test_a_folder_is_read_recursively_by_relative_path(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "b" / "c.txt").write_text("Inner text.", encoding="utf-8")
    (tmp_path / "a.md").write_text("Outer text.", encoding="utf-8")
    (tmp_path / "empty.md").write_text(" \n\n", encoding="utf-8")
    (tmp_path / "notes.rst").write_text("Not read.", encoding="utf-8")
    (tmp_path / ".hidden" / "x.md").write_text("Not read.", encoding="utf-8")
    (tmp_path / "crlf.txt").write_bytes(b"Line one.\r\nLine two.")
    corpus = read_corpus(tmp_path)
    assert [c.id for c in corpus.chunks] == ["a#0-11", "b/c#0-11", "crlf#0-19"]
    assert corpus.chunks[2].text == "Line one.\nLine two."
    assert (corpus.documents, corpus.skipped) == (4, ["empty"])
    with pytest.warns(UserWarning, match=r"skipped 1 empty document\(s\): empty"):
        assert load_corpus(tmp_path) == corpus.chunks


def test_a_single_text_file_is_one_document(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("Hello there.", encoding="utf-8")
    assert [c.id for c in load_corpus(path)] == ["guide#0-12"]


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("Fine.", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9")
    with pytest.raises(DataError, match=r"bad\.txt:1: not UTF-8 text"):
        read_corpus(tmp_path)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.md": "x", "a.txt": "y"}, r"a\.txt: document id 'a' already used by .*a\.md"),
        ({"a.rst": "x"}, "holds no .txt or .md file"),
        ({"a.md": "  "}, "contains no document with text"),
    ],
)
def test_folder_errors(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_corpus(tmp_path)


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file or folder not found"):
        read_corpus(tmp_path / "nope")


def test_jsonl_documents_are_chunked(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "docs.jsonl",
        {"id": "x", "text": "One. Two.", "title": "ignored"},
        {"id": "y", "text": ""},
        {"id": "z", "text": "Tri."},
    )
    corpus = read_corpus(path, Chunking(size=5, overlap=0))
    assert [c.id for c in corpus.chunks] == ["x#0-4", "x#5-9", "z#0-4"]
    assert (corpus.documents, corpus.skipped, corpus.pre_chunked) == (3, ["y"], False)


def test_prechunked_jsonl_is_kept_as_given(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chunks.jsonl",
        {"doc_id": "x", "start": 10, "end": 20, "text": "0123456789"},
        {"doc_id": "x", "start": 0, "end": 15, "text": "overlaps it", "id": "mine"},
        {"doc_id": "y", "start": 0, "end": 3, "text": "   "},
    )
    corpus = read_corpus(path, Chunking(size=2, overlap=0))
    assert [(c.id, c.doc_id, c.start, c.end, c.text) for c in corpus.chunks] == [
        ("x#10-20", "x", 10, 20, "0123456789"),
        ("mine", "x", 0, 15, "overlaps it"),
    ]
    assert (corpus.documents, corpus.skipped, corpus.pre_chunked) == (2, ["y#0-3"], True)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [{"doc_id": "a", "start": 5, "end": 3, "text": "x"}],
            "1: field 'end': must be greater than start (5), got 3",
        ),
        (
            [{"doc_id": "a", "start": -1, "end": 3, "text": "x"}],
            "1: field 'start': must be at least 0, got -1",
        ),
        (
            [{"doc_id": "a", "start": "0", "end": 3, "text": "x"}],
            "1: field 'start': expected a whole number, got the string '0'",
        ),
        ([{"id": "a"}], "1: field 'text': required but missing"),
        ([{"id": 3, "text": "x"}], "1: field 'id': expected a string, got the number 3"),
        (
            [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}],
            "2: field 'id': document id 'a' already used on line 1",
        ),
        (
            [{"doc_id": "a", "start": 0, "end": 1, "text": "x"}] * 2,
            "2: field 'doc_id': chunk id 'a#0-1' already used on line 1",
        ),
        (
            [{"id": "a", "text": "x"}, {"doc_id": "a", "start": 0, "end": 1, "text": "x"}],
            "2: a chunk ({doc_id, start, end, text}) in a file of documents (line 1 is one)",
        ),
        ([{"text": "x"}], "1: expected a document ({id, text}) or a chunk"),
        ([], " contains no documents"),
    ],
)
def test_jsonl_errors_name_file_line_and_field(
    tmp_path: Path, rows: list[dict[str, object]], message: str
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", *rows)
    with pytest.raises(DataError) as info:
        read_corpus(path)
    assert_plain(str(info.value), "_ChunkLine", "_DocumentLine")
    assert str(info.value).startswith(f"{path}:{message}"), str(info.value)


def test_jsonl_syntax_and_encoding_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "text": "x"}\n{"id": "b"\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.jsonl:2: invalid JSON"):
        read_corpus(broken)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "a", "text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin\.jsonl:1: not UTF-8 text"):
        read_corpus(latin)


def test_load_corpus_is_quiet_without_skips() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_corpus(SHIPPED, Chunking(size=400, overlap=50))
