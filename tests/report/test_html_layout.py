"""The sample table of a run with 40 metrics, in headless Chromium: it scrolls sideways inside
its box with the id column kept in view, its column headings (set upright, read bottom to top)
neither overlap nor spill out of their cells, and every column can be scrolled into view
without the id column or another heading covering it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_judge.report.html import write_html
from rag_judge.report.model import MetricKind, MetricSummary, Report, SampleResult
from tests.report.test_review import _no_console_errors, _open, browser, downloads, needs_browser

__all__ = ["browser", "downloads"]  # the fixtures, used by name

RETRIEVAL = [
    *(f"ndcg@{k}" for k in (1, 3, 5, 10, 20, 100)), "ndcg_cut@1000",
    *(f"recall@{k}" for k in (1, 5, 10, 100, 1000)), *(f"precision@{k}" for k in (1, 5, 10)),
    "P@1000", "mrr", "map", "map_cut@1000", "bpref", "infAP", "Rprec", "Rprec_mult_1.00",
    "iprec_at_recall_0.10", "iprec_at_recall_0.50", "judged@10", "judged@100", "hit_rate@5",
    "success@10", "set_F", "gm_map", "num_rel_ret", "num_ret", "recip_rank_cut@10",
]  # fmt: skip
METRICS = {
    "faithfulness": (MetricKind.JUDGE, (1.0, 5.0)),
    "answer_relevance": (MetricKind.JUDGE, (1.0, 5.0)),
    "rougeLsum_precision": (MetricKind.LEXICAL, (0.0, 1.0)),
    "bleu": (MetricKind.LEXICAL, (0.0, 1.0)),
    "bertscore_f1": (MetricKind.EMBEDDING, (0.0, 1.0)),
    **{m: (MetricKind.RETRIEVAL, (0.0, 1.0)) for m in RETRIEVAL},
    "latency_ms": (MetricKind.LATENCY, (0.0, None)),
}

# Per heading: whether its text spills out of its cell, whether it starts before the previous
# one ends, and, once scrolled into view with its first cell, whether something else is drawn
# at either's centre (the sticky id column, another heading).
MEASURE = """
var box = document.querySelector("#samples .scroll");
var heads = [].slice.call(document.querySelectorAll("#matrix tr.heads th"));
var first = document.querySelector("#matrix tbody tr");
function covered(el) {
  el.scrollIntoView({block: "nearest", inline: "center"});
  var r = el.getBoundingClientRect();
  var at = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
  return !el.contains(at);
}
var out = {scrolls: box.scrollWidth > box.clientWidth, pageWidth: document.body.scrollWidth,
           viewport: window.innerWidth, spill: [], overlap: [], hidden: []};
heads.forEach(function (h, i) {
  var name = h.textContent;
  var spills = h.scrollWidth > h.clientWidth + 1 || h.scrollHeight > h.clientHeight + 1;
  if (spills) out.spill.push(name);
  if (i > 0) {
    var a = heads[i - 1].getBoundingClientRect(), b = h.getBoundingClientRect();
    if (b.left < a.right - 0.5) out.overlap.push(name);
    if (covered(h) || covered(first.children[i])) out.hidden.push(name);
  }
});
return out;
"""


@needs_browser
@pytest.mark.slow
def test_forty_columns_scroll_with_headings_apart(browser: Any, tmp_path: Path) -> None:
    assert len(METRICS) == 40
    samples = [
        SampleResult(
            id=f"sample-{i:03d}-with-a-long-id",
            scores={
                m: (1 + i % 5 if scale == (1.0, 5.0) else i / 12)
                for m, (_, scale) in METRICS.items()
            },
        )
        for i in range(12)
    ]
    summary = {m: MetricSummary(mean=0.5, n=12, kind=k, scale=s) for m, (k, s) in METRICS.items()}
    report = Report(summary=summary, samples=samples, signatures={}, config={"name": "wide"})
    browser.set_window_size(1280, 900)
    _open(browser, write_html(report, tmp_path / "report.html"))
    found = browser.execute_script(MEASURE)
    assert found["scrolls"]  # 40 columns do not fit 1280 pixels: the box scrolls, not the page
    assert found["pageWidth"] <= found["viewport"]
    assert found["spill"] == []
    assert found["overlap"] == []
    assert found["hidden"] == []
    _no_console_errors(browser)
