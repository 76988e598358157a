"""The review mode's script (vanilla JS), run after the page's own in the same hashed block.

Keys while reviewing: 1-5 label the current sample on the chosen rubric, 0 (or Backspace)
clears it, ``n`` / → next, ``b`` / ← back (ignored while typing in a field). Labels live in
``localStorage`` under the review data's key (in memory where storage throws, e.g. a
locked-down file:// page, and the page says so), over the report's own labels, and are exported
as JSON Lines, ``{"id": ..., "<rubric>": 1-5}`` a line, into a text box and a ``labels.jsonl``
download (a Blob URL: the CSP does not restrict a download). Labels are kept in objects
without a prototype (a sample id may be ``__proto__``). Texts are set with ``textContent``
and the card shows copies of the sample's own (escaped) details: nothing is parsed as HTML.
Sets ``data-review="1"`` on <body> when ready (the browser test waits for it). Where the page
holds chunk grades, ``rvChunks`` (``_chunks_js.py``) adds their mode to the rubric selector and
their ``relevance`` to the same labels, storage and export.
"""

from __future__ import annotations

__all__ = ["REVIEW_CSS", "REVIEW_JS"]

REVIEW_CSS = """
#rv-card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin-top:8px}
#rv-card p{margin:2px 0 6px}#rv-label{font-weight:700;font-size:16px}
.rv-b{min-width:30px}.rv-b.on{background:var(--acc);color:#fff}#rv-out{width:100%}
#rv-card .judg{margin-bottom:6px}#rv-body{border-top:1px solid var(--line)}
"""

REVIEW_JS = """(function () {
  var data = document.getElementById("rv-data");
  if (!data) return;
  var D = JSON.parse(data.textContent), labels = map(), store = null;
  var plan = typeof rvPlan === "function" ? rvPlan(D) : null;  // label-plan --html pages only
  var chunks = typeof rvChunks === "function" ? rvChunks(D, {  // judge-graded retrieval only
    row: function (id) { return labels[id]; },
    put: function (id, r) {
      labels[id] = labels[id] || map(); labels[id].relevance = r; save(); show();
    }
  }) : null, MODE = chunks ? chunks.mode : null;  // the rubric selector's value for chunks
  function $(id) { return document.getElementById(id); }
  function map() { return Object.create(null); }
  function own(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  function merge(src) {  // a label is 1-5; null clears one the report had
    if (!src || typeof src !== "object") return;
    Object.keys(src).forEach(function (id) {
      var row = src[id];
      if (!row || typeof row !== "object") return;
      D.rubrics.forEach(function (m) {
        var v = own(row, m) ? row[m] : undefined;
        if (v === null || (typeof v === "number" && v % 1 === 0 && v >= 1 && v <= 5)) {
          labels[id] = labels[id] || map(); labels[id][m] = v;
        }
      });
      var r = chunks && own(row, "relevance") ? chunks.check(id, row.relevance) : undefined;
      if (r !== undefined) { labels[id] = labels[id] || map(); labels[id].relevance = r; }
    });
  }
  merge(D.labels);
  if (chunks) merge(chunks.labels);
  try { store = window.localStorage; store.getItem(D.key); } catch (e) { store = null; }
  if (store) { try { merge(JSON.parse(store.getItem(D.key) || "{}")); } catch (e) {} }
  function save() {
    if (!store) return;
    try { store.setItem(D.key, JSON.stringify(labels)); } catch (e) { store = null; where(); }
  }
  function where() {
    $("rv-store").textContent = store ? "Labels are saved in this browser (local storage " +
      D.key + ") and pre-filled from the report's own; export them to keep them." :
      "This browser refuses local storage to this page: labels are kept in memory only " +
      "until it is closed; export them before.";
  }
  function get(id, m) { var row = labels[id]; return row && row[m] ? row[m] : null; }
  function labelled(m) {
    return Object.keys(labels).filter(function (id) {
      if (m && m === MODE) return chunks.done(id);
      return m ? !!get(id, m) : D.rubrics.some(function (r) { return !!get(id, r); }) ||
        (!!chunks && chunks.done(id));
    });
  }
  var rubric = D.rubrics[0], pos = 0, open = false, sel = $("rv-rubric");
  D.rubrics.forEach(function (m) {
    var o = document.createElement("option"); o.value = m; o.textContent = m; sel.appendChild(o);
  });
  if (chunks) {
    var o = document.createElement("option"); o.value = MODE; o.textContent = "chunk grades";
    sel.appendChild(o);
  }
  function count() {
    $("rv-count").textContent = labelled().length + " labelled · " + labelled(rubric).length +
      " of " + D.queues[rubric].length + " on " + (rubric === MODE ? "chunk grades" : rubric);
    if (plan) plan.update(get);
  }
  function show() {
    if (rubric === MODE) { chunks.show(pos); count(); return; }
    if (chunks) chunks.hide();
    var i = D.queues[rubric][pos], it = D.items[i], score = it.scores[rubric];
    var u = D.uncertainty[rubric][i], det = document.getElementById("s-" + it.id);
    var mine = get(it.id, rubric), verdict = $("rv-verdict"), body = $("rv-body");
    $("rv-card").hidden = false;
    $("rv-pos").textContent = (pos + 1) + " of " + D.queues[rubric].length;
    $("rv-id").textContent = it.id;
    $("rv-judge").textContent = rubric + " " +
      (score === null ? "unscored" : String(+score.toFixed(3))) +
      (u === null ? "" : " · uncertainty " + u.toFixed(3));
    verdict.textContent = ""; body.textContent = "";
    if (det) {  // the sample as its details show it; this rubric's verdict (and jurors) on top
      var copy = det.querySelector(".body").cloneNode(true);
      [].forEach.call(copy.querySelectorAll("tr[data-rubric]"), function (tr) {
        if (tr.getAttribute("data-rubric") === rubric) verdict.appendChild(tr.cloneNode(true));
      });
      body.appendChild(copy);
    }
    verdict.parentNode.hidden = !verdict.children.length;
    $("rv-label").textContent = mine === null ? "–" : String(mine);
    [].forEach.call(document.querySelectorAll(".rv-b"), function (b) {
      b.classList.toggle("on", Number(b.dataset.v) === mine);
    });
    count();
  }
  function label(v) {
    var id = D.items[D.queues[rubric][pos]].id;
    labels[id] = labels[id] || map(); labels[id][rubric] = v; save(); show();
  }
  function move(d) {  // within the rubric's queue: the samples its judge gave a verdict
    pos = Math.max(0, Math.min(D.queues[rubric].length - 1, pos + d)); show();
  }
  function start() { open = true; show(); $("rv-card").scrollIntoView(); }
  function exportLabels() {
    var order = map();
    D.items.forEach(function (it, i) { if (!(it.id in order)) order[it.id] = i; });
    var ids = labelled().sort(function (a, b) {  // the page's order, then the others by id
      var x = a in order ? order[a] : 1e9, y = b in order ? order[b] : 1e9;
      return x - y || (a < b ? -1 : a > b ? 1 : 0);
    });
    var text = ids.map(function (id) {
      var row = {id: id};
      D.rubrics.forEach(function (m) { if (get(id, m)) row[m] = get(id, m); });
      var r = chunks ? chunks.exported(id) : null;
      if (r !== null) row.relevance = r;
      return JSON.stringify(row);
    }).join("\\n") + (ids.length ? "\\n" : "");
    var out = $("rv-out"), a = $("rv-download");
    out.value = text; out.hidden = false;
    try {
      if (a.href) URL.revokeObjectURL(a.href);
      a.href = URL.createObjectURL(new Blob([text], {type: "application/x-ndjson"}));
      a.hidden = false; a.click();
    } catch (e) {}
  }
  $("rv-start").addEventListener("click", start);
  $("rv-export").addEventListener("click", exportLabels);
  $("rv-next").addEventListener("click", function () { move(1); });
  $("rv-back").addEventListener("click", function () { move(-1); });
  [].forEach.call(document.querySelectorAll(".rv-b"), function (b) {
    b.addEventListener("click", function () {
      if (open) label(Number(b.dataset.v) || null);
    });
  });
  sel.addEventListener("change", function () {
    rubric = sel.value; pos = 0; sel.blur(); count(); if (open) show();
  });
  document.addEventListener("keydown", function (ev) {
    var tag = ev.target && ev.target.tagName, k = ev.key;
    if (!open || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    if (rubric === MODE && chunks.key(k, pos)) show();
    else if (k.length === 1 && k >= "1" && k <= "5") label(Number(k));
    else if (k === "0" || k === "Backspace" || k === "Delete") label(null);
    else if (k === "n" || k === "ArrowRight") move(1);
    else if (k === "b" || k === "ArrowLeft") move(-1);
    else return;
    ev.preventDefault();
  });
  where(); count();
  document.body.setAttribute("data-review", "1");
})();"""
