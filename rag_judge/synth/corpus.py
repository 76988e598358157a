"""A corpus read from disk and cut into chunks with character offsets.

Offsets count characters of a document's text as read, so a span label on a chunk survives
re-chunking. docs/synth.md states the chunking rule and the file formats exactly.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from rag_judge.data._files import read_text
from rag_judge.data.jsonl import json_lines, read_lines
from rag_judge.errors import DataError
from rag_judge.messages import input_problems

__all__ = [
    "BOUNDARIES",
    "Boundary",
    "Chunk",
    "Chunking",
    "Corpus",
    "Document",
    "chunk_document",
    "load_corpus",
    "read_corpus",
]

Boundary = Literal["sentence", "char"]
BOUNDARIES: tuple[Boundary, ...] = ("sentence", "char")
TEXT_SUFFIXES = (".md", ".txt")
# A blank line after a word: the end of a paragraph, a heading or a list.
_BLANK_LINE = re.compile(r"[ \t]*\n[ \t]*\n")


class Document(BaseModel):
    """One document of a corpus: its id and its whole text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    text: str


class Chunk(BaseModel):
    """Characters ``start`` to ``end`` of document ``doc_id``; ``text`` is exactly that span."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    doc_id: str
    start: int
    end: int
    text: str


class Chunking(BaseModel):
    """How documents are cut: windows of at most ``size`` characters that share at most
    ``overlap`` characters, cut at a sentence end or a word end (``sentence``) or anywhere
    (``char``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(default=800, ge=1)
    overlap: int = Field(default=100, ge=0)
    boundary: Boundary = "sentence"

    @field_validator("overlap")
    @classmethod
    def _overlap_below_size(cls, overlap: int, info: ValidationInfo) -> int:
        size = info.data.get("size")
        if isinstance(size, int) and overlap >= size:
            raise ValueError(f"must be less than size ({size}): 0 to {size - 1}, got {overlap}")
        return overlap


def chunk_document(doc: Document, chunking: Chunking) -> list[Chunk]:
    """The chunks of ``doc`` in order; every non-whitespace character is in one of them."""
    spans = _char_spans if chunking.boundary == "char" else _sentence_spans
    return [
        Chunk(id=f"{doc.id}#{s}-{e}", doc_id=doc.id, start=s, end=e, text=doc.text[s:e])
        for s, e in spans(doc.text, chunking.size, chunking.overlap)
    ]


def _char_spans(text: str, size: int, overlap: int) -> Iterator[tuple[int, int]]:
    # Fixed windows every size - overlap characters, nothing trimmed; a window of whitespace
    # alone is no chunk.
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if not text[start:end].isspace():
            yield start, end
        if end == len(text):
            return
        start += size - overlap


def _sentence_spans(text: str, size: int, overlap: int) -> Iterator[tuple[int, int]]:
    n = len(text)
    start = _skip_space(text, 0)
    while start < n:
        if n - start <= size:
            yield start, _trim_end(text, start, n)  # the rest fits
            return
        cut = _cut(text, start + overlap, start + size)
        yield start, _trim_end(text, start, cut)
        if _skip_space(text, cut) == n:
            return
        start = _skip_space(text, _next_start(text, cut - overlap, cut))


def _cut(text: str, low: int, high: int) -> int:
    """Where a window ends: the last sentence end in (low, high], else the last word end,
    else ``high``. Both kinds are a non-space character followed by whitespace."""
    word_end = 0
    for pos in range(high, low, -1):
        if text[pos - 1].isspace() or not text[pos].isspace():
            continue
        if _ends_sentence(text, pos):
            return pos
        word_end = word_end or pos
    return word_end or high


def _ends_sentence(text: str, pos: int) -> bool:
    """Whether the word that ends at ``pos`` ends a sentence: it ends in . ! or ? or a
    blank line follows it."""
    return text[pos - 1] in ".!?" or _BLANK_LINE.match(text, pos) is not None


def _next_start(text: str, low: int, cut: int) -> int:
    """The first sentence start in [low, cut), else the first word start there, else ``low``
    (one word spans the overlap)."""
    words = [
        pos for pos in range(max(low, 1), cut)
        if text[pos - 1].isspace() and not text[pos].isspace()
    ]  # fmt: skip
    for pos in words:
        before = _trim_end(text, 0, pos)
        if before == 0 or _ends_sentence(text, before):
            return pos
    return words[0] if words else low


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


# ---- reading a corpus ---------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """The chunks of a corpus in reading order, the number of documents read (pre-chunked:
    documents named by the chunks), and what was skipped as empty (document ids, or the ids
    of pre-chunked chunks)."""

    chunks: list[Chunk]
    documents: int
    skipped: list[str]
    pre_chunked: bool


def load_corpus(path: str | Path, chunking: Chunking | None = None) -> list[Chunk]:
    """The chunks of the corpus at ``path``; skipped empty documents are one warning."""
    corpus = read_corpus(path, chunking)
    if corpus.skipped:
        shown = ", ".join(corpus.skipped[:5]) + (", ..." if len(corpus.skipped) > 5 else "")
        warnings.warn(
            f"{path}: skipped {len(corpus.skipped)} empty "
            f"{'chunk' if corpus.pre_chunked else 'document'}(s): {shown}",
            stacklevel=2,
        )
    return corpus.chunks


def read_corpus(path: str | Path, chunking: Chunking | None = None) -> Corpus:
    """A folder of .txt/.md files, one .txt/.md file, a JSONL of documents (chunked here) or
    a JSONL of chunks (kept as given)."""
    path = Path(path)
    chunking = chunking or Chunking()
    if path.is_dir():
        return _chunked(_folder_documents(path), chunking, path)
    if not path.exists():
        raise DataError(f"{path}: file or folder not found")
    if path.suffix.lower() in TEXT_SUFFIXES:
        return _chunked([Document(id=path.stem, text=read_text(path))], chunking, path)
    return _read_jsonl(path, chunking)


def _chunked(docs: Iterable[Document], chunking: Chunking, path: Path) -> Corpus:
    chunks: list[Chunk] = []
    skipped: list[str] = []
    count = 0
    for doc in docs:
        count += 1
        if not doc.text.strip():
            skipped.append(doc.id)
            continue
        chunks.extend(chunk_document(doc, chunking))
    if not chunks:
        raise DataError(f"{path}: contains no document with text")
    return Corpus(chunks=chunks, documents=count, skipped=skipped, pre_chunked=False)


def _folder_documents(folder: Path) -> list[Document]:
    """Every .txt/.md file under ``folder`` (hidden files and folders left out), by relative
    path; a document's id is its relative path without the suffix."""
    found: dict[str, Path] = {}
    files = (
        f for f in folder.rglob("*")
        if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES
        and not any(part.startswith(".") for part in f.relative_to(folder).parts)
    )  # fmt: skip
    for file in sorted(files, key=lambda f: f.relative_to(folder).as_posix()):
        doc_id = file.relative_to(folder).with_suffix("").as_posix()
        if doc_id in found:
            raise DataError(f"{file}: document id {doc_id!r} already used by {found[doc_id]}")
        found[doc_id] = file
    if not found:
        raise DataError(f"{folder}: holds no .txt or .md file")
    return [Document(id=doc_id, text=read_text(file)) for doc_id, file in found.items()]


class _DocumentLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: StrictStr = Field(min_length=1)
    text: StrictStr


class _ChunkLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: StrictStr | None = Field(default=None, min_length=1)
    doc_id: StrictStr = Field(min_length=1)
    start: StrictInt = Field(ge=0)
    end: StrictInt
    text: StrictStr

    @field_validator("end")
    @classmethod
    def _end_after_start(cls, end: int, info: ValidationInfo) -> int:
        start = info.data.get("start")
        if isinstance(start, int) and end <= start:
            raise ValueError(f"must be greater than start ({start}), got {end}")
        return end


_SHAPES = {False: "a document ({id, text})", True: "a chunk ({doc_id, start, end, text})"}
_PLURALS = {False: "documents", True: "chunks"}


def _read_jsonl(path: Path, chunking: Chunking) -> Corpus:
    """Documents or chunks, one JSON object a line; the first line's keys say which, and a
    later line of the other shape is an error."""
    pre_chunked: bool | None = None
    first_line = 0
    docs: list[Document] = []
    chunks: list[Chunk] = []
    where_of: dict[str, int] = {}
    for lineno, obj in json_lines(read_lines(path)):
        if isinstance(obj, DataError):
            raise DataError(f"{path}:{lineno}: {obj}")
        shape = _shape(obj)
        if shape is None:
            raise DataError(
                f"{path}:{lineno}: expected {_SHAPES[False]} or {_SHAPES[True]}; "
                f"found the keys {sorted(obj)}"
            )
        if pre_chunked is None:
            pre_chunked, first_line = shape, lineno
        elif shape != pre_chunked:
            raise DataError(
                f"{path}:{lineno}: {_SHAPES[shape]} in a file of {_PLURALS[pre_chunked]} "
                f"(line {first_line} is one): one file holds one shape"
            )
        item = _parse(path, lineno, obj, _ChunkLine if shape else _DocumentLine)
        if isinstance(item, _ChunkLine):
            unit_id = item.id or f"{item.doc_id}#{item.start}-{item.end}"
            chunks.append(Chunk(id=unit_id, **item.model_dump(exclude={"id"})))
        else:
            unit_id = item.id
            docs.append(Document(id=item.id, text=item.text))
        if unit_id in where_of:
            field = "id" if shape is False or item.id else "doc_id"
            raise DataError(
                f"{path}:{lineno}: field '{field}': {'chunk' if shape else 'document'} id "
                f"{unit_id!r} already used on line {where_of[unit_id]}"
            )
        where_of[unit_id] = lineno
    if pre_chunked is None:
        raise DataError(f"{path}: contains no documents")
    if not pre_chunked:
        return _chunked(docs, chunking, path)
    kept = [c for c in chunks if c.text.strip()]
    if not kept:
        raise DataError(f"{path}: contains no chunk with text")
    skipped = [c.id for c in chunks if not c.text.strip()]
    return Corpus(
        chunks=kept, documents=len({c.doc_id for c in chunks}), skipped=skipped, pre_chunked=True
    )


def _shape(obj: dict[str, Any]) -> bool | None:
    """True for a chunk (it has ``doc_id``), False for a document (``id`` alone), None for
    neither."""
    if "doc_id" in obj:
        return True
    return False if "id" in obj else None


def _parse(
    path: Path, lineno: int, obj: dict[str, Any], model: type[_ChunkLine] | type[_DocumentLine]
) -> _ChunkLine | _DocumentLine:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(map(str, input_problems(exc, model)))
        raise DataError(f"{path}:{lineno}: {problems}") from None
