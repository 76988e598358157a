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

The page stays small whatever the number of samples. It holds every sample's row and details
while they fit in :data:`SAMPLE_BUDGET` bytes; past that, a selection of at most
:data:`INLINE_ROWS` samples within the same budget, picked in this order: samples where a
metric failed, the lowest of each metric (the highest, for a latency), the most uncertain judge
verdicts, and a seeded random draw of the rest, their long texts cut; the page says how many of
each it shows. Summary, histograms and charts are computed over every sample either way.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import platform
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from jinja2 import DictLoader, Environment, StrictUndefined
from markupsafe import Markup, escape

from rag_judge.data.sample import Context, Sample
from rag_judge.report._assets import CSS, JS
from rag_judge.report._format import MISSING, amount, ci_label, interval, num, short
from rag_judge.report._templates import PAGE, SAMPLES, SVG
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
from rag_judge.report.model import (
    Failure,
    FailureKind,
    Judgment,
    MetricKind,
    MetricSummary,
    Report,
    SampleResult,
    Signature,
)

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

# The page holds every sample's table row and details while they fit in SAMPLE_BUDGET bytes
# (UTF-8); past it, at most INLINE_ROWS samples within the same budget: up to _FAILED_ROWS
# where a metric failed, _WORST_ROWS lowest per metric and _UNCERTAIN_ROWS most uncertain judge
# verdicts (each shared among the metrics or rubrics: 3 to 50 each), then a random draw seeded
# with SEED. Their texts are cut at _CUT characters, their contexts and the relevant documents
# not retrieved listed up to _MAX_LISTED; a sample still larger than _MAX_SAMPLE is left out.
SAMPLE_BUDGET = 4_000_000
INLINE_ROWS = 1_000
SEED = 0
_FAILED_ROWS = 100
_WORST_ROWS = 200
_UNCERTAIN_ROWS = 100
_PER_METRIC = (3, 50)
_CUT = {"question": 500, "answer": 1_500, "reference": 1_000, "context": 300, "reason": 500}
_CUT_RAW = 1_000
_MAX_LISTED = 20
_MAX_SAMPLE = 60_000


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
    groups = column_groups(report, shown)
    metrics = [m for _, ms in groups for m in ms]
    columns = _Columns(report)
    inline = _inline(report, metrics, scales, columns)
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
            _Distribution(m, s, histogram(bin_scores(columns.values(m), scales[m])))
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


def _row(r: SampleResult, metrics: Sequence[str], scales: Mapping[str, Scale]) -> _Row:
    cells = [_cell(r.scores.get(m), scales[m], m in r.errors) for m in metrics]
    return _Row(r.id, int(bool(r.errors)), cells)


def _cell(value: float | None, scale: Scale, failed: bool) -> _Cell:
    frac = 0.0
    if value is not None and scale.hi is not None:
        frac = (value - scale.lo) / ((scale.hi - scale.lo) or 1.0)
    return _Cell(value, failed, min(max(int(frac * 5), 0), 4))


# --- the samples the page holds -----------------------------------------------------------------


class _Columns:
    """Each metric's values over every sample, as float arrays (NaN where missing), built once
    for the histograms and the selection of samples."""

    def __init__(self, report: Report) -> None:
        self._samples = report.samples
        self._cache: dict[str, npt.NDArray[np.float64]] = {}

    def column(self, metric: str) -> npt.NDArray[np.float64]:
        if metric not in self._cache:
            values = [r.scores.get(metric) for r in self._samples]
            self._cache[metric] = np.array(values, dtype=float)
        return self._cache[metric]

    def values(self, metric: str) -> npt.NDArray[np.float64]:
        col = self.column(metric)
        return col[~np.isnan(col)]


@dataclass(frozen=True)
class _Cut:
    """Why a sample is on a page that cannot hold every sample, and what its details leave out
    (``missed``: the relevant documents not retrieved that are listed)."""

    why: str
    more_contexts: int = 0
    missed: list[tuple[str, float]] = field(default_factory=list)
    more_missed: int = 0


@dataclass(frozen=True)
class _Inline:
    """The sample table's rows and the samples' details as the page holds them; ``text`` says
    which samples a page that cannot hold every one shows, and why."""

    rows: Markup
    details: Markup
    shown: int
    text: str = ""


@dataclass
class _Picks:
    """Samples in the order a page that cannot hold them all takes them: (index, stage, why)."""

    order: list[tuple[int, str, str]] = field(default_factory=list)
    failed: int = 0  # samples with a failed metric
    lowest: int = 0  # how many per metric
    uncertain: int = 0  # how many per rubric
    rest: int = 0  # samples the random draw was taken from


def _inline(
    report: Report, metrics: Sequence[str], scales: Mapping[str, Scale], columns: _Columns
) -> _Inline:
    """Every sample while their rows and details fit in :data:`SAMPLE_BUDGET` bytes, else the
    selection of :func:`_pick`, texts cut, within the same budget (in the report's order)."""
    macros = _samples()
    rows: list[str] = []
    dets: list[str] = []
    size = 0
    for r in report.samples:
        row, det = str(macros.row(_row(r, metrics, scales))), str(macros.details(r))
        size += _size(row) + _size(det) + 2
        if size > SAMPLE_BUDGET:
            break
        rows.append(row)
        dets.append(det)
    else:
        return _Inline(_lines(rows), _lines(dets), len(rows))
    picks = _pick(report, metrics, columns)
    chosen: list[tuple[int, str, str, str]] = []
    size = 0
    for i, stage, why in picks.order:
        if len(chosen) == INLINE_ROWS:
            break
        r = report.samples[i]
        row = str(macros.row(_row(r, metrics, scales)))
        det = str(macros.details(*_cut_sample(r, why)))
        n = _size(row) + _size(det) + 2
        if n > _MAX_SAMPLE:
            continue
        if size + n > SAMPLE_BUDGET:
            break
        size += n
        chosen.append((i, stage, row, det))
    chosen.sort()
    counts = {stage: 0 for stage in ("failed", "lowest", "uncertain", "random")}
    for _, stage, _, _ in chosen:
        counts[stage] += 1
    return _Inline(
        _lines(c[2] for c in chosen),
        _lines(c[3] for c in chosen),
        len(chosen),
        _inline_text(len(chosen), len(report.samples), counts, picks),
    )


def _pick(report: Report, metrics: Sequence[str], columns: _Columns) -> _Picks:
    """Samples for a page that cannot hold them all, most telling first, each once: up to
    ``_FAILED_ROWS`` where a metric failed (each metric's in turn), each metric's lowest values
    (the highest for a latency) and each judge rubric's most uncertain verdicts (the widest
    spread of sampled verdicts, else the least probable verdict), then a random draw seeded with
    :data:`SEED` from the others, enough to make :data:`INLINE_ROWS`."""
    samples = report.samples
    picks = _Picks()
    taken: set[int] = set()

    def take(stage: str, ranked: Iterable[list[tuple[int, str]]], limit: int | None) -> None:
        count = 0
        for tier in zip_longest(*ranked):  # each list's first, then each list's second, ...
            for item in tier:
                if item is None or item[0] in taken:
                    continue
                if count == limit:
                    return
                taken.add(item[0])
                picks.order.append((item[0], stage, item[1]))
                count += 1

    failing: dict[str, list[tuple[int, str]]] = {}
    for i, r in enumerate(samples):
        if r.errors:
            picks.failed += 1
            for m, failure in r.errors.items():
                if m not in report.summary or not _is_twin(m, report):
                    failing.setdefault(m, []).append((i, _failed(m, failure)))
    take("failed", failing.values(), _FAILED_ROWS)

    picks.lowest = _share(_WORST_ROWS, len(metrics))
    take("lowest", (_lowest(report, m, columns, picks.lowest) for m in metrics), None)

    rubrics = report.judge_rubrics()
    picks.uncertain = _share(_UNCERTAIN_ROWS, len(rubrics))
    take("uncertain", (_uncertain(samples, m, picks.uncertain) for m in rubrics), None)

    rest = [i for i in range(len(samples)) if i not in taken]
    picks.rest = len(rest)
    draw = random.Random(SEED).sample(rest, max(min(len(rest), INLINE_ROWS - len(taken)), 0))
    picks.order += [(i, "random", "random") for i in draw]
    return picks


def _share(total: int, ways: int) -> int:
    low, high = _PER_METRIC
    return min(max(total // max(ways, 1), low), high)


def _failed(metric: str, failure: Failure) -> str:
    if failure.kind is FailureKind.UNSCORED:
        return f"{metric} unscored"
    if failure.kind is FailureKind.MISSING_INPUT:
        return f"{metric}: missing input"
    return f"{metric} failed"


def _lowest(report: Report, metric: str, columns: _Columns, k: int) -> list[tuple[int, str]]:
    """The ``k`` samples with the lowest values of ``metric`` (the highest for a latency), the
    earliest first among ties."""
    high = report.summary[metric].kind is MetricKind.LATENCY
    keyed = -columns.column(metric) if high else columns.column(metric)
    valid = np.flatnonzero(~np.isnan(keyed))
    if valid.size > k:  # only the candidates up to the k-th value are sorted
        kth = np.partition(keyed[valid], k - 1)[k - 1]
        valid = valid[keyed[valid] <= kth]
    order = valid[np.argsort(keyed[valid], kind="stable")][:k]
    why = f"{'highest' if high else 'lowest'} {metric}"
    return [(int(i), why) for i in order]


def _uncertain(samples: Sequence[SampleResult], rubric: str, k: int) -> list[tuple[int, str]]:
    """The ``k`` verdicts of ``rubric`` with the widest spread of sampled verdicts, or (where
    none was sampled) the lowest probability of the most probable verdict."""
    found: list[tuple[float, int]] = []  # (minus the uncertainty, sample index)
    for i, r in enumerate(samples):
        j = r.judgments.get(rubric)
        if j is None or j.score is None:
            continue
        if j.spread is not None:
            if j.spread > 0:
                found.append((-j.spread, i))
        elif j.probs and max(j.probs.values()) < 1:
            found.append((max(j.probs.values()) - 1, i))
    out = []
    for key, i in heapq.nsmallest(k, found):  # the labels of the few taken, not of all
        spread = samples[i].judgments[rubric].spread
        what = (
            f"top verdict p={short(key + 1, 2)}" if spread is None else f"spread {short(spread, 2)}"
        )
        out.append((i, f"uncertain {rubric} ({what})"))
    return out


def _cut_sample(r: SampleResult, why: str) -> tuple[SampleResult, _Cut]:
    """``r`` with its long texts cut and its lists shortened, and what was left out."""
    cut = _Cut(why)
    s = r.sample
    if s is not None:
        missed = not_retrieved(s)  # from every context, before they are shortened
        cut = _Cut(
            why,
            more_contexts=max(len(s.contexts) - _MAX_LISTED, 0),
            missed=missed[:_MAX_LISTED],
            more_missed=max(len(missed) - _MAX_LISTED, 0),
        )
        contexts = tuple(
            c.model_copy(update={"text": _shorten(c.text, _CUT["context"])})
            for c in s.contexts[:_MAX_LISTED]
        )
        s = s.model_copy(
            update={
                "question": _shorten(s.question, _CUT["question"]),
                "answer": _shorten(s.answer, _CUT["answer"]),
                "references": tuple(
                    _shorten(ref, _CUT["reference"]) for ref in s.references[:_MAX_LISTED]
                ),
                "contexts": contexts,
            }
        )
    errors = {
        m: f.model_copy(update={"message": _shorten(f.message, _CUT["reason"])})
        for m, f in r.errors.items()
    }
    judgments = {m: _cut_judgment(j) for m, j in r.judgments.items()}
    update = {"sample": s, "errors": errors, "judgments": judgments}
    return r.model_copy(update=update), cut


def _cut_judgment(j: Judgment) -> Judgment:
    contexts = None if j.contexts is None else [_cut_judgment(c) for c in j.contexts[:_MAX_LISTED]]
    update = {
        "reason": _shorten(j.reason, _CUT["reason"]),
        "raw": _shorten(j.raw, _CUT_RAW),
        "contexts": contexts,
    }
    return j.model_copy(update=update)


def _shorten(text: str | None, limit: int) -> str | None:
    """``text`` up to ``limit`` characters, marked where it was cut with its full length."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… (truncated, {len(text):,} characters)"


def _inline_text(shown: int, total: int, counts: Mapping[str, int], picks: _Picks) -> str:
    """What a page that cannot hold every sample shows: how many of each kind, and where the
    rest is."""
    parts = []
    if counts["failed"]:
        failed = f"{counts['failed']:,} where a metric failed"
        parts.append(f"{failed} (of {picks.failed:,} such samples)")
    if counts["lowest"]:
        parts.append(
            f"{counts['lowest']:,} more among the {picks.lowest} lowest of each metric (the "
            "highest, for a latency)"
        )
    if counts["uncertain"]:
        parts.append(
            f"{counts['uncertain']:,} more among the {picks.uncertain} most uncertain verdicts "
            "of each judge rubric (the widest spread of sampled verdicts, or the least probable "
            "verdict)"
        )
    if counts["random"]:
        parts.append(
            f"{counts['random']:,} drawn at random (seed {SEED}) from the other {picks.rest:,}"
        )
    picked = "; ".join(parts[:-1]) + ("; and " if len(parts) > 1 else "") + "".join(parts[-1:])
    head = (
        f"Showing {shown:,} of {total:,} samples: all of them would make this page too large. "
        f"Shown, in the order they were picked: {picked}. Each sample's tag says why it is here."
    )
    if not parts:
        head = f"Showing none of {total:,} samples: each is too large for this page."
    elif shown == total:
        head = (
            f"Showing all {total:,} samples, but not in full: that would make this page too large."
        )
    return (
        f"{head} Long texts are cut where marked “truncated”: contexts at {_CUT['context']:,} "
        f"characters, answers at {_CUT['answer']:,}; at most {_MAX_LISTED} contexts a sample. "
        f"The summary, the distributions and the charts count all {total:,} samples; "
        "report.json holds every sample in full."
    )


def _size(text: str) -> int:
    """``text``'s length in UTF-8."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _lines(parts: Iterable[str]) -> Markup:
    return Markup("".join(f"{p}\n" for p in parts))  # each part is the macros' markup


# --- the template's environment -------------------------------------------------------------


@cache
def _env() -> Environment:
    env = Environment(
        loader=DictLoader({"page": PAGE, "svg": SVG, "samples": SAMPLES}),
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


def _samples() -> Any:
    """The macros of one sample's table row and details, callable from Python."""
    return _env().get_template("samples").module


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
