"""The review mode's script (vanilla JS), run after the page's own in the same hashed block.

Keys while reviewing: 1-5 label the current sample on the chosen rubric, ``n`` / → next,
``b`` / ← back (ignored while typing in a field). Labels live in ``localStorage`` under the
review data's key (in memory where storage throws, e.g. a locked-down file:// page) and are
exported as JSON Lines, ``{"id": ..., "<rubric>": 1-5}`` a line, into a text box and a
``labels.jsonl`` download. Texts are set with ``textContent`` and the card shows a copy of
the sample's own (escaped) details: nothing is parsed as HTML.
Sets ``data-review="1"`` on <body> when ready (the browser test waits for it).
"""

from __future__ import annotations

__all__ = ["REVIEW_CSS", "REVIEW_JS"]

REVIEW_CSS = """
#rv-card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin-top:8px}
#rv-card p{margin:2px 0 6px}#rv-label{font-weight:700;font-size:16px}
.rv-b{min-width:30px}.rv-b.on{background:var(--acc);color:#fff}#rv-out{width:100%}
"""

REVIEW_JS = """(function () {
  var data = document.getElementById("rv-data");
  if (!data) return;
  var D = JSON.parse(data.textContent), store = {};
  function $(id) { return document.getElementById(id); }
  try { store = JSON.parse(window.localStorage.getItem(D.key) || "{}") || {}; } catch (e) {}
  Object.keys(D.labels).forEach(function (id) {
    store[id] = store[id] || {};
    Object.keys(D.labels[id]).forEach(function (m) {
      if (store[id][m] === undefined) store[id][m] = D.labels[id][m];
    });
  });
  var rubric = D.rubrics[0], pos = 0, open = false, sel = $("rv-rubric");
  D.rubrics.forEach(function (m) {
    var o = document.createElement("option"); o.value = m; o.textContent = m; sel.appendChild(o);
  });
  function save() {
    try { window.localStorage.setItem(D.key, JSON.stringify(store)); } catch (e) {}
  }
  function labelled() {
    return Object.keys(store).filter(function (id) { return Object.keys(store[id]).length; });
  }
  function item() { return D.items[D.queues[rubric][pos]]; }
  function show() {
    var i = D.queues[rubric][pos], it = D.items[i], score = it.scores[rubric];
    var u = D.uncertainty[rubric][i], det = document.getElementById("s-" + it.id);
    var mine = (store[it.id] || {})[rubric];
    $("rv-card").hidden = false;
    $("rv-pos").textContent = (pos + 1) + " of " + D.items.length +
      (D.items.length < D.total ? " (of " + D.total + " samples)" : "");
    $("rv-id").textContent = it.id;
    $("rv-judge").textContent = rubric + " " + (score === null ? "unscored" : score) +
      (u === null ? "" : " · uncertainty " + u.toFixed(3));
    var body = $("rv-body"); body.textContent = "";  // the sample as its details show it
    if (det) body.appendChild(det.querySelector(".body").cloneNode(true));
    $("rv-label").textContent = mine === undefined ? "–" : String(mine);
    [].forEach.call(document.querySelectorAll(".rv-b"), function (b) {
      b.classList.toggle("on", Number(b.dataset.v) === mine);
    });
    $("rv-count").textContent = labelled().length + " labelled";
  }
  function label(v) {
    var it = item();
    store[it.id] = store[it.id] || {}; store[it.id][rubric] = v; save(); show();
  }
  function move(d) { pos = Math.max(0, Math.min(D.items.length - 1, pos + d)); show(); }
  function start() { open = true; show(); }
  function exportLabels() {
    var order = {};
    D.items.forEach(function (it, i) { order[it.id] = i; });
    var ids = labelled().sort(function (a, b) {
      var x = a in order ? order[a] : 1e9, y = b in order ? order[b] : 1e9;
      return x - y || (a < b ? -1 : a > b ? 1 : 0);
    });
    var text = ids.map(function (id) {
      var row = {id: id};
      Object.keys(store[id]).sort().forEach(function (m) { row[m] = store[id][m]; });
      return JSON.stringify(row);
    }).join("\\n") + (ids.length ? "\\n" : "");
    var out = $("rv-out"); out.value = text; out.hidden = false;
    try {
      var a = $("rv-download");
      a.href = URL.createObjectURL(new Blob([text], {type: "application/x-ndjson"}));
      a.hidden = false; a.click();
    } catch (e) {}
  }
  $("rv-start").addEventListener("click", start);
  $("rv-export").addEventListener("click", exportLabels);
  $("rv-next").addEventListener("click", function () { move(1); });
  $("rv-back").addEventListener("click", function () { move(-1); });
  [].forEach.call(document.querySelectorAll(".rv-b"), function (b) {
    b.addEventListener("click", function () { if (open) label(Number(b.dataset.v)); });
  });
  sel.addEventListener("change", function () { rubric = sel.value; pos = 0; if (open) show(); });
  document.addEventListener("keydown", function (ev) {
    var tag = ev.target && ev.target.tagName;
    if (!open || tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    if (ev.key >= "1" && ev.key <= "5" && ev.key.length === 1) label(Number(ev.key));
    else if (ev.key === "n" || ev.key === "ArrowRight") move(1);
    else if (ev.key === "b" || ev.key === "ArrowLeft") move(-1);
    else return;
    ev.preventDefault();
  });
  $("rv-count").textContent = labelled().length + " labelled";
  document.body.setAttribute("data-review", "1");
})();"""
