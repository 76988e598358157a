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
not retrieved, a grounding judgment's claims marked in the answer by verdict (an abstention
badged), the metrics that do not apply to a sample kept apart from its failures, the sample
table's columns grouped by kind (``_sample_view.py``), and the library versions.

A report scored per turn or per step groups its summary by level and says where conversations
degraded (``report/levels.py``); a sample with turns shows them, their steps and tool calls,
the values each scored and the step where a failing turn degraded (``_conversation_view.py``).

The page stays small whatever the number of samples: ``_inline.py`` picks the samples it holds
(every one while they fit in :data:`SAMPLE_BUDGET` bytes, else at most :data:`INLINE_ROWS`, the
most telling first, texts cut) and says which; summary, histograms and charts are computed over
every sample either way. ``_jinja.py`` holds the template's environment and filters.

What the run concluded about its judges (bias-corrected estimates, jury agreement, the audit)
are the tables of ``report/judge_tables.py``, drawn by ``format.html_table`` as report.md and the
terminal draw them. The review mode (``_review.py``, its
script ``_review_js.py``) lets a person label the samples the page holds, the most uncertain
verdicts first, and export the labels for ``calibrate``; its data is a JSON block the browser
never runs, so the CSP still allows one script only. Given a label plan (``label-plan --html``),
the review follows the plan's queue and says when to stop (``_plan_js.py``). Given retrieval
metrics from judge grades, it also takes people's 0-3 grades of each query's top-k chunks, in a
seeded random order (``_review_chunks.py``, its script ``_chunks_js.py``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from markupsafe import Markup

from rag_judge.data.sample import Sample
from rag_judge.report.format import ci_label
from rag_judge.report.html._assets import CONVERSATION_CSS, CSS
from rag_judge.report.html._assets import JS as TABLE_JS
from rag_judge.report.html._chunks_js import CHUNKS_CSS, CHUNKS_JS
from rag_judge.report.html._inline import INLINE_ROWS, SAMPLE_BUDGET, SEED, Columns, inline_samples
from rag_judge.report.html._jinja import env, svg_macros
from rag_judge.report.html._plan_js import PLAN_JS, plan_json
from rag_judge.report.html._review import review_json, review_note, review_rubrics
from rag_judge.report.html._review_chunks import chunk_json, chunk_note, chunk_review
from rag_judge.report.html._review_js import REVIEW_CSS, REVIEW_JS
from rag_judge.report.html._sample_view import column_groups, context_grades, is_twin, not_retrieved
from rag_judge.report.html.charts import (
    Bins,
    CiBar,
    Histogram,
    Scale,
    ci_bar,
    histogram,
    k_chart,
)
from rag_judge.report.judge_tables import judge_tables
from rag_judge.report.levels import (
    LEVEL_TITLES,
    degradation_table,
    level_groups,
    level_note,
    unit_tables,
)
from rag_judge.report.model import MetricKind, MetricSummary, Report, SampleFile
from rag_judge.report.result import level_of
from rag_judge.report.segments import segment_tables

__all__ = [
    "INLINE_ROWS",
    "SAMPLE_BUDGET",
    "SEED",
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
_NOT_CUTOFFS = ("iprec", "rprec_mult")  # their "@" is a recall level or a multiple of R
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
MAX_UNIT_ROWS = 2000  # per level: the page stays light; report.json holds every unit
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{}'"
JS = TABLE_JS + "\n" + REVIEW_JS  # the page's one script: its hash is in the CSP


def scale_of(metric: str, report: Report) -> Scale:
    """The scale the metric's kind declares (``MetricSummary.scale``; discrete for a judge
    rubric on integers), whatever values were observed: one a hair outside it (float error)
    is clipped into it when drawn. Only an unbounded scale (``hi`` None) uses the values' own
    range."""
    s = report.summary[metric]
    lo, hi = s.scale
    if hi is None:
        return Scale(lo, None)
    # a 1-5 rubric's verdicts are integers; a judge's shares (claim_support) are not
    rubric = s.kind is MetricKind.JUDGE and s.normalises is None and (lo, hi) == (1.0, 5.0)
    return Scale(lo, hi, discrete=rubric)


def k_families(summary: Mapping[str, MetricSummary]) -> dict[str, list[tuple[int, MetricSummary]]]:
    """Metric families measured at two or more cut-offs (``ndcg@3``, ``ndcg@5``), by k."""
    families: dict[str, list[tuple[int, MetricSummary]]] = {}
    for name, s in summary.items():
        match = _AT_K.match(name)
        if match and s.mean is not None and not match.group(1).endswith(_NOT_CUTOFFS):
            families.setdefault(match.group(1), []).append((int(match.group(2)), s))
    return {f: sorted(p, key=lambda x: x[0]) for f, p in families.items() if len(p) > 1}


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


def render_html(report: Report, plan: Mapping[str, object] | None = None) -> str:
    """The whole page as one string; with ``plan`` (``analysis.label_plan.page_plan``), the
    review mode follows that label plan."""
    shown = [m for m in report.summary if not is_twin(m, report)]
    scales = {m: scale_of(m, report) for m in report.summary}
    dataset = report.config.get("dataset")
    embedded = any(r.sample is not None for r in report.samples)  # stops at the first
    # Metrics scored per turn or step have no value per sample: the conversation view shows them.
    groups = column_groups(report, [m for m in shown if level_of(m) == "conversation"])
    conversations = (
        report.samples.indexed().conversations  # no pass over the file
        if isinstance(report.samples, SampleFile)
        else any(r.units or _is_conversation(r.sample) for r in report.samples)
    )
    summary = [
        _SummaryRow(m, s, ci_bar(s, scales[m])) for m, s in report.summary.items() if m in shown
    ]
    metrics = [m for _, ms in groups for m in ms]
    columns = Columns(report)
    inline = inline_samples(report, metrics, scales, columns)
    # a 1-5 rubric with a verdict on a sample the page shows
    reviewable = bool(inline.indices and review_rubrics(report, inline.indices))
    chunks = chunk_review(report, inline.indices) if reviewable else None
    # A plan's or the chunk grades' script (one function each) comes first: the review's calls it.
    js = "".join([PLAN_JS + "\n" if plan else "", CHUNKS_JS + "\n" if chunks else "", JS])
    script_hash = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
    page = env().get_template("page")
    return page.render(
        report=report,
        name=str(report.config.get("name") or "rag-judge report"),
        csp=Markup(_CSP.format(script_hash)),  # constant and base64: no quote to escape
        css=Markup(
            CSS
            + REVIEW_CSS
            + (CHUNKS_CSS if chunks else "")
            + (CONVERSATION_CSS if conversations else "")
        ),
        js=Markup(js),
        ci_label=ci_label(report.confidence),
        summary=summary,
        levels=_levels(report, summary),
        degraded=degradation_table(report),
        # the segments (group_by) are drawn as the unit tables are: a section and a nav link each
        unit_tables=[
            *unit_tables(report, MAX_UNIT_ROWS),
            *segment_tables(report.segments, report.confidence),
        ],
        twins=[m for m in report.summary if m not in shown],
        stub_rubrics=report.stub_judged(),
        distributions=[
            _Distribution(m, s, histogram(columns.bins(m, scales[m])))
            for m, s in report.summary.items()
            if m in shown and s.n > 0
        ],
        families=[(f, k_chart(points)) for f, points in k_families(report.summary).items()],
        not_embedded=str(dataset) if dataset and not embedded else "",
        matrix=_Matrix(groups, metrics),
        rows=inline.rows,
        details=inline.details,
        inline=inline if inline.text else None,
        usage=list(report.usage.model_dump().items()),
        versions=library_versions(report),
        config=json.dumps(report.config, indent=2, ensure_ascii=False, default=str),
        judge_tables=judge_tables(report),
        # JSON with "<" escaped, in a block the browser does not run: safe to insert as is
        review=Markup(review_json(report, inline.indices)) if reviewable else None,
        review_note=review_note(report, len(inline.indices)),
        plan=Markup(plan_json(plan)) if plan and reviewable else None,
        chunks=Markup(chunk_json(chunks)) if chunks else None,  # "<" escaped, as review's
        chunk_note=chunk_note(chunks) if chunks else "",
    )


def write_html(report: Report, path: str | Path, plan: Mapping[str, object] | None = None) -> Path:
    """Write :func:`render_html`'s page to ``path`` (atomically) and return the path."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(report, plan), encoding="utf-8")
    tmp.replace(path)
    return path


# --- what the template draws ------------------------------------------------------------------


@dataclass(frozen=True)
class _SummaryRow:
    metric: str
    s: MetricSummary
    bar: CiBar | None


@dataclass(frozen=True)
class _Level:
    title: str
    note: str
    rows: list[_SummaryRow]


def _levels(report: Report, summary: list[_SummaryRow]) -> list[_Level]:
    """The summary's rows by level (per conversation, turn, step), with what each level's n and
    interval count; empty when no metric is scored per turn or per step."""
    rows = {row.metric: row for row in summary}
    return [
        _Level(LEVEL_TITLES[level], level_note(level, report.confidence), [rows[m] for m in ms])
        for level, ms in level_groups(report, list(rows))
    ]


def _is_conversation(sample: Sample | None) -> bool:
    return sample is not None and sample.is_conversation()


@dataclass(frozen=True)
class _Distribution:
    metric: str
    s: MetricSummary
    histogram: Histogram


@dataclass(frozen=True)
class _Matrix:
    groups: list[tuple[str, list[str]]]
    metrics: list[str]


def svg_histogram(bins: Bins, width: int = 240, height: int = 96) -> str:
    """Bars with a tooltip each; the x axis names the range ends (or each discrete score)."""
    return str(svg_macros().histogram(histogram(bins, width, height)))


def svg_k_chart(points: Sequence[tuple[int, MetricSummary]], width: int = 260) -> str:
    """Mean against k with the CI as a shaded band; y is [0, 1] unless a value leaves it."""
    return str(svg_macros().kchart(k_chart(points, width)))
