"""The outcome of a pairwise comparison: counts, B's win rate over A with its CI, position
consistency, every pair's verdicts, and its JSON / Markdown / table renderings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from rag_judge._version import __version__
from rag_judge.judge.preference import Order, Side, Winner
from rag_judge.llm.base import Usage
from rag_judge.report.format import Column, Table, text_table
from rag_judge.report.model import Failure, Signature

__all__ = ["PairOutcome", "PairVerdict", "PairwiseResult"]


class PairVerdict(BaseModel):
    """One order's verdict: the order asked, the positional winner and the side it names (None
    when unscored or failed; ``reason`` then says why), the last reply verbatim, requests made
    (1 + re-asks; a call that failed for good counts the engine's attempts at it), whether
    every reply was cached, and a scoring client's distribution over "1", "2", "tie"."""

    model_config = ConfigDict(extra="forbid")

    order: Order
    winner: Winner | None = None
    preferred: Side | None = None
    reason: str = ""
    raw: str = ""
    attempts: int = 1
    cached: bool = False
    probs: dict[str, float] | None = None
    # Why there is no verdict, typed (unscored: the reply held none; error: the call failed);
    # ``reason`` is its text then, as the outputs print it.
    failure: Failure | None = None

    def to_dict(self) -> dict[str, Any]:
        """As in the JSON output: ``probs`` only where a distribution was read; the failure
        as its text, in ``reason``."""
        return self.model_dump(exclude={"failure"} | ({"probs"} if self.probs is None else set()))


@dataclass
class PairOutcome:
    """One question: its outcome (None when unscored), whether both orders agreed, why it is
    unscored, and both verdicts."""

    id: str
    outcome: Side | None
    consistent: bool | None
    reason: str | None
    verdicts: list[PairVerdict]


# ---- the result -------------------------------------------------------------------------------


@dataclass
class PairwiseResult:
    """Outcome counts, B's win rate over A with its bootstrap CI, position consistency and
    every pair's verdicts. ``n`` counts scored pairs; unscored ones are counted, not averaged."""

    rubric: str
    signature: Signature
    labels: tuple[str, str]
    pairs: list[PairOutcome]
    only_a: list[str]
    only_b: list[str]
    win_rate: float | None
    ci: tuple[float | None, float | None]
    resamples: int
    confidence: float
    seed: int
    usage: Usage = field(default_factory=Usage)

    def _count(self, outcome: Side) -> int:
        return sum(p.outcome == outcome for p in self.pairs)

    @property
    def counts(self) -> dict[str, int]:
        scored = [p for p in self.pairs if p.outcome is not None]
        return {
            "n": len(scored),
            "a_wins": self._count("A"),
            "b_wins": self._count("B"),
            "ties": self._count("tie"),
            "inconsistent": sum(p.consistent is False for p in scored),
            "unscored": len(self.pairs) - len(scored),
            "only_a": len(self.only_a),
            "only_b": len(self.only_b),
        }

    @property
    def position_consistency(self) -> float | None:
        """Share of scored pairs whose two verdicts agree after mapping back to A/B."""
        c = self.counts
        return (c["n"] - c["inconsistent"]) / c["n"] if c["n"] else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "a": self.labels[0],
            "b": self.labels[1],
            "win_rate_b": self.win_rate,
            "ci_low": self.ci[0],
            "ci_high": self.ci[1],
            **self.counts,
            "position_consistency": self.position_consistency,
            "only_a_ids": list(self.only_a),
            "only_b_ids": list(self.only_b),
            "signature": self.signature.render(),
            "resamples": self.resamples,
            "confidence": self.confidence,
            "seed": self.seed,
            "usage": self.usage.model_dump(),
            "samples": [
                {
                    "id": p.id,
                    "outcome": p.outcome,
                    "consistent": p.consistent,
                    "unscored_reason": p.reason,
                    "verdicts": [v.to_dict() for v in p.verdicts],
                }
                for p in self.pairs
            ],
            "rag_judge_version": __version__,
        }

    def _summary_rows(self) -> list[tuple[str, str]]:
        c, pc = self.counts, self.position_consistency
        a, b = self.labels
        return [
            (_title(a, b), _num(self.win_rate)),
            (f"{self.confidence:.0%} CI", f"[{_num(self.ci[0])}, {_num(self.ci[1])}]"),
            ("scored pairs", str(c["n"])),
            ("A wins", str(c["a_wins"])),
            ("B wins", str(c["b_wins"])),
            ("ties", f"{c['ties']} ({c['inconsistent']} from verdicts that flipped with order)"),
            ("unscored", str(c["unscored"])),
            (
                "position consistency",
                "–" if pc is None else f"{pc:.4f} ({c['n'] - c['inconsistent']}/{c['n']})",
            ),
            ("only in A / only in B", f"{c['only_a']} / {c['only_b']}"),
        ]

    def to_table(self) -> str:
        keys = [Column("", "text"), Column("", "text")]  # keys and values: no heading row
        summary = Table(f"pairwise {self.rubric}", keys, [list(r) for r in self._summary_rows()])
        out = [summary.title, text_table(summary)]
        if self.pairs:
            columns = [Column(name, "text") for name in _VERDICT_HEADER]
            verdicts = Table("verdicts", columns, [_verdict_row(p) for p in self.pairs])
            out += ["", text_table(verdicts)]
        return "\n".join([*out, "", _footer(self)])

    def to_markdown(self) -> str:
        out = [f"# Pairwise comparison: {self.rubric}", "", "| | |", "|---|---:|"]
        out += [f"| {k} | {v} |" for k, v in self._summary_rows()]
        out += ["", "| " + " | ".join(_VERDICT_HEADER) + " |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(_md(c) for c in _verdict_row(p)) + " |" for p in self.pairs]
        return "\n".join([*out, "", _footer(self), ""])


def _title(a: str, b: str) -> str:
    return "win rate of B over A" if (a, b) == ("A", "B") else f"win rate of B ({b}) over A ({a})"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


_VERDICT_HEADER = ["id", "outcome", "A first", "B first", "notes"]


def _verdict_row(pair: PairOutcome) -> list[str]:
    """One question's cells: id, outcome, each order's verdict with its reason, a note."""
    by_order = {v.order: v for v in pair.verdicts}
    note = pair.reason or ("" if pair.consistent else "verdict flipped with the order")
    cells = [_cell(by_order.get(o)) for o in ("AB", "BA")]
    return [pair.id, pair.outcome or "unscored", *cells, note]


def _cell(verdict: PairVerdict | None) -> str:
    if verdict is None:
        return ""
    return f"{verdict.preferred or 'unscored'}: {verdict.reason}"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _footer(result: PairwiseResult) -> str:
    return (
        f"win rate = (B wins + 0.5 x ties) / scored pairs; each pair judged in both orders, a "
        f"flipped verdict counts as a tie; CI: percentile bootstrap, {result.resamples} "
        f"resamples, seed {result.seed}\nsignature: {result.signature.render()}"
    )
