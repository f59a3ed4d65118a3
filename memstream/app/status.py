"""`memstream status` and `memstream pipeline status`: the workers' health, the broker, consumer lag.

The workers' health comes from their heartbeat files (adapters/resilience.py `Health`); the lag
is adapters/lag.py's (committed offsets vs. high watermarks), read once per call. Before asking
Kafka anything, status checks that a broker accepts a connection at all: with the only broker dead
the admin client just times out ("TimeoutError: " and nothing else), so the outage is named from
the connect instead — which address, what failed — in well under a second.

Kept light on purpose (start-up budget, memstream/app/cli.py): the standard library, orjson and
the settings; confluent_kafka only once a broker answered.
"""
from __future__ import annotations

import time

from adapters.resilience import describe, pid_alive, read_health, unreachable

# A worker whose heartbeat is older than this is stuck or gone: it writes one every second.
STALE_AFTER_S = 5.0


def pipeline_status(settings, stale_after: float = STALE_AFTER_S) -> dict:
    """Per worker: state, pid, heartbeat age, restarts (from the supervisor), its broker connection
    and per-component states. State: down (no process), stale (no heartbeat), degraded (its broker
    connection is lost: `reason` says which address and why), waiting (a component waits out an
    outage), up."""
    now = time.time()
    files = read_health(settings)
    sup = files.pop("supervisor", None)
    sup_workers = (sup or {}).get("workers", {}) if sup and pid_alive(sup.get("pid", 0)) else {}
    out = {}
    for name in sorted(set(files) | set(sup_workers)):
        h = files.get(name, {})
        pid = h.get("pid") or sup_workers.get(name, {}).get("pid")
        alive = bool(pid) and pid_alive(pid)
        age = now - h["heartbeat"] if "heartbeat" in h else None
        state = "down" if not alive else ("stale" if age is None or age > stale_after else "up")
        comps = h.get("components", {}) if alive else {}
        broker = h.get("broker") if alive else None
        reason = None
        if state == "up" and broker and broker.get("state") == "lost":
            state = "degraded"
            reason = f"broker connection lost {now - broker['since']:.0f}s ago: {broker.get('reason')}"
        elif state == "up" and any(c.get("state") == "waiting" for c in comps.values()):
            state = "waiting"
        out[name] = {"state": state, "reason": reason, "pid": pid if alive else None,
                     "heartbeat_age_s": round(age, 1) if age is not None else None,
                     "restarts": sup_workers.get(name, {}).get("restarts"),
                     "last_exit": sup_workers.get(name, {}).get("last_exit"),
                     "broker": broker,
                     "metrics": h.get("metrics") if alive else None,   # {"port": …}: its /metrics endpoint
                     "components": {k: {**v, "for_s": round(now - v["since"], 1) if v.get("since") else None}
                                    for k, v in comps.items()}}
    return {"supervisor": {"pid": sup["pid"], "alive": pid_alive(sup["pid"])} if sup else None, "workers": out}


def pipeline_lines(status: dict) -> list[str]:
    """`pipeline status` as text: one line per worker, its reason when not healthy, its components."""
    sup = status["supervisor"]
    lines = [f"supervisor: {'pid ' + str(sup['pid']) + (' running' if sup['alive'] else ' gone') if sup else 'none'}"]
    if not status["workers"]:
        lines.append("no worker has reported (none started in this namespace?)")
    for name, w in status["workers"].items():
        extra = "" if w["restarts"] is None else f"  restarts {w['restarts']}" + (f" (last: {w['last_exit']})" if w["last_exit"] else "")
        age = "" if w["heartbeat_age_s"] is None else f"  heartbeat {w['heartbeat_age_s']}s ago"
        lines.append(f"{name:<14}{w['state']:<9}pid {w['pid'] or '-'}{age}{extra}")
        if w.get("reason"):
            lines.append(f"    {w['reason']}")
        for comp, c in w["components"].items():
            if comp == name and len(w["components"]) > 1:
                continue
            why = f"  ({c['reason']})" if c.get("reason") and c.get("state") != "running" else ""
            lines.append(f"    {comp:<18}{c.get('state', '?'):<9}for {c.get('for_s')}s{why}")
    return lines


def kafka_check(settings) -> dict:
    """{"ok": True, "brokers": […]} when a broker accepts a connection, else {"ok": False, "error": why}."""
    addresses = list(settings.kafka_addresses)
    why = unreachable(addresses)
    if why:
        return {"ok": False, "brokers": addresses, "error": f"no Kafka broker reachable ({why})"}
    return {"ok": True, "brokers": addresses}


def lag_rows(settings, kafka: dict | None = None) -> list[dict] | dict:
    """Every partition's lag as dicts, or {"error": …} (always with a reason) when it cannot be read."""
    kafka = kafka or kafka_check(settings)
    if not kafka["ok"]:
        return {"error": kafka["error"]}
    from adapters.lag import consumer_lag
    try:
        return [r.as_dict() for r in consumer_lag(settings, timeout=5.0)]
    except Exception as exc:  # noqa: BLE001 - status reports what it can
        return {"error": f"the broker at {settings.kafka_bootstrap} did not answer: {describe(exc)}"[:300]}


def endpoint_line(status: dict) -> str:
    """Where each running worker serves /metrics (from its health file)."""
    ports = [f"{name} :{w['metrics']['port']}" for name, w in status["workers"].items()
             if (w.get("metrics") or {}).get("port")]
    return "metrics endpoints: " + (", ".join(ports) if ports else "none (MEMSTREAM_METRICS_PORT=0, or no worker up)")


def kafka_line(kafka: dict) -> str:
    if kafka["ok"]:
        return f"kafka: reachable at {', '.join(kafka['brokers'])}"
    return f"kafka: DOWN: {kafka['error']}"


def lag_lines(settings, rows: list[dict] | dict) -> list[str]:
    """One line per group: its total lag and the partitions that lag, worst first, e.g.
    `memstream.memory   12   facts:3=9 facts:0=3`."""
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


def status_report(settings) -> dict:
    """Everything `memstream status` shows, as one dict (its --json)."""
    kafka = kafka_check(settings)
    return {**pipeline_status(settings), "kafka": kafka, "lag": lag_rows(settings, kafka)}


def status_lines(settings) -> list[str]:
    report = status_report(settings)
    return [*pipeline_lines(report), endpoint_line(report), kafka_line(report["kafka"]),
            *lag_lines(settings, report["lag"])]
