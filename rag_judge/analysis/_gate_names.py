"""Which names a gate can have, known before any work: a misspelled metric is bad input with
the closest names, not a gate that fails after a (possibly paid) run. ``gates.py`` resolves the
names to values; ``rag-judge run`` checks a config's against ``Pipeline.metric_infos()``."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

from rag_judge.analysis.segments import parse_segment_gate
from rag_judge.errors import ConfigError

__all__ = ["BOUNDS", "PPI_FORMS", "PSEUDO", "check_gate_names", "unknown_gate"]

PSEUDO = ("unscored_rate", "error_rate")
BOUNDS = (".ci_low", ".ci_high")
PPI_FORMS = (("_ppi", "estimate"), ("_ppi.ci_low", "ci_low"), ("_ppi.ci_high", "ci_high"))


def unknown_gate(
    name: str,
    metrics: Collection[str],
    *,
    suffixes: bool = True,
    judge: Collection[str] | None = None,
) -> str | None:
    """Why ``name`` can name nothing in a report of ``metrics`` (with the closest names it
    could be), or None when it names something: a metric, and with ``suffixes`` also
    ``unscored_rate``, ``error_rate``, a metric's ``.ci_low``/``.ci_high`` and the ``_ppi``
    forms of the ``judge`` metrics (None: of every metric; whether one has an estimate is
    known only from the report), and a metric's segment form ``ndcg@10[topic=billing]``
    (whether the segment exists is known only from the report)."""
    plain = [*metrics, *(PSEUDO if suffixes else ())]
    forms: list[str] = []
    if suffixes:
        forms = [m + s for m in metrics for s in BOUNDS]
        forms += [m + s for m in (metrics if judge is None else judge) for s, _ in PPI_FORMS]
    if name in plain or name in forms:
        return None
    segment = parse_segment_gate(name)  # ndcg@10[topic=billing]: its segment is known later
    if suffixes and segment is not None and segment.metric in metrics:
        return None
    # The closest names, leaving out a form of one already offered (ndcg@10, not ndcg@10_ppi).
    close: list[str] = []
    for candidate in difflib.get_close_matches(name, [*plain, *forms], n=6):
        if len(close) < 3 and not any(candidate.startswith(c) for c in close):
            close.append(candidate)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    names = ", ".join(plain) or "none"
    more = "; or <metric>.ci_low/.ci_high, <judge metric>_ppi[.ci_low/.ci_high]" if suffixes else ""
    if suffixes and "[" in name:  # the segment form, said only to one who tried it
        more += ", <metric>[key=value]"
    return f"no such metric{hint} (the metrics: {names}{more})"


def check_gate_names(
    names: Iterable[str],
    metrics: Collection[str],
    *,
    what: str = "gate",
    suffixes: bool = True,
    judge: Collection[str] | None = None,
) -> None:
    """A ConfigError for the first of ``names`` that :func:`unknown_gate` finds naming nothing
    among ``metrics``: a misspelled gate is bad input, found before any work, not a gate that
    failed after it."""
    for name in names:
        problem = unknown_gate(name, metrics, suffixes=suffixes, judge=judge)
        if problem is not None:
            raise ConfigError(f"{what} {name!r}: {problem}")
