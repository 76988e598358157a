"""The review mode's label plan (``rag-judge label-plan --html``): the plan's data block and its
script, one function ``rvPlan`` that the review's script calls when the page holds a plan.

``rvPlan(D)`` reads the ``rv-plan`` block, makes the plan's queue (its queued samples, in stream
order, those the page holds) the queue of the plan's rubric, and puts that rubric first. Its
``update(get)`` recomputes the estimate and confidence sequence after the labels so far, exactly
as ``rag_judge.stats.active_ppi.active_path`` does (same sums, same order: a test compares the
numbers), writes them to ``#rv-plan-status`` (full precision in its data- attributes), and shows
``#rv-stop``, "stop: ±h reached", once the half-width is <= h with at least ``min_labels``
labels. Texts are set with ``textContent``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["PLAN_JS", "plan_json"]


def plan_json(plan: Mapping[str, object]) -> str:
    """The plan as JSON safe inside a ``<script type=application/json>`` block."""
    text = json.dumps(plan, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c")


PLAN_JS = """function rvPlan(D) {  // the label plan: see rag_judge/report/html/_plan_js.py
  var el = document.getElementById("rv-plan");
  if (!el) return null;
  var P = JSON.parse(el.textContent), at = Object.create(null), queue = [];
  D.items.forEach(function (it, i) { if (!(it.id in at)) at[it.id] = i; });
  P.stream.forEach(function (s) { if (s[3] && s[0] in at) queue.push(at[s[0]]); });
  D.queues[P.rubric] = queue;
  D.rubrics = [P.rubric].concat(D.rubrics.filter(function (m) { return m !== P.rubric; }));
  function margin(t) {
    var a = -2 * Math.log(P.alpha), r2 = (a + Math.log(a + 1)) / Math.max(P.t_star, 1);
    return Math.sqrt(2 * (t * r2 + 1) / (t * t * r2) * Math.log(Math.sqrt(t * r2 + 1) / P.alpha));
  }
  function estimate(get) {  // stats/active_ppi.py active_path, at the last step processed
    var n = 0, k = 0, sa = 0, sb = 0, sab = 0, sbb = 0, sp = 0, sp2 = 0, lam = 1, next = null;
    for (var i = 0; i < P.stream.length; i++) {
      var s = P.stream[i], y = s[3] ? get(s[0], P.rubric) : null;
      if (s[3] && y === null) { next = s[0]; break; }
      lam = 1;  // predictable: from the steps before this one
      if (k >= P.lam_warmup) {
        var c = Math.max(n, 1), mb = sb / c, v = sbb / c - mb * mb;
        if (v > 1e-12) lam = Math.min(1, Math.max(0, -(sab / c - (sa / c) * mb) / v));
      }
      var w = s[3] / s[2], a = w * (s[3] ? y : 0), b = (1 - w) * s[1], phi = a + lam * b;
      n += 1; k += s[3]; sa += a; sb += b; sab += a * b; sbb += b * b;
      sp += phi; sp2 += phi * phi;
    }
    if (!k) return {n: n, labels: 0, next: next};  // no estimate before the first label
    var mean = sp / n, half = Math.sqrt(Math.max(sp2 / n - mean * mean, 0)) * margin(n);
    return {n: n, labels: k, mean: mean, low: mean - half, high: mean + half, half: half,
      lam: lam, next: next};
  }
  function update(get) {
    var r = estimate(get), out = document.getElementById("rv-plan-status");
    var stop = document.getElementById("rv-stop");
    var done = r.labels > 0 && r.labels >= P.min_labels && r.half <= P.h;
    out.textContent = "Following the label plan on " + P.rubric + ": " + (r.labels ?
      r.mean.toFixed(3) + " ± " + r.half.toFixed(3) + " after " + r.labels + " labels" :
      "no label yet") + (r.next === null ? "; the plan's queue is done" : "; next: " + r.next);
    ["n", "labels", "mean", "low", "high", "lam"].forEach(function (key) {
      out.setAttribute("data-" + key, key in r ? String(r[key]) : "");
    });
    stop.textContent = "stop: ±" + P.h + " reached";
    stop.hidden = !done;
  }
  return {rubric: P.rubric, update: update, estimate: estimate};
}"""
