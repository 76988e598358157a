"""rag-judge tests; the layout mirrors the package."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# What a user must never read in an error: pydantic's wording, its locations, type names.
PYDANTIC_WORDS = (
    "Input should be",
    "valid tuple",
    "valid dictionary",
    "valid list",
    "instance of",
    "Extra inputs are not permitted",
    "Field required",
    "<root>",
    "[key]",
    "after validation",
    "Value error",
    "errors.pydantic.dev",
    "For further information",
    "pydantic",
    "Tuple",
    "NoneType",
)


def assert_plain(message: str, *class_names: str) -> None:
    """``message`` holds none of ``PYDANTIC_WORDS`` nor the model ``class_names``."""
    leaked = [w for w in (*PYDANTIC_WORDS, *class_names) if w in message]
    assert not leaked, f"{leaked} in {message!r}"
