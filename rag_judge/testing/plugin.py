"""The pytest plugin: the ``rag_judge_stub`` marker, ``--rag-judge-stub`` and the
``rag_judge_run`` fixture. pytest finds it through the ``pytest11`` entry point named
``rag_judge`` (``-p no:rag_judge`` turns it off).

It imports nothing of rag-judge's layers at load and does nothing for an unmarked test, so a
suite that never evaluates a config runs as fast as without it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

import pytest

from rag_judge.testing import _stub

if TYPE_CHECKING:
    from rag_judge.report.model import Report

__all__ = ["rag_judge_run"]

MARKER = "rag_judge_stub"
OPTION = "--rag-judge-stub"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("rag-judge").addoption(
        OPTION,
        action="store_true",
        help="run every judge of every config evaluated in this session on the offline stub "
        "(as if each test were marked rag_judge_stub)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: every judge of a config that rag_judge.testing.evaluate runs in this test "
        "(its fixtures included) runs on the offline stub provider: no key, no network",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    _forget()  # a session reuses only its own runs (pytester runs sessions in one process)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _forget()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    # Around setup, call and teardown: a fixture set up for a marked test is inside it.
    marked = item.get_closest_marker(MARKER) is not None
    if not (marked or item.config.getoption(OPTION)):
        yield
        return
    with _stub.stub_judges():
        yield


@pytest.fixture(scope="session")
def rag_judge_run() -> Callable[..., Report]:
    """``rag_judge.testing.evaluate``: the session's runs, each config once (the same
    function as the import; a fixture for a suite that takes its tools as fixtures)."""
    from rag_judge.testing._run import evaluate

    return evaluate


def _forget() -> None:
    import sys

    # Only a cache that exists is emptied: the plugin imports no layer of its own accord.
    run = sys.modules.get("rag_judge.testing._run")
    if run is not None:
        run.clear_cache()
