"""Numbers and tables as text, one way for every renderer (report.md, report.html, the terminal
tables of ``run``, ``compare``, ``calibrate``, ``audit`` and ``pairwise``).

A value that is missing, NaN or infinite is :data:`MISSING`. An analysis builds one
:class:`Table` of formatted cells; :func:`text_table`, :func:`markdown_table` and
:func:`html_table` draw that same table for a terminal, a Markdown file and the HTML page.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from markupsafe import escape

__all__ = [
    "MISSING",
    "Column",
    "Table",
    "amount",
    "ci_label",
    "html_table",
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


# ---- tables ---------------------------------------------------------------------------------

ColumnKind = Literal["text", "number"]


@dataclass(frozen=True)
class Column:
    """A column's heading and what its cells hold. Text (names, words, data) is aligned left;
    numbers, formatted by this module, are aligned right."""

    name: str
    kind: ColumnKind = "number"


@dataclass(frozen=True)
class Table:
    """One analysis's result as rows of formatted cells (pydantic_evals' ``TableResult``).
    ``notes`` are lines said under the rows: what a column means, how it was computed.
    ``title`` and ``anchor`` name the table where a page has headings and links."""

    title: str
    columns: list[Column]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    anchor: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"{self.title}: {len(row)} cells for {len(self.columns)} columns")

    @property
    def headed(self) -> bool:
        """Whether the table has a heading row: a table of keys and values has none."""
        return any(c.name for c in self.columns)


def text_table(table: Table, *, rule: bool = False) -> str:
    """``table`` for a terminal: the heading row (if any), a dashed rule under it when asked,
    the rows, then the notes, a line each. Columns are two spaces apart, text left and numbers
    right. A cell is one line: its runs of whitespace become one space. No line ends in spaces."""
    rows = [[" ".join(cell.split()) for cell in row] for row in table.rows]
    if table.headed:
        rows.insert(0, [c.name for c in table.columns])
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(len(table.columns))]
    lines = [
        "  ".join(
            c.ljust(w) if col.kind == "text" else c.rjust(w)
            for c, w, col in zip(row, widths, table.columns)
        ).rstrip()
        for row in rows
    ]
    if rule and table.headed:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, *table.notes])


def markdown_table(table: Table) -> str:
    """``table`` as a GitHub Markdown table, then its notes as a list. Text cells and notes are
    written through :func:`md_text`. A number cell is written as formatted, on one line, with
    its ``|`` escaped. The headings are the analysis's own words, written as they are."""
    cols = table.columns
    lines = [
        "| " + " | ".join(c.name for c in cols) + " |",
        "|" + "".join("---|" if c.kind == "text" else "---:|" for c in cols),
    ]
    for row in table.rows:
        cells = [
            md_text(v) if c.kind == "text" else _one_line(v).replace("|", "\\|")
            for c, v in zip(cols, row)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if table.notes:
        lines += ["", *(f"- {md_text(note)}" for note in table.notes)]
    return "\n".join(lines)


def html_table(table: Table) -> str:
    """``table`` for the HTML page: a ``<table class=summary>`` whose first column's cells are
    row headings and whose numbers sit in ``class=num`` cells, then each note as a paragraph.
    Every heading, cell and note is escaped. A cell is one line, as the page's rows are."""

    def opening(tag: str, column: Column) -> str:
        return f"<{tag} class=num>" if column.kind == "number" else f"<{tag}>"

    head = "".join(f"{opening('th', c)}{escape(c.name)}</th>" for c in table.columns)
    body = ""
    for row in table.rows:
        first, *rest = (escape(_one_line(cell)) for cell in row)
        cells = [f"<th scope=row>{first}</th>"]
        cells += [f"{opening('td', c)}{v}</td>" for c, v in zip(table.columns[1:], rest)]
        body += f"<tr>{''.join(cells)}</tr>\n"
    notes = "".join(f"<p class=note>{escape(note)}</p>" for note in table.notes)
    return (
        f"<table class=summary><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>{notes}"
    )
