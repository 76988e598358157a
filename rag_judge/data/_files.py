"""Reading a whole file with errors that name it (no pydantic: the TREC readers use this)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag_judge.errors import DataError

__all__ = ["decode", "read_bytes", "read_text"]


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None


def decode(path: Path, data: bytes, where: Callable[[str], str] | None = None) -> str:
    """UTF-8 text as a text-mode read gives it: no byte-order mark, universal newlines.

    A byte that is not UTF-8 is named by its line and column, and by what ``where`` (given
    the line's text before the byte) says is there: ``field 'docid'``."""
    try:
        text = data.decode("utf-8-sig")  # -sig: a byte-order mark is not data
    except UnicodeDecodeError as exc:
        raise DataError(_undecodable(path, data, exc, where)) from None
    return _newlines(text)


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _undecodable(
    path: Path, data: bytes, exc: UnicodeDecodeError, where: Callable[[str], str] | None
) -> str:
    # Everything before the first bad byte decodes, so its lines are counted as a text-mode
    # read counts them (\n, \r\n and \r each end one).
    before = _newlines(data[: exc.start].decode("utf-8-sig"))
    lineno = before.count("\n") + 1
    head = before[before.rfind("\n") + 1 :]
    place = f" {where(head)}:" if where is not None else ""
    return (
        f"{path}:{lineno}:{place} not UTF-8 text ({exc.reason}: byte 0x{data[exc.start]:02x} "
        f"at column {len(head) + 1}, byte {exc.start} of the file)"
    )


def read_text(path: Path) -> str:
    """A UTF-8 text file, with errors that name it."""
    return decode(path, read_bytes(path))
