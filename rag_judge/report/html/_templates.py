"""The Jinja sources of report.html: the page, the SVG macros it imports, and the macros of
one sample's table row and details (``_inline.py`` renders those per sample, to count the page's
bytes as it goes; ``cut`` carries what a page too large for every sample left out of one).

All are rendered with autoescaping on (``page.py``): every value from the report or the
dataset is escaped unless it is already markup (the SVGs, the CSS and the script). Table rows
stay on one line each; the page's tests and its sorting script read them that way.
"""

from __future__ import annotations

__all__ = ["PAGE", "SAMPLES", "SVG"]

SVG = """\
{% macro histogram(h) %}
<svg class=hist viewBox="0 0 {{ h.width }} {{ h.height }}" width="{{ h.width }}" \
height="{{ h.height }}" role=img><line x1="{{ h.left }}" x2="{{ h.width - h.left }}" \
y1="{{ h.base }}" y2="{{ h.base }}"/>
{%- for b in h.bars %}<rect x="{{ b.x|f1 }}" y="{{ b.y|f1 }}" width="{{ b.width|f1 }}" \
height="{{ b.height|f1 }}"><title>{{ b.label }}: {{ b.count }}</title></rect>{% endfor %}
{%- for t in h.ticks %}<text x="{{ t.x|f1 }}" y="{{ h.height - 4 }}" \
text-anchor="{{ t.anchor }}">{{ t.text }}</text>{% endfor %}</svg>
{%- endmacro %}

{% macro kchart(c) %}
<svg class=kchart viewBox="0 0 {{ c.width }} {{ c.height }}" width="{{ c.width }}" \
height="{{ c.height }}" role=img>
{%- for g in c.grid %}<line class=g x1="{{ c.left }}" x2="{{ c.width - c.right }}" \
y1="{{ g.y|f1 }}" y2="{{ g.y|f1 }}"/><text x="{{ c.left - 4 }}" y="{{ (g.y + 3)|f1 }}" \
text-anchor="end">{{ g.value|short(2) }}</text>{% endfor %}
<polygon points="{{ c.band }}"/><polyline points="{{ c.line }}"/>
{%- for d in c.dots %}<circle cx="{{ d.x|f1 }}" cy="{{ d.y|f1 }}" r="3"><title>@{{ d.k }}: \
{{ d.mean|short(4) }}</title></circle>{% endfor %}
{%- for d in c.dots %}<text x="{{ d.x|f1 }}" y="{{ c.height - 6 }}" \
text-anchor="middle">{{ d.k }}</text>{% endfor %}</svg>
{%- endmacro %}

{% macro cibar(b) %}
<svg class=cibar viewBox="0 0 100 12" width="100" height="12"><line x1="2" x2="98" y1="6" \
y2="6"/>{% if b.ci %}<rect class=ci x="{{ b.ci[0]|f1 }}" y="3" width="{{ b.ci[1]|f1 }}" \
height="6"/>{% endif %}<rect class=m x="{{ (b.mean - 1)|f1 }}" y="1" width="2" height="10"/></svg>
{%- endmacro %}
"""

SAMPLES = """\
{% macro cell(c) %}
{% if c.value is none %}<td class='num{{ " bad" if c.failed }}{{ " na" if c.na }}' data-v=''>\
{{ "error" if c.failed else "n/a" if c.na else missing }}</td>
{%- else %}<td class='num h{{ c.shade }}' data-v='{{ c.value|repr }}'>{{ c.value|short }}</td>
{%- endif %}
{% endmacro %}
{% macro judgment(label, j, sub=false, state=("unscored", "bad")) %}
<tr data-rubric="{{ label }}"><td>{% if sub %}<span class=sub>↳ {{ part_label(j) }}</span>\
{% else %}{{ label }}{% endif %}</td><td class=num>
{%- if j.score is none %}<span class={{ state[1] }}>{{ state[0] }}</span>{% else %}\
{{ j.score|short }}{% endif %}\
</td><td>{{ j.reason }}{% if j.score is none and j.raw %}<pre>{{ j.raw }}</pre>{% endif %}
{%- if j|extras %}<pre class=extra>{{ j|extras }}</pre>{% endif %}</td>\
<td class=num>{{ j.attempts }}</td><td>{{ "yes" if j.cached else "no" }}</td></tr>
{%- endmacro %}
{% macro abstained() %}<span class="badge abstained">abstained</span>{% endmacro %}
{% macro grounded(g) %}
{% if g.pieces %}<p class="text answer">{% for p in g.pieces %}{% if p.claim %}\
<mark class="claim {{ p.claim.css }}" data-n="{{ p.claim.n }}" title="{{ p.claim.title }}">\
{{ p.text }}</mark>{% else %}{{ p.text }}{% endif %}{% endfor %}</p>{% endif %}
{% if g.claims %}<ol class=claims>
{%- for c in g.claims %}<li><span class="verdict {{ c.css }}">{{ c.verdict }}</span> \
{% if c.located %}{{ c.text }}{% else %}<span class=unlocated>{{ c.text }}</span> <span \
class="tag unj">not located in the answer</span>{% endif %}{% if c.detail %}<br><span \
class=muted>{{ c.detail }}</span>{% endif %}</li>{% endfor %}</ol>
{% endif %}
{%- endmacro %}
{% macro unit_scores(scores) %}
{% if scores %}<span class=uscores>{% for u in scores %}<span class="us {{ u.css }}"\
{% if u.miss %} title="below its threshold: {{ u.miss }}"{% elif u.failure %} \
title="{{ u.failure.text() }}"{% endif %}>{{ u.metric }} <b>{% if u.value is none %}\
{{ u.state or missing }}{% else %}{{ u.value|short }}{% endif %}</b></span>{% endfor %}</span>\
{% endif %}
{%- endmacro %}
{% macro conversation(v) %}
<div class=conv>{% if v.single %}<h4>per turn and per step</h4>{% else %}<h4>conversation: \
{{ v.turns|length|plural("turn") }}</h4>{% if v.goal %}<p class=text><b>goal:</b> {{ v.goal }}\
</p>{% endif %}{% endif %}
<ol class=turns start=0>
{%- for t in v.turns %}<li class="turn{{ ' degraded' if t.degraded }}" data-turn={{ t.index }}>\
<div class=thead><b>turn {{ t.index }}</b>{% if t.degraded %} <span class="badge degraded">\
degraded</span>{% endif %} {{ unit_scores(t.scores) }}</div>
{% if t.degraded %}<p class=why><b>fell short:</b> {{ t.misses|join("; ") }}. \
{% if t.hop %}<b>first step below its threshold:</b> {{ t.hop }}.{% else %}No step fell below a \
threshold: the turn failed on its own.{% endif %}</p>
{% endif %}
{% if not v.single %}
{% if t.question is not none %}<p class="text q"><b>Q:</b> {{ t.question }}</p>{% endif %}
{% if t.expected %}<p class=note>expected tool calls: {{ t.expected|join(", ") }}</p>{% endif %}
{% endif %}
{% if t.steps %}<ol class=steps start=0>
{%- for st in t.steps %}<li class="step {{ st.kind }}{{ ' hop' if st.hop }}" \
data-step={{ st.index }}><div class=shead><b>step {{ st.index }}</b> \
{% if st.kind == "tool" %}tool call <code class=tool>{{ st.tool }}</code>{% else %}retrieval\
{% if st.query is not none %} <span class=muted>query:</span> {{ st.query }}{% endif %}{% endif %}\
{% if st.hop %} <span class="badge degraded">first below</span>{% endif %} \
{{ unit_scores(st.scores) }}</div>
{% if st.misses %}<p class=why>{{ st.misses|join("; ") }}</p>{% endif %}
{% if st.kind == "tool" %}<pre class=args>{{ st.arguments }}</pre>{% if st.result is not none %}\
<pre class=result>→ {{ st.result }}</pre>{% endif %}
{% elif st.contexts and not v.single %}<ol class=ctx>
{%- for c, grade in st.contexts %}<li><b>{{ c.id or missing }}</b> \
{% if grade is none %}<span class="tag unj">{{ unjudged }}</span>{% else %}<span class=tag>grade \
{{ grade|short }}</span>{% endif %} {{ c.text }}</li>{% endfor %}</ol>
{% endif %}
</li>{% endfor %}</ol>
{% endif %}
{% if not v.single %}
{% if t.not_retrieved %}<p class=missed><b>relevant but not retrieved:</b> \
{% for doc, grade in t.not_retrieved %}{{ doc }} (grade {{ grade|short }})\
{{ ", " if not loop.last }}{% endfor %}</p>
{% endif %}
{% if t.answer is not none %}<p class="text a"><b>A:</b> {{ t.answer }}</p>{% endif %}
{% for ref in t.references %}<p class="text ref"><b>reference:</b> {{ ref }}</p>
{% endfor %}
{% endif %}
{% if t.judgments %}<ul class=tj>
{%- for m, j in t.judgments %}<li><b>{{ m }}</b> {{ j.score|short if j.score is not none \
else missing }}{% if j.reason %} <span class=muted>{{ j.reason }}</span>{% endif %}</li>\
{% endfor %}</ul>
{% endif %}
</li>{% endfor %}</ol></div>
{%- endmacro %}
{% macro details(r, cut=none, view=none) %}
{% set s = r.sample %}
{% set failed, na = failures(r) %}
{% set g = grounding_view(r) %}
<details id="s-{{ r.id }}" data-id="{{ r.id }}" data-err={{ 1 if failed else 0 }}><summary>\
{{ r.id }}{% if failed %} <span class=bad>{{ failed|length|plural("error") }}</span>{% endif %}
{%- if g and g.abstained %} {{ abstained() }}{% endif %}
{%- if view and view.degraded %} <span class="badge degraded">degraded: turn \
{{ view.degraded|join(", ") }}</span>{% endif %}
{%- if cut %} <span class=tag>{{ cut.why }}</span>{% endif %}
{%- if s and s.question %} <span class=muted>{{ s.question|clip(100) }}</span>
{%- elif view and not view.single and view.turns and view.turns[0].question %} <span \
class=muted>{{ view.turns[0].question|clip(100) }}</span>{% endif %}\
</summary><div class=body>
{% if s %}
{% if s.question is not none %}<h4>question</h4><p class=text>{{ s.question }}</p>{% endif %}
{% if s.answer is not none %}<h4>answer{% if g and g.abstained %} {{ abstained() }}{% endif %}\
{% if g and g.claims %} <span class=legend>claims: <span class="key unsupported">unsupported\
</span> <span class="key contradicted">contradicted</span> <span class="key supported">supported\
</span></span>{% endif %}</h4>
{% if g %}{{ grounded(g) }}{% else %}<p class=text>{{ s.answer }}</p>{% endif %}
{% endif %}
{% for ref in s.references %}<h4>reference {{ loop.index }}</h4><p class=text>{{ ref }}</p>
{% endfor %}
{% if s.contexts %}<h4>contexts (rank order, gold grade)</h4><ol class=ctx>
{%- for c, grade in context_grades(s) %}<li><b>{{ c.id or missing }}</b> \
{% if grade is none %}<span class="tag unj">{{ unjudged }}</span>{% else %}<span class=tag>grade \
{{ grade|short }}</span>{% endif %} {{ c.text }}</li>{% endfor %}</ol>
{% if cut and cut.more_contexts %}<p class=note>… and {{ cut.more_contexts|amount }} more \
{{ "context" if cut.more_contexts == 1 else "contexts" }} (in report.json)</p>
{% endif %}
{% endif %}
{% set missed = not_retrieved(s) if cut is none else cut.missed %}
{% if missed %}<p class=missed><b>relevant but not retrieved:</b> \
{% for doc, grade in missed %}{{ doc }} (grade {{ grade|short }}){{ ", " if not loop.last }}\
{% endfor %}{% if cut and cut.more_missed %} and {{ cut.more_missed|amount }} more{% endif %}</p>
{% endif %}
{% endif %}
{% if view %}{{ conversation(view) }}{% endif %}
{% if g and not (s and s.answer is not none) %}<h4>claims{% if g.abstained %} {{ abstained() }}\
{% endif %}</h4>
{{ grounded(g) }}
{% endif %}
{% if failed %}<h4>errors</h4><ul class=errors>
{%- for metric, failure in failed.items() %}<li><b>{{ metric }}</b>: {{ failure.text() }}</li>
{%- endfor %}</ul>
{% endif %}
{% if na %}<h4>not applicable</h4><ul class=na>
{%- for metric, failure in na.items() %}<li><b>{{ metric }}</b>: {{ failure.message }}</li>
{%- endfor %}</ul>
{% endif %}
{% if r.judgments %}<h4>judgments</h4><table class=judg><thead><tr><th>rubric</th><th>score</th>\
<th>reason</th><th>attempts</th><th>cached</th></tr></thead><tbody>
{% for rubric, j in r.judgments.items() %}
{{ judgment(rubric, j, state=judgment_state(r, rubric, j)) }}
{% for c in j.parts() %}
{{ judgment(rubric, c, sub=true) }}
{% endfor %}
{% endfor %}
</tbody></table>
{% endif %}
{% if not (s or r.errors or r.judgments) %}
<p class=muted>Nothing beyond the scores in the table.</p>
{% endif %}
</div></details>
{%- endmacro %}
{% macro row(row) %}
<tr data-id="{{ row.id }}" data-err={{ row.err }}><th data-v="{{ row.id }}" scope=row>\
<a href="#s-{{ row.id }}">{{ row.id }}</a></th>{% for c in row.cells %}{{ cell(c) }}{% endfor %}\
</tr>
{%- endmacro %}
"""

PAGE = """\
{% import "svg" as svg %}
{% macro tally(n) %}<td class='num{{ " bad" if n }}'>{{ n }}</td>{% endmacro %}
{% macro summary_row(row) %}
<tr><th scope=row>{{ row.metric }}</th><td class=num>{{ row.s.mean|num }}</td>\
<td class=num>{{ row.s.ci_low|interval(row.s.ci_high) }}</td>\
<td>{% if row.bar %}{{ svg.cibar(row.bar) }}{% endif %}</td><td class=num>{{ row.s.n }}</td>\
{{ tally(row.s.errors) }}{{ tally(row.s.unscored) }}\
<td class=num>{{ row.s.not_applicable }}</td><td class=agg>{{ row.s.aggregate }}</td></tr>
{%- endmacro %}
<!DOCTYPE html>
<html lang=en><head><meta charset=utf-8><meta http-equiv="Content-Security-Policy" \
content="{{ csp }}"><meta name=viewport content="width=device-width,initial-scale=1">\
<title>{{ name }}</title><style>{{ css }}</style></head>
<body><header><h1>{{ name }}</h1><p class=meta>{{ report.samples|length }} samples\
{% if inline %} ({{ inline.shown|amount }} in the sample table){% endif %} · rag-judge \
{{ report.rag_judge_version }} · {{ report.created }}</p><nav><a href=#summary>Summary</a>\
{% if degraded %}<a href=#{{ degraded.anchor }}>Degraded</a>{% endif %}\
{% for t in unit_tables %}<a href=#{{ t.anchor }}>{{ t.title }}</a>{% endfor %}\
<a href=#dist>Distributions</a><a href=#atk>Retrieval @k</a>\
{% for t in judge_tables %}<a href=#{{ t.anchor }}>{{ t.title }}</a>{% endfor %}\
{% if review %}<a href=#review>Review</a>{% endif %}<a href=#samples>Samples</a>\
<a href=#run>Run</a></nav>{% if stub_rubrics %}<p class=banner><b>Stub judge.</b>\
{% for method, rubrics in stub_rubrics.items() %} {{ rubrics|join(", ") }} \
{{ "was" if rubrics|length == 1 else "were" }} scored by the stub provider: {{ method }}, for \
offline runs and CI, not an LLM's judgment.{% endfor %}</p>{% endif %}\
{% for w in report.warnings %}<p class=banner><b>{{ w.metric }}.</b> {{ w.message }}</p>\
{% endfor %}</header>
<section id=summary><h2>Summary</h2><table class=summary><thead><tr><th>metric</th>\
<th class=num>mean</th><th class=num>{{ ci_label }}</th><th></th><th class=num>n</th>\
<th class=num>errors</th><th class=num>unscored</th><th class=num title="samples the metric \
does not apply to">n/a</th><th>aggregate</th></tr></thead><tbody>
{% for level in levels %}
<tr class=level><th colspan=9 scope=rowgroup>{{ level.title }} <span class=note>{{ level.note }}\
</span></th></tr>
{% for row in level.rows %}
{{ summary_row(row) }}
{% endfor %}
{% else %}
{% for row in summary %}
{{ summary_row(row) }}
{% endfor %}
{% endfor %}
</tbody></table>
{% if twins %}<p class=note>Normalised twins hidden (each restates its rubric on [0, 1]; \
report.json and report.md keep them): {{ twins|join(", ") }}</p>
{% endif %}
</section>
{% if degraded %}<section id={{ degraded.anchor }}><h2>{{ degraded.title }}</h2>\
{{ degraded|table }}</section>
{% endif %}
{% for t in unit_tables %}<section id={{ t.anchor }}><h2>{{ t.title }}</h2>\
<div class=scroll>{{ t|table }}</div></section>
{% endfor %}
<section id=dist><h2>Distributions</h2><div class=grid>
{% for d in distributions %}
<figure class=card><figcaption><b>{{ d.metric }}</b> <span>mean {{ d.s.mean|short }}</span>\
</figcaption>{{ svg.histogram(d.histogram) }}<small>n={{ d.s.n }}
{%- if d.s.errors %} · {{ d.s.errors|plural("error") }}{% endif %}
{%- if d.s.not_applicable %} · {{ d.s.not_applicable }} n/a{% endif %}</small></figure>
{% endfor %}
</div></section>
<section id=atk><h2>Retrieval across k</h2>
{% if families %}<div class=grid>
{% for family, chart in families %}
<figure class=card><figcaption><b>{{ family }}@k</b> <span>mean and CI</span></figcaption>\
{{ svg.kchart(chart) }}</figure>
{% endfor %}
</div>
{% else %}<p class=muted>No metric family is measured at more than one cut-off.</p>
{% endif %}
</section>
{% for t in judge_tables %}
<section id={{ t.anchor }}><h2>{{ t.title }}</h2>{{ t|table }}</section>
{% endfor %}
{% if review %}<section id=review><h2>Review</h2><p class=note>Label the judge's verdicts \
yourself, one sample at a time: keys 1–5 label, 0 clears, n or → next, b or ← back. The queue \
puts the most uncertain verdicts first (a jury's or sampled verdicts' spread, the entropy of \
the judge's score distribution), then the rest in report order. Export the labels as JSON \
Lines for <code>rag-judge calibrate</code> or a config's <code>labels:</code>; for the \
bias-corrected estimates, label a random slice, not the queue's head.</p>
{% if review_note %}<p class=banner>{{ review_note }}</p>
{% endif %}
{% if chunks %}<p class=note id=rv-cnote>{{ chunk_note }}</p>
{% endif %}
{% if plan %}<p class=banner id=rv-stop hidden></p><p class=note id=rv-plan-status></p>
<script type=application/json id=rv-plan>{{ plan }}</script>
{% endif %}
<div class=tools><button id=rv-start type=button>Start review</button><label>rubric \
<select id=rv-rubric></select></label><span id=rv-count>0 labelled</span><button id=rv-export \
type=button>Export labels</button><a id=rv-download download=labels.jsonl hidden>labels.jsonl\
</a></div><p class=note id=rv-store></p><div id=rv-card hidden><p class=meta><span \
id=rv-pos></span> · sample <b id=rv-id></b> · judge: <span id=rv-judge></span></p>\
<table class=judg hidden><thead><tr><th>rubric</th><th>score</th><th>reason</th>\
<th>attempts</th><th>cached</th></tr></thead><tbody id=rv-verdict></tbody></table><p>Your \
label: <span id=rv-label>–</span> {% for v in range(1, 6) %}<button class=rv-b data-v={{ v }} \
type=button>{{ v }}</button> {% endfor %}<button class=rv-b data-v=0 type=button>clear</button> \
<button id=rv-back type=button>← back</button> <button id=rv-next type=button>next →</button>\
</p><div id=rv-body></div></div>{% if chunks %}<div id=rv-ccard hidden><p class=meta><span \
id=rv-cpos></span> · sample <b id=rv-cid></b> · <span id=rv-cdone></span></p><p><b>Question</b> \
<span id=rv-cq></span></p><p><b>Answer</b> <span id=rv-ca></span></p><ol id=rv-clist></ol><p>\
<button id=rv-cback type=button>← back</button> <button id=rv-cnext type=button>next →</button>\
</p></div>{% endif %}<textarea id=rv-out readonly hidden rows=6 \
aria-label="exported labels"></textarea>
<script type=application/json id=rv-data>{{ review }}</script>{% if chunks %}<script \
type=application/json id=rv-chunks>{{ chunks }}</script>{% endif %}</section>
{% endif %}
<section id=samples><h2>Samples</h2><div class=tools><input id=filter type=search \
placeholder='Filter by sample id'><label><input id=onlyerr type=checkbox> only samples with \
errors</label><button id=openall type=button>Expand all</button><button id=closeall \
type=button>Collapse all</button></div>
{% if inline %}<p class=banner id=inline>{{ inline.text }}</p>
{% endif %}
{% if not_embedded %}<p class=muted>The dataset ({{ not_embedded }}) is not embedded; the details \
show what report.json holds.</p>
{% endif %}
<div class=scroll><table id=matrix class=matrix><colgroup><col></colgroup>
{%- for group, ms in matrix.groups %}<colgroup class=grp span={{ ms|length }}></colgroup>\
{% endfor %}<thead><tr class=groups><th></th>
{%- for group, ms in matrix.groups %}<th colspan={{ ms|length }} scope=colgroup>{{ group }}</th>\
{% endfor %}</tr><tr class=heads><th data-t=s>sample</th>
{%- for m in matrix.metrics %}<th data-t=n>{{ m|break_after("_") }}</th>{% endfor %}</tr>\
</thead><tbody>
{{ rows }}</tbody></table></div>
<div id=details>
{{ details }}</div></section>
<section id=run><h2>Run</h2><div class=cols><div><h3>Versions</h3><table class=kv>
{%- for lib, version in versions %}<tr><th scope=row>{{ lib }}</th><td{{ " class=muted"|safe \
if version == "not installed" }}>{{ version }}</td></tr>{% endfor %}<tr><th scope=row>created\
</th><td>{{ report.created }}</td></tr></table><p class=note>rag-judge: the run's; python and \
libraries: where this page was rendered.</p><h3>Usage and cost</h3><table class=kv>
{%- for key, value in usage %}<tr><th scope=row>{{ key|replace("_", " ") }}</th>\
<td class=num>{{ value|amount }}</td></tr>{% endfor %}</table></div><div><h3>Signatures</h3>\
<table class=kv>
{%- for metric, sig in report.signatures.items() %}<tr><th scope=row>{{ metric }}</th><td><code>\
{{ sig|signature }}</code></td></tr>{% endfor %}</table></div></div><h3>Config</h3>\
<pre class=config>{{ config }}</pre></section>
<script>{{ js }}</script></body></html>
"""
