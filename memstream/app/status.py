"""`memstream status`: consumer lag per group, printed under the workers' health.

The lag is memstream/lag.py's (committed offsets vs. high watermarks), read once per call.
"""
from __future__ import annotations


def lag_rows(settings) -> list[dict] | dict:
    """Every partition's lag as dicts, or {"error": …} when the broker does not answer."""
    from memstream.lag import consumer_lag
    try:
        return [r.as_dict() for r in consumer_lag(settings, timeout=5.0)]
    except Exception as exc:  # noqa: BLE001 - status reports what it can
        return {"error": f"{type(exc).__name__}: {exc or 'the broker did not answer in time'}"[:300]}


def endpoint_line(settings) -> str:
    """Where each running worker serves /metrics (from its health file)."""
    from memstream.app.workers import pipeline_status
    ports = [f"{name} :{w['metrics']['port']}" for name, w in pipeline_status(settings)["workers"].items()
             if (w.get("metrics") or {}).get("port")]
    return "metrics endpoints: " + (", ".join(ports) if ports else "none (MEMSTREAM_METRICS_PORT=0, or no worker up)")


def lag_lines(settings) -> list[str]:
    """One line per group: its total lag and the partitions that lag, worst first, e.g.
    `memstream.memory   12   facts:3=9 facts:0=3`."""
    rows = lag_rows(settings)
    if isinstance(rows, dict):
        return [f"consumer lag: not read ({rows['error']})"]
    if not rows:
        return ["consumer lag: no consumer group of this namespace has committed yet"]
    ns = settings.namespace + "."
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    width = max(14, *(len(g) - len(ns) for g in groups)) + 2
    out = [f"consumer lag (records behind the log end; groups under {ns}):",
           f"  {'group':<{width}}{'lag':>8}  partitions behind"]
    for group, parts in groups.items():
        total = sum(p["lag"] for p in parts)
        behind = sorted((p for p in parts if p["lag"]), key=lambda p: -p["lag"])
        where = " ".join(f"{p['topic'].removeprefix(ns)}:{p['partition']}={p['lag']}" for p in behind[:6])
        more = f" (+{len(behind) - 6} more)" if len(behind) > 6 else ""
        out.append(f"  {group.removeprefix(ns):<{width}}{total:>8}  {where or '-'}{more}")
    return out
