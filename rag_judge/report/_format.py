"""Numbers as text, one way for every renderer (report.md, report.html, the terminal tables,
``compare`` and ``calibrate``): a value that is missing, NaN or infinite is :data:`MISSING`."""

from __future__ import annotations

import math
import re
from collections.abc import Container, Sequence

__all__ = [
    "MISSING",
    "amount",
    "ci_label",
    "interval",
    "markdown_table",
    "md_code",
    "md_text",
    "num",
    "p_value",
    "short",
    "text_table",
]

MISSING = "–"  # the one glyph for "no value" (an en dash)


def _absent(value: float | None) -> bool:
    return value is None or not math.isfinite(value)


def num(value: float | None, spec: str = ".4f") -> str:
    """``value`` in the format ``spec`` (fixed four decimals by default)."""
    return MISSING if value is None or _absent(value) else format(value, spec)


P_FLOOR = 1e-4  # p-values below this print as "<0.0001"


def p_value(value: float | None) -> str:
    """A p-value in one format, four decimals, for every row of a column: ``0.0843``,
    ``1.0000``, and ``<0.0001`` below :data:`P_FLOOR` (where four decimals would print 0)."""
    if value is None or _absent(value):
        return MISSING
    return f"<{P_FLOOR:.4f}" if value < P_FLOOR else f"{value:.4f}"


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


# What starts an inline construct anywhere in a line: escape, code, emphasis, raw HTML or
# autolink ("<"; a ">" alone is text), entity, table cell, strikethrough, math ($, on GitHub),
# and a link or image: its "]" before "(" or "[" (a bare "[x]" links only to a definition,
# which needs a line of its own, and the intervals' "[0.1, 0.2]" stay as written). An "_"
# between two letters or digits cannot open or close emphasis, so rouge1_f1 stays as written.
_MD_INLINE = re.compile(r"[\\`*<&|~$]|\](?=[(\[])|(?<![^\W_])_|_(?![^\W_])")
# What starts a block only at the start of a line: a heading, quote, link definition, setext
# rule, list item or thematic break ("- x", "1. x", "---"; not a number such as -0.5 or 0.62).
_MD_BLOCK_START = re.compile(
    r"^([#>=]|\[(?=[^\]]*\]:)|[-+](?=\s|$)|-(?=[-\s]*$)|\d{1,9}(?=[.)](?:\s|$)))"
)


def _one_line(text: str) -> str:
    # A line break in data would end the list item or table row it sits in (a blank line, the
    # whole block): the text's lines are joined by a space, as Markdown joins a paragraph's.
    return " ".join(str(text).splitlines())


def md_text(text: str) -> str:
    """Text from data (an id, a metric name, a message, a path) as Markdown that renders as
    that text, in a paragraph, list item or table cell: on one line, each character that would
    start markup backslash-escaped (CommonMark lets any ASCII punctuation be escaped), so no
    heading, table, link, image or raw HTML can come from data. Every renderer of Markdown
    (report.md, ``compare``, ``calibrate``, ``audit``) writes data through this or
    :func:`md_code`; HTML is escaped by the page's template the same way."""
    # stripped: Markdown drops the spaces at either end, and four at the start make code
    line = _MD_INLINE.sub(lambda m: "\\" + m.group(0), _one_line(text).strip())
    start = _MD_BLOCK_START.match(line)
    if start:  # a digit run is kept and the "." or ")" after it escaped, as "1\." in CommonMark
        pos = start.end() if start.group(1)[0].isdigit() else 0
        line = line[:pos] + "\\" + line[pos:]
    return line


def md_code(text: str, *, in_table: bool = False) -> str:
    """Text from data as a Markdown code span (shown as written, in monospace): on one line,
    fenced by one more backtick than its longest run of them, padded with a space where it
    starts or ends with one; ``in_table`` escapes ``|``, which GFM splits cells on even
    inside a code span. Empty text is :data:`MISSING`."""
    line = _one_line(text)
    if not line.strip():
        return MISSING
    fence = "`" * (max((len(r) for r in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line[0] in "` " or line[-1] in "` " else ""
    if in_table:
        line = line.replace("|", "\\|")
    return f"{fence}{pad}{line}{pad}{fence}"
