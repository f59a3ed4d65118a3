"""The memory graph as an SVG drawing, laid out here on the server (no script in the browser).

Nodes sit on a circle in creation order, so FOLLOWS edges (consecutive memories) run along the
rim and SIMILAR_TO edges cut across it: a layout that is deterministic (the same graph draws the
same) and needs no force simulation. Pure: it only computes coordinates; the template escapes
every text it draws.
"""
from __future__ import annotations

import math

STATUS_FILL = {"active": "#4c9f70", "archived": "#b0a36b", "expired": "#b0a36b", "outdated": "#c96f5b",
               "merged": "#8a8fb8", "deduped": "#8a8fb8"}
EDGE_STROKE = {"FOLLOWS": "#9aa0a6", "SIMILAR_TO": "#3b7dd8"}


def layout(nodes: list[dict], edges: list[dict], size: int = 900) -> dict:
    """{"width", "height", "nodes": [... x, y, fill, label], "edges": [... x1, y1, x2, y2, stroke]}."""
    n = len(nodes)
    c = size / 2
    radius = 0 if n <= 1 else c - 200     # room outside the circle for a 28-character label
    placed, at = [], {}
    for i, node in enumerate(nodes):
        angle = -math.pi / 2 + 2 * math.pi * i / max(n, 1)
        x, y = round(c + radius * math.cos(angle), 1), round(c + radius * math.sin(angle), 1)
        at[node["id"]] = (x, y)
        content = node.get("content") or ""
        placed.append({**node, "x": x, "y": y, "fill": STATUS_FILL.get(node.get("status"), "#777"),
                       "label": content if len(content) <= 28 else content[:27] + "…",
                       "anchor": "start" if x >= c else "end", "lx": round(x + (12 if x >= c else -12), 1)})
    lines = []
    for e in edges:
        if e["source"] in at and e["target"] in at:
            (x1, y1), (x2, y2) = at[e["source"]], at[e["target"]]
            lines.append({**e, "x1": x1, "y1": y1, "x2": x2, "y2": y2,
                          "stroke": EDGE_STROKE.get(e["kind"], "#999"), "dashed": e["kind"] == "SIMILAR_TO"})
    return {"width": size, "height": size, "nodes": placed, "edges": lines}


GROUP_ORDER = ("family", "partner", "social", "work", "place", "possession", "participation", "identity")
GROUP_STROKE = {"family": "#c2410c", "partner": "#be185d", "social": "#3b7dd8", "work": "#4d7c0f",
                "place": "#0f766e", "possession": "#7c3aed", "participation": "#a16207", "identity": "#6b7280"}
TYPE_FILL = {"person": "#f59e0b", "pet": "#fb923c", "place": "#14b8a6", "organisation": "#84cc16",
             "product": "#a78bfa", "event": "#facc15", "user": "#1f2937"}


def entity_layout(entities: list[dict], relations: list[dict], size: int = 900) -> dict:
    """The user ("self") at the centre; entities on a circle around, sorted by the group of their
    first relation (GROUP_ORDER), then type and name, so each group is an arc; deterministic.
    Edges: one per relation in `relations` (each with `holds`; those not holding are dashed)."""
    c = size / 2
    group_of: dict[str, int] = {}
    for r in relations:
        rank = GROUP_ORDER.index(r["group"]) if r.get("group") in GROUP_ORDER else len(GROUP_ORDER)
        for end in (r["subject_id"], r["object_id"]):
            group_of[end] = min(group_of.get(end, rank), rank)
    others = sorted((e for e in entities if e["entity_id"] != "self"),
                    key=lambda e: (group_of.get(e["entity_id"], 99), e["entity_type"], e.get("name") or "",
                                   e["entity_id"]))
    n = len(others)
    radius = c - 200 if n else 0
    at = {"self": (c, c)}
    placed = [{"entity_id": "self", "name": "the user", "entity_type": "user", "x": c, "y": c,
               "fill": TYPE_FILL["user"], "label": "the user", "anchor": "middle", "lx": c, "ly": c + 24,
               "self": True}]
    for i, e in enumerate(others):
        angle = -math.pi / 2 + 2 * math.pi * i / n
        x, y = round(c + radius * math.cos(angle), 1), round(c + radius * math.sin(angle), 1)
        at[e["entity_id"]] = (x, y)
        name = e.get("name") or e["entity_id"]
        placed.append({**e, "x": x, "y": y, "fill": TYPE_FILL.get(e["entity_type"], "#777"),
                       "label": name if len(name) <= 28 else name[:27] + "…",
                       "anchor": "start" if x >= c else "end", "lx": round(x + (12 if x >= c else -12), 1),
                       "ly": round(y + 4, 1), "self": False})
    lines = []
    for r in relations:
        if r["subject_id"] in at and r["object_id"] in at:
            (x1, y1), (x2, y2) = at[r["subject_id"]], at[r["object_id"]]
            lines.append({**r, "x1": x1, "y1": y1, "x2": x2, "y2": y2,
                          "mx": round((x1 + x2) / 2, 1), "my": round((y1 + y2) / 2 - 3, 1),
                          "stroke": GROUP_STROKE.get(r.get("group") or "", "#999"), "dashed": not r["holds"]})
    return {"width": size, "height": size, "nodes": placed, "edges": lines}
