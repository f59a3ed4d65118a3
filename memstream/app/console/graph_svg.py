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
