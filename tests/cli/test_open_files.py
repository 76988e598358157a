"""The CLI raises the soft limit on open files: a run past 8,192 samples keeps its per-sample
arrays in open temporary files (``data.column``)."""

from __future__ import annotations

import resource

import pytest

from rag_judge import cli


@pytest.mark.parametrize(
    ("soft", "hard", "wanted"),
    [
        (256, 10_240, 10_240),  # macOS's defaults: up to the hard limit
        (1_024, 1_048_576, 65_536),  # Linux's: to 65,536
        (100_000, 1_048_576, None),  # already above: never lowered
        (1_024, resource.RLIM_INFINITY, 65_536),
    ],
)
def test_the_soft_limit_is_raised_never_lowered(
    monkeypatch: pytest.MonkeyPatch, soft: int, hard: int, wanted: int | None
) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda _: (soft, hard))
    monkeypatch.setattr(resource, "setrlimit", lambda _, limits: calls.append(limits))
    cli._more_open_files()
    assert calls == ([] if wanted is None else [(wanted, hard)])


def test_macos_refusing_65536_under_an_infinite_hard_limit_gets_10240(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []

    def set_limit(_: int, limits: tuple[int, int]) -> None:
        calls.append(limits)
        if limits[0] > 10_240:  # above OPEN_MAX
            raise ValueError("current limit exceeds maximum limit")

    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, resource.RLIM_INFINITY))
    monkeypatch.setattr(resource, "setrlimit", set_limit)
    cli._more_open_files()
    inf = resource.RLIM_INFINITY
    assert calls == [(65_536, inf), (24_576, inf), (10_240, inf)]


def test_a_refused_raise_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise ValueError("not allowed")

    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 1_000_000))
    monkeypatch.setattr(resource, "setrlimit", refuse)
    cli._more_open_files()  # no error: the CLI goes on with the limit it has
