"""The static part of report.html: its stylesheet and its script (vanilla JS, no libraries).

The script sorts and filters the sample table and opens a sample's details from its link; the
page is complete without it. It sets ``data-ready="1"`` on <body> when done (the browser test
waits for that). Its SHA-256 goes into the page's Content-Security-Policy, so edit freely.
"""

from __future__ import annotations

__all__ = ["CONVERSATION_CSS", "CSS", "JS"]

CSS = """
:root{--fg:#1f2933;--mute:#616e7c;--line:#d9e2ec;--bg:#f8fafc;--acc:#2f6fae;--bad:#b44d12}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px;color:var(--fg);background:#fff;
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
header{border-bottom:1px solid var(--line);margin-bottom:8px}
h1{margin:0;font-size:22px}
h2{font-size:17px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:14px 0 6px}
h4{font-size:12px;margin:12px 0 4px;color:var(--mute);text-transform:uppercase;letter-spacing:.04em}
.meta,.muted,small{color:var(--mute)}
nav{margin:6px 0 12px}nav a{margin-right:16px;color:var(--acc);text-decoration:none}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{background:var(--bg);font-weight:600;font-size:12px;color:var(--mute)}
td.num,th.num{text-align:right}.summary tbody th{font-weight:500}.agg{color:var(--mute)}
.bad{color:var(--bad);font-weight:600}
.grid{display:flex;flex-wrap:wrap;gap:12px}
.card{margin:0;padding:10px 12px;border:1px solid var(--line);border-radius:6px}
figcaption{font-size:13px;margin-bottom:4px}figcaption span{color:var(--mute);margin-left:6px}
.card small{display:block}svg text{font-size:10px;fill:var(--mute)}
.hist rect{fill:var(--acc);opacity:.8}.hist line,.cibar line{stroke:#9aa5b1}
.kchart polyline{fill:none;stroke:var(--acc);stroke-width:2}
.kchart polygon{fill:var(--acc);opacity:.15}.kchart circle{fill:var(--acc)}
.kchart .g{stroke:var(--line)}.cibar .ci{fill:var(--acc);opacity:.35}.cibar .m{fill:var(--fg)}
.tools{display:flex;gap:12px;align-items:center;margin-bottom:8px}
#filter{padding:4px 8px;border:1px solid var(--line);border-radius:4px;width:220px}
button{padding:3px 10px;border:1px solid var(--line);background:var(--bg);border-radius:4px;
  cursor:pointer}
.scroll{overflow:auto;max-height:520px;border:1px solid var(--line);border-radius:6px}
.matrix{font-size:12px}.matrix td,.matrix th{padding:3px 8px}
.matrix thead{position:sticky;top:0;z-index:2}
.matrix thead th{vertical-align:bottom}.matrix tr.heads th{cursor:pointer}
.matrix tr.heads th+th{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;
  text-align:left;padding:8px 4px}
.matrix th:first-child{position:sticky;left:0;z-index:1}.matrix tbody th{background:#fff}
.matrix tbody th{min-width:9em;max-width:18em;overflow-wrap:anywhere}
.matrix tr.groups th+th{border-left:2px solid #9fb3c8}
.matrix tr.groups th{color:var(--fg);text-transform:uppercase;letter-spacing:.04em;font-size:11px}
.matrix .grp{border-left:2px solid #9fb3c8}
.matrix a{text-decoration:none;color:var(--acc)}
.h1{background:#eef4fa}.h2{background:#dce8f4}.h3{background:#c6d9ed}.h4{background:#b9d1e9}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
#details{margin-top:12px}details{border:1px solid var(--line);border-radius:6px;margin:4px 0}
summary{padding:5px 10px;cursor:pointer;font-weight:500}details[open] summary{background:var(--bg)}
.body{padding:0 12px 10px}.judg{font-size:13px;width:100%}.sub{color:var(--mute);padding-left:12px}
pre{white-space:pre-wrap;word-break:break-word;background:var(--bg);padding:6px 8px;
  border-radius:4px;font-size:12px;margin:4px 0}
.config{max-height:420px;overflow:auto}.cols{display:flex;gap:32px;flex-wrap:wrap}
.kv{font-size:13px}.kv code{font-size:12px}.ctx li{margin-bottom:4px}
.tag{font-size:11px;color:var(--acc)}.tag.unj{color:var(--mute);font-style:italic}
.missed{margin:4px 0;color:var(--bad)}.note{font-size:12px;color:var(--mute);margin:4px 0}
.banner{margin:8px 0 0;padding:8px 12px;border:1px solid #e0b252;background:#fff8e6}
.text{margin:0;white-space:pre-wrap}
.na{color:var(--mute)}ul.na{font-size:12px;margin:4px 0}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:600;
  text-transform:none;letter-spacing:0;vertical-align:1px}
.badge.abstained{background:#e0e8f9;color:#2d3a8c;border:1px solid #98aee4}
.legend{font-weight:400;text-transform:none;letter-spacing:0;margin-left:8px}
mark.claim,.key{color:inherit;background:none;border-radius:2px;padding:0 1px}
mark.claim::after{content:attr(data-n);font-size:9px;vertical-align:super;color:var(--mute)}
mark.supported,.key.supported{border-bottom:1px dotted #3f9142}
mark.unsupported,.key.unsupported{background:#ffe3a3;border-bottom:2px solid #d9822b}
mark.contradicted,.key.contradicted{background:#ffc9c9;border-bottom:2px solid #c23030}
.claims{font-size:13px;margin:4px 0}.claims li{margin-bottom:3px}
.verdict{font-size:11px;font-weight:600;text-transform:uppercase;letter-spacing:.03em}
.verdict.supported{color:#2f7d32}.verdict.unsupported{color:#a35a00}
.verdict.contradicted{color:#b42318}.verdict.other,.verdict.unchecked{color:var(--mute)}
.unlocated{font-style:italic}
[hidden]{display:none!important}
"""

# Only a page with conversations (or units) carries these rules: any other page is unchanged.
CONVERSATION_CSS = """
.summary tr.level th{background:var(--bg);font-weight:600;padding-top:10px}
.summary tr.level .note{font-weight:400;margin-left:8px}
.badge.degraded{background:#fde2d3;color:var(--bad);border:1px solid #f0a57a}
.turns,.steps{padding-left:0;list-style:none;margin:4px 0}
.turn{border-left:3px solid var(--line);padding:4px 0 6px 10px;margin:8px 0}
.turn.degraded{border-left-color:var(--bad);background:#fffaf6}
.step{border:1px solid var(--line);border-radius:4px;padding:4px 8px;margin:4px 0}
.step.hop{border:2px solid var(--bad);background:#fff1e8}
.thead,.shead{margin-bottom:2px}.why{margin:2px 0;font-size:13px;color:var(--bad)}
.uscores{margin-left:6px}.us{display:inline-block;font-size:11px;margin:0 6px 0 0;
  padding:0 5px;border:1px solid var(--line);border-radius:3px;color:var(--mute)}
.us b{color:var(--fg);font-weight:600}.us.miss{border-color:var(--bad)}.us.miss b{color:var(--bad)}
.us.bad b{color:var(--bad)}.text.q,.text.a,.text.ref{margin:3px 0}.tj{font-size:12px;margin:2px 0}
"""

JS = """(function () {
  var rows = [].slice.call(document.querySelectorAll("#matrix tbody tr"));
  var dets = [].slice.call(document.querySelectorAll("#details details"));
  var f = document.getElementById("filter"), only = document.getElementById("onlyerr");
  function apply() {
    var q = f.value.toLowerCase();
    rows.concat(dets).forEach(function (el) {
      el.hidden = (q && el.dataset.id.toLowerCase().indexOf(q) < 0) ||
        (only.checked && el.dataset.err !== "1");
    });
  }
  f.addEventListener("input", apply);
  only.addEventListener("change", apply);
  document.getElementById("openall").onclick = function () {
    dets.forEach(function (d) { if (!d.hidden) d.open = true; });
  };
  document.getElementById("closeall").onclick = function () {
    dets.forEach(function (d) { d.open = false; });
  };
  document.querySelectorAll("#matrix a").forEach(function (a) {
    a.addEventListener("click", function () {
      var d = document.getElementById(a.getAttribute("href").slice(1));
      if (d) d.open = true;
    });
  });
  var body = document.querySelector("#matrix tbody");
  var heads = [].slice.call(document.querySelectorAll("#matrix thead tr.heads th"));
  heads.forEach(function (th, i) {
    th.addEventListener("click", function () {
      var dir = th.classList.contains("asc") ? -1 : 1, num = th.dataset.t === "n";
      heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(dir > 0 ? "asc" : "desc");
      rows.sort(function (a, b) {  // missing values sort last either way
        var x = a.children[i].dataset.v, y = b.children[i].dataset.v;
        if (!num) return dir * x.localeCompare(y, undefined, {numeric: true});
        if (x === "" || y === "") return (x === "") - (y === "");
        return dir * (parseFloat(x) - parseFloat(y));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  document.body.setAttribute("data-ready", "1");
})();"""
