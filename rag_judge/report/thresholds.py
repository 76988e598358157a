"""Threshold expressions of a gate: ``">= 0.6"``, ``"< 1e-3"``, or a bare number.

They sit low in the layers because the config checks a config's gates at load, and the
gates check a report against them; neither has to import the other.
"""

from __future__ import annotations

import math
import re

from rag_judge.errors import ConfigError

__all__ = ["NAMED_THRESHOLD", "OPERATORS", "meets", "parse_threshold"]

OPERATORS = (">=", "<=", "==", ">", "<")  # longest first, so ">=" is never read as ">"
_EXPR = re.compile(r"^\s*(>=|<=|==|>|<)\s*(\S+)\s*$")
# ``ndcg@10>=0.6``: the form of ``rag-judge gate --threshold``.
NAMED_THRESHOLD = re.compile(
    r"^\s*(?P<metric>[^<>=\s]+)\s*(?P<op>>=|<=|==|>|<)\s*(?P<value>\S+)\s*$"
)


def parse_threshold(expr: str | float, *, metric: str = "") -> tuple[str, float]:
    """``">= 0.6"`` → ``(">=", 0.6)``. A bare number (not a string) means ``>=``."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        op, value = ">=", float(expr)
    else:
        match = _EXPR.match(str(expr))
        where = f"gate {metric!r}: " if metric else ""
        if match is None:
            raise ConfigError(
                f"{where}bad threshold {expr!r}; expected '<operator> <number>' with an "
                f"operator of {', '.join(OPERATORS)} (e.g. '>= 0.6')"
            )
        op, value = match.group(1), _number(match.group(2), f"{where}threshold {expr!r}")
    if not math.isfinite(value):
        raise ConfigError(f"gate {metric!r}: threshold {expr!r} is not a finite number")
    return op, value


def meets(value: float, op: str, bound: float) -> bool:
    """Whether ``value`` satisfies ``op bound``."""
    if op == ">=":
        return value >= bound
    if op == ">":
        return value > bound
    if op == "<=":
        return value <= bound
    if op == "<":
        return value < bound
    return math.isclose(value, bound, rel_tol=1e-9, abs_tol=1e-12)  # "==": means are floats


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not a number") from None
