"""The review mode's chunk grades (vanilla JS): one function ``rvChunks`` that the review's
script calls when the page holds the ``rv-chunks`` block (``_review_chunks.py``).

``rvChunks(D, api)`` adds the mode's queue to ``D.queues`` under the mode's value (``#chunks``)
and returns what the review's script asks of it: ``labels`` (the report's own chunk grades, to
pre-fill), ``check`` (a stored grading, kept only if it has one 0-3 or null per top-k chunk),
``done`` (every top-k chunk graded: the query counts as graded), ``exported`` (the label
line's ``relevance``: a mapping by context id when every chunk has its own id, else a list by
rank; null until done), ``show``/``hide`` (the card) and ``key``. Grades live in the review's
labels, ``labels[id].relevance``, a list by rank, so local storage keeps them with the rubric
labels. ``api.row(id)`` reads that row; ``api.put(id, grades)`` stores a grading and redraws.

Keys: j / ↓ next chunk, k / ↑ previous, 0-3 grade the current chunk and move on to the next,
Backspace / Delete clear its grade; other digits do nothing here (n / b stay the review's).
Texts are set with ``textContent``; maps by id have no prototype (an id may be ``__proto__``).
"""

from __future__ import annotations

__all__ = ["CHUNKS_CSS", "CHUNKS_JS"]

CHUNKS_CSS = """
#rv-clist li{border:1px solid var(--line);border-radius:4px;padding:4px 8px;margin:4px 0}
#rv-clist li.cur{outline:2px solid var(--acc)}#rv-clist .txt{white-space:pre-wrap}
.rv-g{min-width:30px}.rv-g.on{background:var(--acc);color:#fff}
"""

CHUNKS_JS = """function rvChunks(D, api) {  // chunk grades: see rag_judge/report/html/_chunks_js.py
  var el = document.getElementById("rv-chunks");
  if (!el) return null;
  var C = JSON.parse(el.textContent), at = Object.create(null), cur = 0, shown = -1;
  C.items.forEach(function (it, i) { at[it.id] = i; });
  D.queues[C.mode] = C.queue;
  function $(id) { return document.getElementById(id); }
  function item(id) { return id in at ? C.items[at[id]] : null; }
  function grades(id) {  // the stored grading, one entry per top-k chunk (null: ungraded)
    var row = api.row(id), it = item(id), r = row && row.relevance;
    return it && r ? r.slice() : it ? it.chunks.map(function () { return null; }) : [];
  }
  function isGrade(g) { return typeof g === "number" && g % 1 === 0 && g >= 0 && g <= 3; }
  function check(id, v) {
    var it = item(id);
    if (v === null) return null;
    if (!it || !Array.isArray(v) || v.length !== it.chunks.length) return undefined;
    return v.every(function (g) { return g === null || isGrade(g); }) ? v.slice() : undefined;
  }
  function done(id) {
    var row = api.row(id), r = row && row.relevance;
    return !!(item(id) && r && r.length && r.every(isGrade));
  }
  function exported(id) {
    if (!done(id)) return null;
    var it = item(id), r = grades(id), out = Object.create(null);
    if (!it.by_id) return r;
    it.chunks.forEach(function (c, i) { out[c.id] = r[i]; });
    return out;
  }
  function grade(pos, c, v) {
    var it = C.items[C.queue[pos]], r = grades(it.id);
    r[c] = v;
    cur = v === null ? c : Math.min(it.chunks.length - 1, c + 1);
    api.put(it.id, r);
  }
  function text(tag, value, cls) {
    var e = document.createElement(tag);
    e.textContent = value; if (cls) e.className = cls;
    return e;
  }
  function show(pos) {
    var it = C.items[C.queue[pos]], r = grades(it.id), list = $("rv-clist");
    if (pos !== shown) {  // a new query: start at its first ungraded chunk
      shown = pos; cur = Math.max(0, r.indexOf(null));
    }
    $("rv-card").hidden = true; $("rv-ccard").hidden = false;
    $("rv-cpos").textContent = (pos + 1) + " of " + C.queue.length;
    $("rv-cid").textContent = it.id;
    $("rv-cdone").textContent = r.filter(isGrade).length + " of " + r.length +
      " chunks graded (judge: " + C.rubric + ")";
    $("rv-cq").textContent = it.question; $("rv-ca").textContent = it.answer;
    list.textContent = "";
    it.chunks.forEach(function (c, i) {
      var li = document.createElement("li"), p = document.createElement("p");
      li.className = i === cur ? "cur" : ""; li.setAttribute("data-c", String(i));
      p.appendChild(text("b", c.id === null ? "(no id)" : c.id));
      p.appendChild(text("span", " · judge " + c.judge + " · yours ", "meta"));
      p.appendChild(text("b", r[i] === null ? "–" : String(r[i]), "mine"));
      [0, 1, 2, 3].forEach(function (v) {
        var b = text("button", String(v), "rv-g" + (r[i] === v ? " on" : ""));
        b.type = "button"; b.setAttribute("data-v", String(v));
        p.appendChild(document.createTextNode(" ")); p.appendChild(b);
      });
      li.appendChild(p); li.appendChild(text("div", c.text, "txt")); list.appendChild(li);
    });
  }
  function hide() { $("rv-ccard").hidden = true; }
  function key(k, pos) {  // true when the key is the mode's
    var n = C.items[C.queue[pos]].chunks.length;
    if (k === "j" || k === "ArrowDown") cur = Math.min(n - 1, cur + 1);
    else if (k === "k" || k === "ArrowUp") cur = Math.max(0, cur - 1);
    else if (k.length === 1 && k >= "0" && k <= "3") grade(pos, cur, Number(k));
    else if (k === "Backspace" || k === "Delete") grade(pos, cur, null);
    else if (!(k.length === 1 && k >= "4" && k <= "9")) return false;
    return true;
  }
  $("rv-cback").addEventListener("click", function () { $("rv-back").click(); });
  $("rv-cnext").addEventListener("click", function () { $("rv-next").click(); });
  $("rv-clist").addEventListener("click", function (ev) {
    var b = ev.target, li = b && b.closest ? b.closest("li") : null;
    if (!li || !b.classList.contains("rv-g") || shown < 0) return;
    grade(shown, Number(li.getAttribute("data-c")), Number(b.getAttribute("data-v")));
  });
  return {mode: C.mode, labels: C.labels, check: check, done: done, exported: exported,
    show: show, hide: hide, key: key};
}"""
