"""rag-judge inside a team's own pytest suite: ``evaluate`` a config, ``assert_gates`` on it.

>>> from rag_judge.testing import assert_gates, evaluate
>>> report = evaluate("configs/demo.yaml")  # doctest: +SKIP
>>> assert_gates(report, {"ndcg@5": ">= 0.6"})  # doctest: +SKIP

The same config on the same data runs once per session (``cache_info`` counts the runs).
The pytest plugin (:mod:`rag_judge.testing.plugin`, found through the ``pytest11`` entry
point) adds the ``rag_judge_stub`` marker, the ``--rag-judge-stub`` option and the
``rag_judge_run`` fixture. docs/pytest.md walks through an example.

The names load on first use, so the plugin costs a suite that never calls them nothing.
"""

import typing as _typing

from rag_judge._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from rag_judge.testing._gates import assert_gates
    from rag_judge.testing._run import CacheInfo, cache_info, clear_cache, evaluate
    from rag_judge.testing._stub import stub_judges, with_stub_judges

_HOME = {
    "assert_gates": "rag_judge.testing._gates",
    **dict.fromkeys(
        ["CacheInfo", "cache_info", "clear_cache", "evaluate"], "rag_judge.testing._run"
    ),
    **dict.fromkeys(["stub_judges", "with_stub_judges"], "rag_judge.testing._stub"),
}

__getattr__ = _lazy_names("rag_judge.testing", _HOME, globals())

__all__ = [
    "CacheInfo",
    "assert_gates",
    "cache_info",
    "clear_cache",
    "evaluate",
    "stub_judges",
    "with_stub_judges",
]
