"""Reading a whole file with errors that name it (no pydantic: the TREC readers use this)."""

from __future__ import annotations

from pathlib import Path

from rag_judge.errors import DataError

__all__ = ["decode", "read_bytes", "read_text"]


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None


def decode(path: Path, data: bytes) -> str:
    """UTF-8 text as a text-mode read gives it: no byte-order mark, universal newlines."""
    try:
        text = data.decode("utf-8-sig")  # -sig: a byte-order mark is not data
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def read_text(path: Path) -> str:
    """A UTF-8 text file, with errors that name it."""
    return decode(path, read_bytes(path))
