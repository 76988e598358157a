"""The Report: per-sample scores, aggregates with bootstrap CIs, signatures; JSON and Markdown."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from rag_judge._version import __version__
from rag_judge.errors import DataError
from rag_judge.llm.base import Usage

if TYPE_CHECKING:
    from rag_judge.data.sample import Sample

__all__ = ["MetricSummary", "Report", "SampleResult", "Usage"]


class MetricSummary(BaseModel):
    """Aggregate of one metric. ``n`` counts scored samples; ``errors`` those that failed."""

    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int
    errors: int = 0
    unscored: int = 0  # of the errors, judge replies that could not be read as a 1-5 verdict
    aggregate: str = "mean"


class SampleResult(BaseModel):
    id: str
    scores: dict[str, float | None] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    judgments: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Report(BaseModel):
    """Everything one run produced. ``report.json`` is this model, dumped (a contract)."""

    summary: dict[str, MetricSummary]
    samples: list[SampleResult]
    signatures: dict[str, str]
    usage: Usage = Field(default_factory=Usage)
    config: dict[str, Any] = Field(default_factory=dict)
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    rag_judge_version: str = __version__

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read a report.json, or the report.json inside a run folder."""
        path = Path(path)
        if path.is_dir():
            path = path / "report.json"
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path}: file not found") from None
        except ValueError as exc:
            raise DataError(f"{path}: not a rag-judge report.json ({exc})") from None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False)

    def write(
        self, out_dir: str | Path, samples: Sequence[Sample] | None = None
    ) -> dict[str, Path]:
        """Write report.json, report.md and report.html into ``out_dir``; returns the paths.

        With the dataset's ``samples``, the HTML drill-down also shows each question, answer,
        references and contexts.
        """
        from rag_judge.report.html import write_html  # html_report imports this module

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "report.json", "md": out / "report.md"}
        _atomic_write(paths["json"], self.to_json() + "\n")
        _atomic_write(paths["md"], self.to_markdown())
        paths["html"] = write_html(self, out / "report.html", samples)
        return paths

    def to_markdown(self) -> str:
        name = self.config.get("name", "rag-judge report")
        lines = [
            f"# {name}",
            "",
            f"{len(self.samples)} samples · rag-judge {self.rag_judge_version} · {self.created}",
            "",
            self.summary_table(),
            "",
        ]
        failed = [(s.id, m, e) for s in self.samples for m, e in s.errors.items()]
        if failed:
            lines += ["## Errors", "", f"{len(failed)} metric values could not be computed:", ""]
            lines += [f"- `{sid}` · {metric}: {msg}" for sid, metric, msg in failed[:50]]
            if len(failed) > 50:
                lines.append(f"- … and {len(failed) - 50} more (see report.json)")
            lines.append("")
        lines += ["## Signatures", "", "| metric | signature |", "|---|---|"]
        lines += [f"| {m} | `{_cell(s)}` |" for m, s in self.signatures.items()]
        return "\n".join(lines) + "\n"

    def summary_table(self) -> str:
        conf = self.config.get("bootstrap", {}).get("confidence", 0.95)
        head = f"| metric | mean | {conf:.0%} CI | n | errors | unscored | aggregate |"
        rows = [head, "|---|---:|---:|---:|---:|---:|---|"]
        for metric, s in self.summary.items():
            ci = f"[{s.ci_low:.4f}, {s.ci_high:.4f}]" if s.ci_low is not None else "–"
            mean = f"{s.mean:.4f}" if s.mean is not None else "–"
            rows.append(
                f"| {metric} | {mean} | {ci} | {s.n} | {s.errors} | {s.unscored} | {s.aggregate} |"
            )
        return "\n".join(rows)


def _cell(text: str) -> str:
    """Escape a pipe so a signature stays inside its Markdown table cell."""
    return text.replace("|", "\\|")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
