"""report.html: one self-contained page (inline CSS, vanilla JS, inline SVG), no network.

The page is one Jinja template (``_templates.py``) rendered with autoescaping, so every string
from the report or the dataset (answers, judge reasons, raw replies, sample ids) is escaped by
default; a Content-Security-Policy allows only this page's own script (by hash), so even a
missed escape could not run injected code or load anything remotely.

What the page shows comes from the Report model alone: each metric's kind and scale (a judge's
1-5 rubric is drawn as five bars; its ``normalises`` twin is not drawn twice), the interval
level from ``report.confidence``, and each sample as it was evaluated (``SampleResult.sample``:
with a target, the target's answer and contexts). ``charts.py`` computes the SVGs' geometry;
the template's macros draw it.

The page explains its numbers: each context's gold grade and the relevant documents that were
not retrieved, the sample table's columns grouped by kind, and the library versions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from jinja2 import DictLoader, Environment, StrictUndefined
from markupsafe import Markup, escape

from rag_judge.data.sample import Context, Sample
from rag_judge.report._assets import CSS, JS
from rag_judge.report._format import MISSING, amount, ci_label, interval, num, short
from rag_judge.report._templates import PAGE, SVG
from rag_judge.report.charts import (
    Bins,
    CiBar,
    Histogram,
    Scale,
    bin_scores,
    ci_bar,
    histogram,
    k_chart,
)
from rag_judge.report.model import Judgment, MetricKind, MetricSummary, Report, Signature

__all__ = [
    "column_groups",
    "context_grades",
    "k_families",
    "library_versions",
    "not_retrieved",
    "render_html",
    "scale_of",
    "svg_histogram",
    "svg_k_chart",
    "write_html",
]

_AT_K = re.compile(r"^(.+)@(\d+)$")
UNJUDGED = "unjudged"
# The sample table's column groups, in order: answer quality first, so a judge's scores are
# not off-screen behind a score of retrieval columns.
_GROUPS: tuple[tuple[str, frozenset[MetricKind]], ...] = (
    ("judge", frozenset({MetricKind.JUDGE})),
    ("generation", frozenset({MetricKind.LEXICAL, MetricKind.EMBEDDING})),
    ("retrieval", frozenset({MetricKind.RETRIEVAL})),
    ("other", frozenset({MetricKind.LATENCY, MetricKind.CUSTOM})),
)
# Distributions named in the Run section; the optional ones say "not installed" when absent.
_LIBRARIES = (
    "numpy",
    "pydantic",
    "torch",
    "transformers",
    "sacrebleu",
    "rouge-score",
    "openai",
)
NOT_INSTALLED = "not installed"
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{}'"


def scale_of(metric: str, report: Report) -> Scale:
    """The scale the metric's kind declares (``MetricSummary.scale``; discrete for a judge
    rubric on integers), whatever values were observed: one a hair outside it (float error)
    is clipped into it when drawn. Only an unbounded scale (``hi`` None) uses the values' own
    range."""
    s = report.summary[metric]
    lo, hi = s.scale
    if hi is None:
        return Scale(lo, None)
    rubric = s.kind is MetricKind.JUDGE and s.normalises is None
    return Scale(lo, hi, discrete=rubric and float(lo).is_integer() and float(hi).is_integer())


def k_families(summary: Mapping[str, MetricSummary]) -> dict[str, list[tuple[int, MetricSummary]]]:
    """Metric families measured at two or more cut-offs (``ndcg@3``, ``ndcg@5``), by k."""
    families: dict[str, list[tuple[int, MetricSummary]]] = {}
    for name, s in summary.items():
        match = _AT_K.match(name)
        if match and s.mean is not None:
            families.setdefault(match.group(1), []).append((int(match.group(2)), s))
    return {f: sorted(p, key=lambda x: x[0]) for f, p in families.items() if len(p) > 1}


def column_groups(report: Report, metrics: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``metrics`` grouped by kind for the sample table (judge, generation: lexical and
    embedding, retrieval, other), each group in summary order; empty groups left out."""
    groups = [
        (label, [m for m in metrics if report.summary[m].kind in kinds]) for label, kinds in _GROUPS
    ]
    return [(label, ms) for label, ms in groups if ms]


def context_grades(sample: Sample) -> list[tuple[Context, float | None]]:
    """Each retrieved context with its gold grade: its own ``relevance``, else the sample's
    ``relevance`` table's grade for its id; None (unjudged) when neither has one."""
    table = sample.relevance or {}
    out: list[tuple[Context, float | None]] = []
    for ctx in sample.contexts:
        grade = ctx.relevance
        if grade is None and ctx.id is not None:
            grade = table.get(ctx.id)
        out.append((ctx, grade))
    return out


def not_retrieved(sample: Sample) -> list[tuple[str, float]]:
    """Judged-relevant documents (grade > 0 in the sample's ``relevance`` table) that are not
    among the retrieved contexts, highest grade first."""
    retrieved = {c.id for c in sample.contexts if c.id is not None}
    missed = [(d, g) for d, g in (sample.relevance or {}).items() if g > 0 and d not in retrieved]
    return sorted(missed, key=lambda p: -p[1])


def library_versions(report: Report) -> list[tuple[str, str]]:
    """rag-judge's version (the run's), Python's, and the installed versions of the libraries
    that change numbers, read when the page is rendered ("not installed" where absent)."""
    return [
        ("rag-judge", report.rag_judge_version),
        ("python", platform.python_version()),
        *((name, _version(name)) for name in _LIBRARIES),
    ]


def _version(dist: str) -> str:
    for name in dict.fromkeys((dist, dist.replace("-", "_"))):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return NOT_INSTALLED


def render_html(report: Report) -> str:
    """The whole page as one string."""
    script_hash = base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
    shown = [m for m in report.summary if not _is_twin(m, report)]
    scales = {m: scale_of(m, report) for m in report.summary}
    dataset = report.config.get("dataset")
    embedded = any(r.sample is not None for r in report.samples)
    page = _env().get_template("page")
    return page.render(
        report=report,
        name=str(report.config.get("name") or "rag-judge report"),
        csp=Markup(_CSP.format(script_hash)),  # constant and base64: no quote to escape
        css=Markup(CSS),
        js=Markup(JS),
        ci_label=ci_label(report.confidence),
        summary=[
            _SummaryRow(m, s, ci_bar(s, scales[m])) for m, s in report.summary.items() if m in shown
        ],
        twins=[m for m in report.summary if m not in shown],
        stub_rubrics=report.stub_judged(),
        distributions=[
            _Distribution(m, s, histogram(bin_scores(_values(report, m), scales[m])))
            for m, s in report.summary.items()
            if m in shown and s.n > 0
        ],
        families=[(f, k_chart(points)) for f, points in k_families(report.summary).items()],
        not_embedded=str(dataset) if dataset and not embedded else "",
        matrix=_matrix(report, shown, scales),
        usage=list(report.usage.model_dump().items()),
        versions=library_versions(report),
        config=json.dumps(report.config, indent=2, ensure_ascii=False, default=str),
    )


def write_html(report: Report, path: str | Path) -> Path:
    """Write :func:`render_html`'s page to ``path`` (atomically) and return the path."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(report), encoding="utf-8")
    tmp.replace(path)
    return path


# --- what the template draws ------------------------------------------------------------------


@dataclass(frozen=True)
class _SummaryRow:
    metric: str
    s: MetricSummary
    bar: CiBar | None


@dataclass(frozen=True)
class _Distribution:
    metric: str
    s: MetricSummary
    histogram: Histogram


@dataclass(frozen=True)
class _Cell:
    value: float | None
    failed: bool
    shade: int


@dataclass(frozen=True)
class _Row:
    id: str
    err: int
    cells: list[_Cell]


@dataclass(frozen=True)
class _Matrix:
    groups: list[tuple[str, list[str]]]
    metrics: list[str]
    rows: list[_Row]


def _matrix(report: Report, shown: list[str], scales: Mapping[str, Scale]) -> _Matrix:
    groups = column_groups(report, shown)
    metrics = [m for _, ms in groups for m in ms]
    rows = [
        _Row(
            r.id,
            int(bool(r.errors)),
            [_cell(r.scores.get(m), scales[m], m in r.errors) for m in metrics],
        )
        for r in report.samples
    ]
    return _Matrix(groups, metrics, rows)


def _cell(value: float | None, scale: Scale, failed: bool) -> _Cell:
    frac = 0.0
    if value is not None and scale.hi is not None:
        frac = (value - scale.lo) / ((scale.hi - scale.lo) or 1.0)
    return _Cell(value, failed, min(max(int(frac * 5), 0), 4))


# --- the template's environment -------------------------------------------------------------


@cache
def _env() -> Environment:
    env = Environment(
        loader=DictLoader({"page": PAGE, "svg": SVG}),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=num,
        short=short,
        interval=interval,
        amount=amount,
        f1=lambda v: f"{v:.1f}",
        repr=repr,
        plural=_plural,
        clip=_clip,
        break_after=_break_after,
        signature=_signature,
        extras=_extras,
    )
    env.globals.update(
        missing=MISSING,
        unjudged=UNJUDGED,
        context_grades=context_grades,
        not_retrieved=not_retrieved,
    )
    return env


def _svg() -> Any:
    """The SVG macros, callable from Python (each returns markup)."""
    return _env().get_template("svg").module


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _break_after(text: str, sep: str) -> Markup:
    """``text``, escaped, with a line-break opportunity after each ``sep``."""
    return Markup(escape(sep) + Markup("<wbr>")).join(text.split(sep))


def _signature(sig: Signature) -> Markup:
    """The rendered signature with a line-break opportunity after each ``|``, nested ones too."""
    parts = [sig.name, *(f"{k}:{v}" for d in (sig.options, sig.run) for k, v in d.items())]
    return Markup("|<wbr>").join(_break_after(p, "|") for p in parts)


def _extras(j: Judgment) -> str:
    """The scoring mode's own fields of a judgment (probabilities, samples, spread) and what
    the server did differently from what was asked, as JSON."""
    extra = {
        "probs": j.probs,
        "verdict": j.verdict,
        "scores": j.scores,
        "spread": j.spread,
        "unscored_choices": j.unscored_choices,
        "logprobs_missing": j.logprobs_missing,
        "choices_received": j.choices_received,
        "finish_reason": j.finish_reason,
        "structured_output": j.structured_output,
        "schema_valid": j.schema_valid,
        "label_mass": j.label_mass,
    }
    # A request that kept its response format, and a reply that matched it, are the norm.
    usual = {"structured_output": True, "schema_valid": True}
    shown = {k: v for k, v in extra.items() if v is not None and usual.get(k) is not v}
    return json.dumps(shown, ensure_ascii=False) if shown else ""


def _values(report: Report, metric: str) -> list[float]:
    return [v for v in report.column(metric).values() if v is not None]


def _is_twin(metric: str, report: Report) -> bool:
    """A judge's normalised twin restates its rubric on [0, 1]; the page shows one of them."""
    normalises = report.summary[metric].normalises
    return normalises is not None and normalises in report.summary


def svg_histogram(bins: Bins, width: int = 240, height: int = 96) -> str:
    """Bars with a tooltip each; the x axis names the range ends (or each discrete score)."""
    return str(_svg().histogram(histogram(bins, width, height)))


def svg_k_chart(points: Sequence[tuple[int, MetricSummary]], width: int = 260) -> str:
    """Mean against k with the CI as a shaded band; y is [0, 1] unless a value leaves it."""
    return str(_svg().kchart(k_chart(points, width)))
