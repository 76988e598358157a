"""docs/extending.md runs as written: its Python blocks are executed in order, in one
namespace, and what they print is what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from rag_judge import EVALUATORS
from rag_judge._version import __version__
from rag_judge.llm.providers import PROVIDERS
from tests import REPO

PAGE = REPO / "docs" / "extending.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


@pytest.fixture
def clean_registries():
    evaluators, providers = dict(EVALUATORS), dict(PROVIDERS)
    yield
    EVALUATORS.clear()
    EVALUATORS.update(evaluators)
    PROVIDERS.clear()
    PROVIDERS.update(providers)


def test_the_worked_examples_run(clean_registries: None) -> None:
    blocks = _python_blocks()
    assert len(blocks) == 4
    namespace: dict[str, object] = {"__name__": "extending_doc"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)
    assert out.getvalue().splitlines() == [
        "1.0",
        "field 'answer' is missing",
        f"exact_match|casefold:yes|version:{__version__}|ci:bootstrap-1000@0.95|seed:0",
        "lower",  # a metric of one's own declares its direction
        "4.0",
        "echo-2 says so",
        "1",
    ]
    assert EVALUATORS["exact_match"] is namespace["ExactMatch"]
    assert "echo" in PROVIDERS
