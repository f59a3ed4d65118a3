"""Prometheus metrics and consumer lag on the real pipeline (adapters/metrics.py, adapters/lag.py).

The pipeline fixture's workers serve /metrics on this session's own port block (conftest.py);
the API's /metrics is served in-process by the real app. Turns flow through the whole pipeline
while both are scraped: the counters must move by at least the turns sent, the lag must be seen
above 0 and come back to 0, and `memstream status` must print every group with its lag.
"""
from __future__ import annotations

import time
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_for

N_TURNS = 40


def samples(text: str) -> list[tuple[str, dict, float]]:
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def total(rows, name: str, **labels) -> float:
    return sum(v for n, lab, v in rows if n == name and all(lab.get(k) == want for k, want in labels.items()))


# -- pure: labels stay bounded --------------------------------------------------------------------


# -- the real pipeline ----------------------------------------------------------------------------

def worker_ports(settings) -> dict[str, int]:
    from adapters.resilience import read_health
    out = {}
    for name, h in read_health(settings).items():
        port = (h.get("metrics") or {}).get("port")
        if port:
            out[name] = port
    return out


def scrape_workers(ports: dict[str, int]) -> dict[str, list]:
    return {name: samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
            for name, port in ports.items()}


@pytest.mark.stack
def test_metrics_move_and_lag_returns_to_zero(settings, pipeline, client, capsys):
    from fastapi.testclient import TestClient

    from memstream.app.api import create_app
    from memstream.app.cli import main as cli
    from adapters.lag import consumer_lag, lag_by_group
    from projections.registry import PROJECTORS
    from query.recall import RecallRequest, recall
    from query.store import ReadModels

    ns = settings.namespace
    # The workers write their metrics port into their health files once serving.
    # A health file can still name the port of an earlier pipeline of this namespace (another test
    # module's, stopped), so wait until every named port answers, re-reading the files each time.
    # Only the pipeline fixture's workers: a worker another test ran and stopped in this namespace
    # (test_llm_channel's llm-extractor) leaves a health file naming a port nothing serves.
    def serving():
        ports = {n: p for n, p in worker_ports(settings).items() if n in ("extractor", "memory", "projectors")}
        if len(ports) < 3:
            return None
        try:
            return ports, scrape_workers(ports)
        except httpx.HTTPError:
            return None
    ports, before = wait_for(serving, timeout=60, what="every worker to serve /metrics")
    # Each endpoint is this session's worker, not another pipeline's on the same machine.
    for name, rows in before.items():
        assert total(rows, "memstream_worker_info", namespace=ns, worker=name) == 1, name
    api = TestClient(create_app(settings.model_copy(update={"metrics_lag_cache_s": 0.0})))
    api_before = samples(api.get("/metrics").text)

    # A burst of turns, each a new fact for its own user (distinct text: the embedder really runs).
    tag = uuid.uuid4().hex[:6]
    users = [f"metrics-{tag}-{i}" for i in range(N_TURNS)]
    futures = [client.record_turn_nowait(u, "s", "user", f"I live in {chr(65 + i % 26)}{tag}ville{i}")
               for i, u in enumerate(users)]
    client.flush()
    assert all(f.result(timeout=30) for f in futures)

    # Lag while they flow: the live groups' committed offsets trail the log end for a while
    # (faust commits every 0.5 s at best, projectors after each transaction).
    live = [f"{ns}.extractor", f"{ns}.memory"] + [f"{ns}.projector.{p}" for p in PROJECTORS]
    seen_max = 0
    deadline = time.monotonic() + 45
    settled_at = None
    while time.monotonic() < deadline:
        rows = consumer_lag(settings, groups=live)
        lag = sum(r.lag for r in rows)
        seen_max = max(seen_max, lag)
        if lag == 0 and seen_max > 0:
            settled_at = time.monotonic()
            break
        time.sleep(0.2)
    assert seen_max > 0, "the lag was never seen above 0 while turns flowed"
    assert settled_at is not None, f"the lag did not return to 0: {lag_by_group(rows)}"

    # The counters moved by at least the number of turns (read after settling: all were processed).
    def moved(worker: str, name: str, **labels) -> float:
        return total(after[worker], name, **labels) - total(before[worker], name, **labels)
    def projected() -> bool:   # the projectors' counters are scraped, not pushed: poll them briefly
        now = scrape_workers({"projectors": ports["projectors"]})["projectors"]
        created = dict(consumer="projector.pgvector-items", type="memory.created")
        return (total(now, "memstream_events_consumed_total", **created)
                - total(before["projectors"], "memstream_events_consumed_total", **created)) >= N_TURNS
    wait_for(projected, timeout=15, what="the projectors' counters")
    after = scrape_workers(ports)
    assert moved("extractor", "memstream_events_consumed_total", consumer="extractor", topic="turns",
                 type="turn.recorded") >= N_TURNS
    assert moved("extractor", "memstream_events_produced_total", producer="extractor", topic="facts",
                 type="fact.extracted") >= N_TURNS
    assert moved("extractor", "memstream_embedder_calls_total", kind="passage", outcome="ok") >= 1
    assert moved("memory", "memstream_events_consumed_total", consumer="memory", topic="facts",
                 type="fact.extracted") >= N_TURNS
    assert moved("memory", "memstream_memory_decisions_total", type="memory.created") >= N_TURNS
    assert moved("memory", "memstream_events_produced_total", producer="memory", topic="memory") >= N_TURNS
    assert moved("projectors", "memstream_projector_applied_events_total", projector="pgvector-items") >= N_TURNS
    assert moved("projectors", "memstream_projector_batch_seconds_count", projector="pgvector-items") >= 1
    assert moved("projectors", "memstream_waiting", component="pgvector-items") == 0

    # The API process: its /metrics has every live group's lag (now 0) and a recall's latency.
    models = ReadModels(settings, pool_size=1)
    try:
        assert recall(models, RecallRequest(users[0], "where do I live", k=3))
    finally:
        models.close()
    api_after = samples(api.get("/metrics").text)
    assert total(api_after, "memstream_consumer_lag_up") == 1
    lagged = {lab["group"] for n, lab, _ in api_after if n == "memstream_consumer_group_lag"}
    assert {f"{ns}.extractor", f"{ns}.memory", f"{ns}.projector.pgvector-items"} <= lagged
    assert all(v == 0 for n, lab, v in api_after if n == "memstream_consumer_group_lag" and lab["group"] in live)
    assert (total(api_after, "memstream_query_seconds_count", query="recall")
            - total(api_before, "memstream_query_seconds_count", query="recall")) >= 1
    assert (total(api_after, "memstream_events_produced_total", producer="sdk", topic="turns", type="turn.recorded")
            - total(api_before, "memstream_events_produced_total", producer="sdk", topic="turns",
                    type="turn.recorded")) >= N_TURNS

    # No label anywhere carries a user id: /metrics is safe to serve without auth.
    for rows in [api_after, *after.values()]:
        assert not [lab for _, lab, _ in rows if any(tag in str(v) for v in lab.values())]

    # `memstream status`: worker health, then one line per group with its lag.
    capsys.readouterr()
    assert cli(["status"]) == 0
    out = capsys.readouterr().out
    assert "consumer lag" in out
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith("  ") and ln.split()}
    for group in ("extractor", "memory", "projector.pgvector-items"):
        assert group in lines, out
        assert lines[group][1] == "0", out
    assert "extractor" in out.split("consumer lag")[0]   # the health part lists the workers
    assert f"extractor :{ports['extractor']}" in out        # and where each serves /metrics
    print(f"\nMETRICS lag seen up to {seen_max} records; `memstream status`:\n{out}")
