"""report.html: one self-contained page (inline CSS, vanilla JS, SVG drawn here), no network.

Every string from the report or the dataset is untrusted (answers, judge reasons, raw replies)
and goes through ``html.escape``; a Content-Security-Policy allows only this page's own script
(by hash), so even a missed escape could not run injected code or load anything remotely.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rag_judge.data.sample import Sample
from rag_judge.report._assets import CSS, JS
from rag_judge.report.model import MetricSummary, Report, SampleResult

__all__ = ["Bins", "bin_scores", "k_families", "render_html", "scale_of", "write_html"]

Scale = Literal["unit", "rubric", "range"]
_AT_K = re.compile(r"^(.+)@(\d+)$")


@dataclass(frozen=True)
class Bins:
    """Histogram of one metric: ``counts[i]`` scores fell in the bin labelled ``labels[i]``."""

    counts: list[int]
    labels: list[str]
    scale: Scale


def scale_of(metric: str, report: Report) -> Scale:
    """ "rubric" for a judge's 1-5 score (it has a ``_norm`` twin), "unit" for values in [0, 1]."""
    values = _values(report, metric)
    if f"{metric}_norm" in report.summary and all(1.0 <= v <= 5.0 for v in values):
        return "rubric"
    return "unit" if all(0.0 <= v <= 1.0 for v in values) else "range"


def bin_scores(values: Sequence[float], scale: Scale) -> Bins:
    """Ten bins of width 0.1 on [0, 1] (1.0 in the last), five bars for 1-5 rubric scores
    (rounded to the nearest integer, halves up: a context mean of 2.5 counts as 3), or ten
    equal bins between the minimum and the maximum."""
    if scale == "rubric":
        counts = [0] * 5
        for v in values:
            counts[min(max(math.floor(v + 0.5), 1), 5) - 1] += 1
        return Bins(counts, ["1", "2", "3", "4", "5"], scale)
    lo, hi = (0.0, 1.0) if scale == "unit" or not values else (min(values), max(values))
    span = hi - lo or 1.0  # all values equal: one full bar in the first bin
    width = span / 10
    counts = [0] * 10
    for v in values:  # (v - lo) * 10 / span, not / width: 0.3 / 0.1 is 2.9999999999999996
        counts[min(max(math.floor((v - lo) * 10 / span), 0), 9)] += 1
    labels = [f"{_num(lo + i * width)}–{_num(lo + (i + 1) * width)}" for i in range(10)]
    return Bins(counts, labels, scale)


def k_families(summary: Mapping[str, MetricSummary]) -> dict[str, list[tuple[int, MetricSummary]]]:
    """Metric families measured at two or more cut-offs (``ndcg@3``, ``ndcg@5``), by k."""
    families: dict[str, list[tuple[int, MetricSummary]]] = {}
    for name, s in summary.items():
        match = _AT_K.match(name)
        if match and s.mean is not None:
            families.setdefault(match.group(1), []).append((int(match.group(2)), s))
    return {f: sorted(p, key=lambda x: x[0]) for f, p in families.items() if len(p) > 1}


def render_html(report: Report, samples: Sequence[Sample] | None = None) -> str:
    """The whole page as one string. ``samples`` (the evaluated dataset) adds each sample's
    question, answer, references and contexts to its drill-down; without it the page shows
    what the report holds."""
    by_id = {s.id: s for s in samples or ()}
    name = str(report.config.get("name") or "rag-judge report")
    script_hash = base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
    csp = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'"
    body = "".join([
        f"<header><h1>{_e(name)}</h1><p class=meta>{len(report.samples)} samples · rag-judge "
        f"{_e(report.rag_judge_version)} · {_e(report.created)}</p><nav><a href=#summary>"
        "Summary</a><a href=#dist>Distributions</a><a href=#atk>Retrieval @k</a>"
        "<a href=#samples>Samples</a><a href=#run>Run</a></nav></header>",
        _summary_section(report),
        _distribution_section(report),
        _k_section(report),
        _samples_section(report, by_id),
        _run_section(report),
    ])  # fmt: skip
    return (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><meta http-equiv="
        f'"Content-Security-Policy" content="{csp}"><meta name=viewport content='
        f'"width=device-width,initial-scale=1"><title>{_e(name)}</title><style>{CSS}</style>'
        f"</head><body>{body}<script>{JS}</script></body></html>\n"
    )


def write_html(report: Report, path: str | Path, samples: Sequence[Sample] | None = None) -> Path:
    """Write :func:`render_html`'s page to ``path`` (atomically) and return the path."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(report, samples), encoding="utf-8")
    tmp.replace(path)
    return path


# --- sections -------------------------------------------------------------------------------


def _summary_section(report: Report) -> str:
    conf = report.config.get("bootstrap", {}).get("confidence", 0.95)
    rows = []
    for metric, s in report.summary.items():
        ci = f"[{_fixed(s.ci_low)}, {_fixed(s.ci_high)}]" if s.ci_low is not None else "–"
        rows.append(
            f"<tr><th scope=row>{_e(metric)}</th><td class=num>{_fixed(s.mean)}</td>"
            f"<td class=num>{ci}</td><td>{_ci_bar(s, scale_of(metric, report))}</td>"
            f"<td class=num>{s.n}</td>{_count(s.errors)}{_count(s.unscored)}"
            f"<td class=agg>{_e(s.aggregate)}</td></tr>"
        )
    return (
        f"<section id=summary><h2>Summary</h2><table class=summary><thead><tr><th>metric</th>"
        f"<th class=num>mean</th><th class=num>{float(conf):.0%} CI</th><th></th><th class=num>n"
        "</th><th class=num>errors</th><th class=num>unscored</th><th>aggregate</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _distribution_section(report: Report) -> str:
    cards = []
    for metric, s in report.summary.items():
        if _is_twin(metric, report) or s.n == 0:
            continue
        bins = bin_scores(_values(report, metric), scale_of(metric, report))
        note = f"n={s.n}" + (f" · {_plural(s.errors, 'error')}" if s.errors else "")
        cards.append(
            f"<figure class=card><figcaption><b>{_e(metric)}</b> <span>mean {_num(s.mean)}"
            f"</span></figcaption>{svg_histogram(bins)}<small>{note}</small></figure>"
        )
    return (
        f"<section id=dist><h2>Distributions</h2><div class=grid>{''.join(cards)}</div></section>"
    )


def _k_section(report: Report) -> str:
    families = k_families(report.summary)
    if not families:
        return (
            "<section id=atk><h2>Retrieval across k</h2><p class=muted>No metric family is "
            "measured at more than one cut-off.</p></section>"
        )
    cards = "".join(
        f"<figure class=card><figcaption><b>{_e(f)}@k</b> <span>mean and CI</span></figcaption>"
        f"{svg_k_chart(points)}</figure>"
        for f, points in families.items()
    )
    return f"<section id=atk><h2>Retrieval across k</h2><div class=grid>{cards}</div></section>"


def _samples_section(report: Report, by_id: Mapping[str, Sample]) -> str:
    metrics = [m for m in report.summary if not _is_twin(m, report)]
    scales = {m: scale_of(m, report) for m in metrics}
    head = "".join(f"<th data-t=n>{_e(m).replace('_', '_<wbr>')}</th>" for m in metrics)
    rows, details = [], []
    for r in report.samples:
        sid = _e(r.id)
        cells = "".join(_score_cell(r.scores.get(m), scales[m], m in r.errors) for m in metrics)
        rows.append(
            f'<tr data-id="{sid}" data-err={int(bool(r.errors))}><th data-v="{sid}" '
            f'scope=row><a href="#s-{sid}">{sid}</a></th>{cells}</tr>'
        )
        details.append(_sample_details(r.id, r, by_id.get(r.id), report))
    dataset = report.config.get("dataset")
    note = (
        f"<p class=muted>The dataset ({_e(str(dataset))}) is not embedded; the details show what"
        " report.json holds.</p>"
        if dataset and not by_id
        else ""
    )
    return (
        "<section id=samples><h2>Samples</h2><div class=tools><input id=filter type=search "
        "placeholder='Filter by sample id'><label><input id=onlyerr type=checkbox> only samples "
        "with errors</label><button id=openall type=button>Expand all</button><button "
        f"id=closeall type=button>Collapse all</button></div>{note}<div class=scroll><table "
        f"id=matrix class=matrix><thead><tr><th data-t=s>sample</th>{head}</tr></thead><tbody>"
        f"{''.join(rows)}</tbody></table></div><div id=details>{''.join(details)}</div></section>"
    )


def _sample_details(sid: str, r: SampleResult, sample: Sample | None, report: Report) -> str:
    parts = []
    if sample is not None:
        parts.append(_field("question", sample.question) + _field("answer", sample.answer))
        parts += [_field(f"reference {i + 1}", ref) for i, ref in enumerate(sample.references)]
        if sample.contexts:
            ctx = "".join(
                f"<li><b>{_e(c.id or '–')}</b>"
                + (f" <span class=tag>grade {_num(c.relevance)}</span>" if c.relevance else "")
                + f" {_e(c.text)}</li>"
                for c in sample.contexts
            )
            parts.append(f"<h4>contexts (rank order)</h4><ol class=ctx>{ctx}</ol>")
    if r.errors:
        errs = "".join(f"<li><b>{_e(m)}</b>: {_e(msg)}</li>" for m, msg in r.errors.items())
        parts.append(f"<h4>errors</h4><ul class=errors>{errs}</ul>")
    if r.judgments:
        parts.append(_judgments(r.judgments))
    if not parts:
        parts.append("<p class=muted>Nothing beyond the scores in the table.</p>")
    flag = f" <span class=bad>{_plural(len(r.errors), 'error')}</span>" if r.errors else ""
    if sample is not None and sample.question:
        q = sample.question
        flag += f" <span class=muted>{_e(q if len(q) <= 100 else q[:99] + '…')}</span>"
    return (
        f'<details id="s-{_e(sid)}" data-id="{_e(sid)}" data-err={int(bool(r.errors))}>'
        f"<summary>{_e(sid)}{flag}</summary><div class=body>{''.join(parts)}</div></details>"
    )


def _judgments(judgments: Mapping[str, Mapping[str, Any]]) -> str:
    rows = []
    for rubric, j in judgments.items():
        rows.append(_judgment_row(_e(rubric), j))
        for c in j.get("contexts") or []:
            label = (
                f"<span class=sub>↳ rank {_e(c.get('rank', '?'))} · {_e(c.get('id') or '–')}</span>"
            )
            rows.append(_judgment_row(label, c))
    return (
        "<h4>judgments</h4><table class=judg><thead><tr><th>rubric</th><th>score</th><th>reason"
        f"</th><th>attempts</th><th>cached</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _judgment_row(label: str, j: Mapping[str, Any]) -> str:
    score = j.get("score")
    reason = _e(j.get("reason") or "")
    if score is None and j.get("raw"):  # unscored: the reply itself is the evidence
        reason += f"<pre>{_e(j['raw'])}</pre>"
    extra = {k: v for k, v in j.items() if k not in _SHOWN_KEYS}
    if extra:
        reason += f"<pre class=extra>{_e(json.dumps(extra, ensure_ascii=False, default=str))}</pre>"
    shown = _num(score) if isinstance(score, (int, float)) else "<span class=bad>unscored</span>"
    return (
        f"<tr><td>{label}</td><td class=num>{shown}</td><td>{reason}</td>"
        f"<td class=num>{_e(j.get('attempts', ''))}</td><td>{_yes_no(j.get('cached'))}</td></tr>"
    )


def _run_section(report: Report) -> str:
    usage = "".join(
        f"<tr><th scope=row>{_e(k.replace('_', ' '))}</th><td class=num>"
        f"{_e('–' if v is None else f'{v:,.6g}' if isinstance(v, float) else f'{v:,}')}</td></tr>"
        for k, v in report.usage.model_dump().items()
    )
    sigs = "".join(
        f"<tr><th scope=row>{_e(m)}</th><td><code>{_e(s).replace('|', '|<wbr>')}</code></td></tr>"
        for m, s in report.signatures.items()
    )
    config = _e(json.dumps(report.config, indent=2, ensure_ascii=False, default=str))
    return (
        "<section id=run><h2>Run</h2><div class=cols><div><h3>Versions</h3><table class=kv>"
        f"<tr><th scope=row>rag-judge</th><td>{_e(report.rag_judge_version)}</td></tr><tr><th "
        f"scope=row>created</th><td>{_e(report.created)}</td></tr></table><h3>Usage and cost</h3>"
        f"<table class=kv>{usage}</table></div><div><h3>Signatures</h3><table class=kv>{sigs}"
        f"</table></div></div><h3>Config</h3><pre class=config>{config}</pre></section>"
    )


# --- SVG ------------------------------------------------------------------------------------


def svg_histogram(bins: Bins, width: int = 240, height: int = 96) -> str:
    """Bars with a tooltip each; the x axis names the range ends (or the five rubric scores)."""
    top, bottom, left = 6, 18, 4
    plot_h, n = height - top - bottom, len(bins.counts)
    step = (width - 2 * left) / n
    peak = max(bins.counts) or 1
    bars = []
    for i, (count, label) in enumerate(zip(bins.counts, bins.labels)):
        h = plot_h * count / peak
        x, y = left + i * step + 1, top + plot_h - h
        bars.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{step - 2:.1f}" height="{h:.1f}">'
            f"<title>{_e(label)}: {count}</title></rect>"
        )
    base = top + plot_h
    if bins.scale == "rubric":
        ticks = [(left + (i + 0.5) * step, lab) for i, lab in enumerate(bins.labels)]
    else:
        lo, hi = bins.labels[0].split("–")[0], bins.labels[-1].split("–")[1]
        ticks = [(left, lo), (width - left, hi)]
    text = "".join(
        f'<text x="{x:.1f}" y="{height - 4}" text-anchor="{_anchor(x, width)}">{_e(t)}</text>'
        for x, t in ticks
    )
    return (
        f'<svg class=hist viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role=img><line x1="{left}" x2="{width - left}" y1="{base}" y2="{base}"/>'
        f"{''.join(bars)}{text}</svg>"
    )


def svg_k_chart(points: Sequence[tuple[int, MetricSummary]], width: int = 260) -> str:
    """Mean against k with the CI as a shaded band; y is [0, 1] unless a value leaves it."""
    height, left, right, top, bottom = 150, 34, 12, 10, 22
    means = [(k, s.mean) for k, s in points if s.mean is not None]
    cis = [
        (k, s.ci_low, s.ci_high)
        for k, s in points
        if s.ci_low is not None and s.ci_high is not None
    ]
    ks = [k for k, _ in means]
    ys = [m for _, m in means] + [v for _, lo_, hi_ in cis for v in (lo_, hi_)]
    lo, hi = (0.0, 1.0) if all(0 <= v <= 1 for v in ys) else (min(ys), max(ys))
    span_k = (ks[-1] - ks[0]) or 1

    def px(k: float) -> float:
        return left + (k - ks[0]) / span_k * (width - left - right)

    def py(v: float) -> float:
        return top + (1 - (v - lo) / ((hi - lo) or 1)) * (height - top - bottom)

    upper = [f"{px(k):.1f},{py(h):.1f}" for k, _, h in cis]
    lower = [f"{px(k):.1f},{py(low):.1f}" for k, low, _ in reversed(cis)]
    band = " ".join(upper + lower)
    line = " ".join(f"{px(k):.1f},{py(m):.1f}" for k, m in means)
    dots = "".join(
        f'<circle cx="{px(k):.1f}" cy="{py(m):.1f}" r="3"><title>@{k}: {_num(m, 4)}</title>'
        "</circle>"
        for k, m in means
    )
    grid = "".join(
        f'<line class=g x1="{left}" x2="{width - right}" y1="{py(v):.1f}" y2="{py(v):.1f}"/>'
        f'<text x="{left - 4}" y="{py(v) + 3:.1f}" text-anchor="end">{_num(v, 2)}</text>'
        for v in (lo, (lo + hi) / 2, hi)
    )
    xt = "".join(
        f'<text x="{px(k):.1f}" y="{height - 6}" text-anchor="middle">{k}</text>' for k in ks
    )
    return (
        f'<svg class=kchart viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role=img>{grid}<polygon points="{band}"/><polyline points="{line}"/>{dots}{xt}</svg>'
    )


# --- helpers --------------------------------------------------------------------------------

_SHOWN_KEYS = {"score", "reason", "raw", "attempts", "cached", "contexts", "rank", "id"}


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _yes_no(value: object) -> str:
    return (
        "" if value is None else "yes" if value is True else "no" if value is False else _e(value)
    )


def _fixed(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _values(report: Report, metric: str) -> list[float]:
    return [v for r in report.samples if (v := r.scores.get(metric)) is not None]


def _is_twin(metric: str, report: Report) -> bool:
    """A judge's ``<rubric>_norm`` repeats ``<rubric>`` on [0, 1]; the page shows one of them."""
    return metric.endswith("_norm") and metric[: -len("_norm")] in report.summary


def _count(n: int) -> str:
    return f"<td class='num{' bad' if n else ''}'>{n}</td>"


def _field(label: str, text: str | None) -> str:
    return f"<h4>{_e(label)}</h4><p class=text>{_e(text)}</p>" if text is not None else ""


def _score_cell(v: float | None, scale: Scale, failed: bool) -> str:
    if v is None:
        return (
            f"<td class='num{' bad' if failed else ''}' data-v=''>{'error' if failed else '–'}</td>"
        )
    frac = (v - 1) / 4 if scale == "rubric" else v if scale == "unit" else 0.0
    shade = min(max(int(frac * 5), 0), 4)
    return f"<td class='num h{shade}' data-v='{v!r}'>{_num(v)}</td>"


def _ci_bar(s: MetricSummary, scale: Scale) -> str:
    if s.mean is None or scale == "range":
        return ""
    lo, span = (1.0, 4.0) if scale == "rubric" else (0.0, 1.0)

    def x(v: float) -> float:
        return 2 + 96 * (v - lo) / span

    ci = ""
    if s.ci_low is not None and s.ci_high is not None:
        w = max(x(s.ci_high) - x(s.ci_low), 1)
        ci = f'<rect class=ci x="{x(s.ci_low):.1f}" y="3" width="{w:.1f}" height="6"/>'

    return (
        f'<svg class=cibar viewBox="0 0 100 12" width="100" height="12"><line x1="2" x2="98" '
        f'y1="6" y2="6"/>{ci}<rect class=m x="{x(s.mean) - 1:.1f}" y="1" width="2" '
        'height="10"/></svg>'
    )


def _anchor(x: float, width: int) -> str:
    return "start" if x < width * 0.1 else "end" if x > width * 0.9 else "middle"
