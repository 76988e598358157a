"""Numbers as text, one way for every renderer (report.md, report.html, the terminal tables,
``compare`` and ``calibrate``): a value that is missing, NaN or infinite is :data:`MISSING`."""

from __future__ import annotations

import math
from collections.abc import Container, Sequence

__all__ = [
    "MISSING",
    "amount",
    "ci_label",
    "interval",
    "markdown_table",
    "num",
    "short",
    "text_table",
]

MISSING = "–"  # the one glyph for "no value" (an en dash)


def _absent(value: float | None) -> bool:
    return value is None or not math.isfinite(value)


def num(value: float | None, spec: str = ".4f") -> str:
    """``value`` in the format ``spec`` (fixed four decimals by default)."""
    return MISSING if value is None or _absent(value) else format(value, spec)


def short(value: float | None, digits: int = 3) -> str:
    """At most ``digits`` decimals, trailing zeros dropped: 5.0 → ``5``, 0.250 → ``0.25``."""
    if value is None or _absent(value):
        return MISSING
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


def interval(low: float | None, high: float | None, spec: str = ".4f") -> str:
    """``[low, high]``, or :data:`MISSING` when either bound is."""
    if low is None or high is None or _absent(low) or _absent(high):
        return MISSING
    return f"[{format(low, spec)}, {format(high, spec)}]"


def amount(value: float | None) -> str:
    """A tally or an amount with thousands separators: ints whole, floats to six figures."""
    if value is None or _absent(value):
        return MISSING
    return f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"


def ci_label(confidence: float) -> str:
    """The column heading of an interval at ``confidence``: ``95% CI``."""
    return f"{confidence:.0%} CI"


def text_table(rows: Sequence[Sequence[str]], left: Container[int] = (0,)) -> str:
    """``rows`` (the heading first) as columns two spaces apart, for a terminal: the columns in
    ``left`` aligned left (words), the others right (numbers); no trailing spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    )


def markdown_table(
    head: Sequence[str], rows: Sequence[Sequence[str]], left: Container[int] = (0,)
) -> str:
    """A Markdown table: the columns in ``left`` aligned left, the others right. The cells are
    written as given (a caller escapes what needs it)."""
    align = "|" + "".join("---|" if i in left else "---:|" for i in range(len(head)))
    lines = ["| " + " | ".join(head) + " |", align]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
