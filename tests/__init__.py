"""rag-judge tests; the layout mirrors the package."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
