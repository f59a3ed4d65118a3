"""The console's pages: Jinja2 templates with autoescape on, so every value a page shows (memory
content and turns are user text) is HTML-escaped unless a template says otherwise — none does.
Kept in this module (not files) so the package needs no package-data. No script anywhere: the
pages work with JavaScript off, and the Content-Security-Policy (routes.py) forbids any.
The laws cited here are defined in docs/concepts.md#laws."""
from __future__ import annotations

from urllib.parse import quote

from jinja2 import DictLoader, Environment, StrictUndefined, select_autoescape

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center}
header a{color:#cfe3ff;text-decoration:none} header .who{margin-left:auto;font-size:12px;color:#cbd5e1}
header form{display:inline;margin:0} header button{font-size:12px}
main{padding:1em 1.5em;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff} th,td{border:1px solid #e5e7eb;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f3f4f6} .muted{color:#6b7280} .err{color:#b91c1c;font-weight:600}
.tabs a{margin-right:.8em} .tabs a.on{font-weight:700;text-decoration:none;color:#111}
.status-active{color:#166534} .status-outdated{color:#9a3412} .status-archived,.status-expired{color:#854d0e}
.status-merged,.status-deduped{color:#3730a3}
ol.timeline{list-style:none;padding-left:0} ol.timeline>li{background:#fff;border-left:4px solid #3b7dd8;margin:.5em 0;padding:.4em .8em}
ol.causes{margin:.3em 0 0 1em;padding-left:1em;border-left:2px dashed #cbd5e1;list-style:none}
code,.mono{font-family:ui-monospace,monospace;font-size:12px}
svg{background:#fff;border:1px solid #e5e7eb} svg text{font-size:11px;fill:#111}
.legend span{margin-right:1em}
form.filters input,form.filters select{margin-right:.6em}
"""

BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }} · memstream console</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="/console/static/console.css"></head>
<body><header><strong>memstream</strong>
{% if p %}<a href="/console/">users</a>
{% if user is defined and user %}<a href="/console/users/{{ user|u }}/memories">memories</a>
<a href="/console/users/{{ user|u }}/graph">graph</a>
<a href="/console/users/{{ user|u }}/entities">people &amp; places</a>{% endif %}
{% if 'admin' in p.scopes %}<a href="/console/deadletters">dead letters</a>{% endif %}
{% if stack %}<a href="/console/replay">replay</a>{% endif %}
<span class="who">tenant {{ p.tenant }}{% if p.user %} · user {{ p.user }}{% endif %} · {{ p.scopes|sort|join(', ') }}
<form method="post" action="/console/logout"><button type="submit">sign out</button></form></span>{% endif %}
</header><main><h1>{{ title }}</h1>{% block body %}{% endblock %}</main></body></html>"""

LOGIN = """{% extends "base" %}{% block body %}
{% if error %}<p class="err" id="login-error">{{ error }}</p>{% endif %}
<form method="post" action="/console/login" id="login">
<label>API key <input type="password" name="api_key" id="api_key" size="60" autocomplete="off" required></label>
<button type="submit" id="sign-in">sign in</button></form>
<p class="muted">The key is kept in an HttpOnly, SameSite=Strict cookie for this console only
(<code>memstream keys create-api-key</code> makes one).</p>{% endblock %}"""

HOME = """{% extends "base" %}{% block body %}
<form method="get" action="/console/users" class="filters"><label>user id <input name="user" id="user" required
{% if p.user %}value="{{ p.user }}"{% endif %}></label><button type="submit">open</button></form>
<p class="muted">A user of tenant {{ p.tenant }}: their memories, each memory's life, their memory graph.</p>
{% if users is not none %}<table id="users"><tr><th>user</th><th>memories</th><th>active</th><th>last change</th><th></th></tr>
{% for x in users %}<tr data-user="{{ x.user }}"><td><a href="/console/users/{{ x.user|u }}/memories">{{ x.user }}</a></td>
<td>{{ x.memories }}</td><td>{{ x.active }}</td><td class="mono">{{ x['last'].isoformat() if x['last'] else '' }}</td>
<td><a href="/console/users/{{ x.user|u }}/graph">graph</a>
<a href="/console/users/{{ x.user|u }}/entities">people &amp; places</a></td></tr>
{% else %}<tr><td colspan="5" class="muted">no user of this tenant has memories yet</td></tr>{% endfor %}</table>{% endif %}
{% endblock %}"""

MEMORIES = """{% extends "base" %}{% block body %}
<p class="tabs">{% for f, n in counts.items() %}<a href="?status={{ f|u }}{% if category %}&amp;category={{ category|u }}{% endif %}{% if q %}&amp;q={{ q|u }}{% endif %}"
 class="{{ 'on' if f == status else '' }}" id="tab-{{ f }}">{{ f }} ({{ n }})</a>{% endfor %}</p>
<form method="get" class="filters"><input type="hidden" name="status" value="{{ status }}">
<label>category <input name="category" value="{{ category or '' }}"></label>
<label>contains <input name="q" value="{{ q or '' }}"></label><button type="submit">filter</button></form>
<table id="memories"><tr><th>memory</th><th>content</th><th>category</th><th>tags</th><th>importance</th><th>status</th><th>created</th></tr>
{% for m in rows %}<tr data-memory-id="{{ m.memory_id }}"><td><a class="mono" href="/console/memories/{{ m.memory_id|u }}">{{ m.memory_id }}</a></td>
<td class="content">{{ m.content }}</td><td>{{ m.category }}</td><td>{{ (m.tags or [])|join(', ') }}</td>
<td>{{ '%.3f'|format(m.importance) }}</td><td class="status-{{ m.status }}">{{ m.status }}
{% if m.superseded_by %}<br><span class="muted">by <a href="/console/memories/{{ m.superseded_by|u }}">{{ m.superseded_by }}</a></span>{% endif %}
{% if m.merged_into %}<br><span class="muted">into <a href="/console/memories/{{ m.merged_into|u }}">{{ m.merged_into }}</a></span>{% endif %}</td>
<td class="mono">{{ m.created_at.isoformat() }}</td></tr>
{% else %}<tr><td colspan="7" class="muted">no memories match</td></tr>{% endfor %}</table>{% endblock %}"""

EVENT = """{% macro event(e) %}<span class="mono">{{ e.time }}</span> <strong class="type">{{ e.type }}</strong>
<span class="mono muted">{{ e.topic }}:{{ e.partition }}:{{ e.offset }}</span><br><span class="summary">{{ e.summary }}</span>{% endmacro %}"""

TIMELINE = """{% extends "base" %}{% from "event" import event %}{% block body %}
<p>memory <code id="memory-id">{{ a.memory_id }}</code> of user <a href="/console/users/{{ user|u }}/memories">{{ user }}</a>:
<strong class="status-{{ a.status }}" id="memory-status">{{ a.status }}</strong>
{% if not content %}<span class="muted">(content hidden: this key lacks audit:content)</span>{% endif %}</p>
<h2>origin: the causation chain down to the turn</h2>
<ol class="timeline" id="origin">{% for e in a.origin %}<li data-type="{{ e.type }}">{{ event(e) }}</li>
{% else %}<li class="muted">not indexed</li>{% endfor %}</ol>
<h2>life ({{ a.events|length }} events)</h2>
<ol class="timeline" id="life">{% for e in a.events %}<li data-type="{{ e.type }}">{{ event(e) }}
{% if e.causes and e.type != 'memory.created' %}<ol class="causes">{% for c in e.causes %}<li data-type="{{ c.type }}">&larr; {{ event(c) }}</li>{% endfor %}</ol>{% endif %}</li>{% endfor %}</ol>
{% if a.parents %}<h2>came from</h2><ul>{% for x in a.parents %}<li>{{ x.relation }} <a href="/console/memories/{{ x.memory_id|u }}">{{ x.memory_id }}</a> ({{ x.status or '?' }})</li>{% endfor %}</ul>{% endif %}
{% if a.children %}<h2>went to</h2><ul>{% for x in a.children %}<li>{{ x.relation }} <a href="/console/memories/{{ x.memory_id|u }}">{{ x.memory_id }}</a></li>{% endfor %}</ul>{% endif %}
{% if a.links %}<h2>links</h2><ul>{% for x in a.links %}<li>{{ x.direction }} {{ x.kind }} <a href="/console/memories/{{ x.memory_id|u }}">{{ x.memory_id }}</a> (weight {{ x.weight }})</li>{% endfor %}</ul>{% endif %}
{% endblock %}"""

GRAPH = """{% extends "base" %}{% block body %}
<p class="legend"><span>{{ g.nodes|length }} memories, {{ g.edges|length }} edges</span>
<span>— FOLLOWS: grey, SIMILAR_TO: blue dashed; fill: status (green active, ochre archived, red superseded, violet merged)</span></p>
<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{{ g.width }}" height="{{ g.height }}" viewBox="0 0 {{ g.width }} {{ g.height }}" role="img" aria-label="memory graph">
{% for e in g.edges %}<line class="edge" data-kind="{{ e.kind }}" x1="{{ e.x1 }}" y1="{{ e.y1 }}" x2="{{ e.x2 }}" y2="{{ e.y2 }}" stroke="{{ e.stroke }}" stroke-width="1.5"{% if e.dashed %} stroke-dasharray="5 4"{% endif %}><title>{{ e.kind }} {{ e.weight }}</title></line>
{% endfor %}{% for n in g.nodes %}<a href="/console/memories/{{ n.id|u }}"><g class="node" data-memory-id="{{ n.id }}" data-status="{{ n.status }}">
<circle cx="{{ n.x }}" cy="{{ n.y }}" r="8" fill="{{ n.fill }}"><title>{{ n.content }} ({{ n.status }}, {{ n.category }})</title></circle>
<text x="{{ n.lx }}" y="{{ n.y + 4 }}" text-anchor="{{ n.anchor }}">{{ n.label }}</text></g></a>
{% endfor %}</svg>{% endblock %}"""

DEADLETTERS = """{% extends "base" %}{% block body %}
<p class="muted">The newest {{ per_partition }} dead letters of each partition of <code>{{ topic }}</code>, newest first, of
{% if stack %}the users of tenant {{ p.tenant }} and records without a user{% else %}the users of tenant {{ p.tenant }}{% if p.user %} (user {{ p.user }}){% endif %} only{% endif %}. The original
record is kept only sealed (with its user's key) and is not shown; its source position leads to it.</p>
<table id="deadletters"><tr><th>when</th><th>reason</th><th>source</th><th>consumer</th><th>user</th><th>size</th></tr>
{% for d in rows %}<tr><td class="mono">{{ d.time or '' }}</td><td class="reason">{{ d.reason }}</td>
<td class="mono">{{ d.source.topic }}:{{ d.source.partition }}:{{ d.source.offset }}</td><td>{{ d.consumer }}</td>
<td>{{ d.user or '' }}</td><td>{{ d.size }}{% if d.raw_omitted %} <span class="muted">({{ d.raw_omitted }})</span>{% endif %}</td></tr>
{% else %}<tr><td colspan="6" class="muted">no dead letters</td></tr>{% endfor %}</table>{% endblock %}"""

REPLAY = """{% extends "base" %}{% block body %}
<p>Each projector's stored position (kept with its writes, law 3) against the log end of every partition it reads.
{% if behind %}<strong id="replay-state">{{ behind }} records not applied yet</strong>{% else %}<strong id="replay-state">all projectors at the log end</strong>{% endif %}</p>
<table id="positions"><tr><th>projector</th><th>topic</th><th>partition</th><th>position</th><th>log end</th><th>behind</th></tr>
{% for r in rows %}<tr><td>{{ r.projector }}</td><td class="mono">{{ r.topic }}</td><td>{{ r.partition }}</td><td>{{ r.position }}</td>
<td>{{ r.log_end }}</td><td>{{ r.behind }}</td></tr>{% endfor %}</table>
<p class="muted">Whether each projection equals a replay of the log: <code>memstream replay verify</code> rebuilds shadows and
compares checksums (minutes on a large log, so it is not run from a page).</p>{% endblock %}"""

RELROW = """{% macro ent(user, id, name) %}{% if id == 'self' %}the user{% else %}<a href="/console/users/{{ user|u }}/entities/{{ id|u }}">{{ name or id }}</a>{% endif %}{% endmacro %}
{% macro validity(r) %}from <span class="mono">{{ r.valid_from.isoformat() if r.valid_from else '?' }}</span>
{% if r.valid_to %} to <span class="mono">{{ r.valid_to.isoformat() }}</span>{% elif not r.ended %} (current){% endif %}
{% if r.ended %} · ended: {{ r.ended.reason or '' }}{% endif %}{% endmacro %}
{% macro row(user, r) %}<tr data-relation-id="{{ r.relation_id }}" data-current="{{ 'yes' if r.current else 'no' }}">
<td>{{ ent(user, r.subject_id, r.subject_name) }}</td><td class="predicate">{{ r.predicate }}</td>
<td>{{ ent(user, r.object_id, r.object_name) }}</td><td>{{ r.group or '' }}</td><td>{{ r.text or '' }}</td>
<td>{{ validity(r) }}</td><td class="mono">{{ r.source_turn or '' }}</td></tr>{% endmacro %}"""

ENTITIES = """{% extends "base" %}{% from "relrow" import row %}{% block body %}
<form method="get" class="filters"><label>as of <input name="as_of" value="{{ as_of.isoformat() if as_of else '' }}"
 placeholder="2021-03-01"></label><button type="submit">draw</button>{% if as_of %} <a href="?">now</a>{% endif %}</form>
<p class="legend"><span>{{ count }} entities, {{ g.edges|length }} relations drawn{% if as_of %} as of {{ as_of.isoformat() }}{% endif %}</span>
<span>— colour: relation group; dashed: ended; hover an edge for its validity</span></p>
<svg id="entity-graph" xmlns="http://www.w3.org/2000/svg" width="{{ g.width }}" height="{{ g.height }}" viewBox="0 0 {{ g.width }} {{ g.height }}" role="img" aria-label="people and places">
{% for e in g.edges %}<g class="relation" data-relation-id="{{ e.relation_id }}" data-predicate="{{ e.predicate }}" data-ended="{{ 'yes' if e.dashed else 'no' }}">
<line x1="{{ e.x1 }}" y1="{{ e.y1 }}" x2="{{ e.x2 }}" y2="{{ e.y2 }}" stroke="{{ e.stroke }}" stroke-width="1.8"{% if e.dashed %} stroke-dasharray="6 4"{% endif %}><title>{{ e.text or e.predicate }}: valid from {{ e.valid_from.isoformat() if e.valid_from else '?' }} to {{ e.valid_to.isoformat() if e.valid_to else 'now' }}{% if e.ended %} (ended: {{ e.ended.reason or '' }}){% endif %}</title></line>
<text x="{{ e.mx }}" y="{{ e.my }}" text-anchor="middle" class="predicate">{{ e.predicate }}</text></g>
{% endfor %}{% for n in g.nodes %}{% if n.self %}<g class="entity" data-entity-id="self">{% else %}<a href="/console/users/{{ user|u }}/entities/{{ n.entity_id|u }}"><g class="entity" data-entity-id="{{ n.entity_id }}" data-type="{{ n.entity_type }}">{% endif %}
<circle cx="{{ n.x }}" cy="{{ n.y }}" r="{{ 12 if n.self else 8 }}" fill="{{ n.fill }}"><title>{{ n.name or n.entity_id }} ({{ n.entity_type }})</title></circle>
<text x="{{ n.lx }}" y="{{ n.ly }}" text-anchor="{{ n.anchor }}">{{ n.label }}</text></g>{% if not n.self %}</a>{% endif %}
{% endfor %}</svg>
<h2>relations (current and ended)</h2>
<table id="relations"><tr><th>subject</th><th>predicate</th><th>object</th><th>group</th><th>reads</th><th>validity</th><th>asserted by turn</th></tr>
{% for r in relations %}{{ row(user, r) }}{% else %}<tr><td colspan="7" class="muted">no relations yet</td></tr>{% endfor %}</table>{% endblock %}"""

ENTITY = """{% extends "base" %}{% from "relrow" import row %}{% block body %}
<p><a href="/console/users/{{ user|u }}/entities">people &amp; places of {{ user }}</a></p>
<table id="entity"><tr><th>name</th><td id="entity-name">{{ e.name or '' }}</td></tr><tr><th>type</th><td id="entity-type">{{ e.entity_type }}</td></tr>
<tr><th>aliases</th><td id="entity-aliases">{{ (e.aliases or [])|join(', ') }}</td></tr><tr><th>id</th><td class="mono">{{ e.entity_id }}</td></tr>
<tr><th>observed in turn</th><td class="mono">{{ e.source_turn or '' }}</td></tr></table>
<h2>relations (both directions, current and ended)</h2>
<table id="relations"><tr><th>subject</th><th>predicate</th><th>object</th><th>group</th><th>reads</th><th>validity</th><th>asserted by turn</th></tr>
{% for r in e.relations %}{{ row(user, r) }}{% else %}<tr><td colspan="7" class="muted">no relations</td></tr>{% endfor %}</table>{% endblock %}"""

ERROR = """{% extends "base" %}{% block body %}<p class="err" id="error">{{ message }}</p>{% endblock %}"""


def _url(value) -> str:
    """A path segment or query value: percent-encoded (then HTML-escaped by autoescape)."""
    return quote(str(value), safe="")


ENV = Environment(loader=DictLoader({"base": BASE, "login": LOGIN, "home": HOME, "memories": MEMORIES,
                                     "event": EVENT, "timeline": TIMELINE, "graph": GRAPH,
                                     "deadletters": DEADLETTERS, "replay": REPLAY, "error": ERROR,
                                     "relrow": RELROW, "entities": ENTITIES, "entity": ENTITY}),
                  autoescape=select_autoescape(default=True, default_for_string=True), undefined=StrictUndefined)
ENV.filters["u"] = _url


def render(name: str, **ctx) -> str:
    return ENV.get_template(name).render(**ctx)
