"""What a run's model calls cost, per evaluator and per 1,000 samples: a table for report.md
and the terminal's summary, shown only when a cost is known (docs/prices.md)."""

from __future__ import annotations

from rag_judge.report.format import Column, Table
from rag_judge.report.model import Report, Usage

__all__ = ["cost_table", "dollars"]


def dollars(value: float) -> str:
    """``$0.0123``: four decimals, as a judge run's cost is often under a cent a sample."""
    return f"${value:,.4f}"


def cost_table(report: Report) -> Table | None:
    """A row per priced evaluator and one for the whole run: requests sent, prompt tokens
    (cached ones among them), completion tokens, cost, and cost per 1,000 samples; None when
    the run's cost is unknown (no prices) or nothing was called."""
    steps = report.usage_by_evaluator
    if not steps and report.usage.cost is None:
        return None
    n = len(report.samples)
    rows = [_row(name, usage, n) for name, usage in steps.items()]
    if len(steps) != 1 or report.usage.cost is None:  # one evaluator's row is the total
        rows.append(_row("total", report.usage, n))
    columns = [Column("evaluator", "text")]
    columns += [Column(name) for name in ("requests", "prompt tokens", "cached", "completion")]
    columns += [Column("cost"), Column("per 1,000 samples")]
    notes = [
        "Requests and tokens are the calls made in this run (cache hits cost nothing). "
        "Cached: prompt tokens the provider served from its prompt cache, at its lower price."
    ]
    return Table("Cost", columns, rows, notes=notes, anchor="cost")


def _row(name: str, usage: Usage, n: int) -> list[str]:
    cost = usage.cost
    cells = [name, str(usage.requests), str(usage.prompt_tokens)]
    cells += [str(usage.cached_prompt_tokens), str(usage.completion_tokens)]
    if cost is None:  # the total of a run with an unpriced evaluator
        return [*cells, "unknown", "unknown"]
    per_1000 = dollars(cost * 1000 / n) if n else "–"
    return [*cells, dollars(cost), per_1000]
