"""The connections the use cases share, each opened on first use and all closed together.

One Backend per serving process (the HTTP API's lifespan, the MCP server) or per CLI command: the
read models' pools (query/store.py), the publishing client (adapters/sdk.py), the API key cache
(privacy/apikeys.py) and the log-end probe (bus.LogEnds). Opened lazily, so a CLI command that
only reads opens no producer and one that only publishes opens no pool; `open()` opens them all at
once for a server, which should fail at start-up rather than on its first request.
"""
from __future__ import annotations

import threading

from kernel.config import Settings


class Backend:
    def __init__(self, settings: Settings, pool_size: int = 8):
        self.settings = settings
        self._pool_size = pool_size
        self._opened: dict[str, object] = {}
        self._lock = threading.Lock()      # requests in worker threads may ask for one at the same time

    def _get(self, name: str, make):
        with self._lock:
            if name not in self._opened:
                self._opened[name] = make()
            return self._opened[name]

    @property
    def models(self):
        """The read models (Postgres pool, Neo4j driver, query embedder)."""
        from query.store import ReadModels
        return self._get("models", lambda: ReadModels(self.settings, pool_size=self._pool_size))

    @property
    def client(self):
        """The publishing client (the Kafka SDK: seals content with the user's key)."""
        from adapters.sdk import MemoryClient
        return self._get("client", lambda: MemoryClient(self.settings))

    @property
    def keys(self):
        """The API keys, verified through an in-process cache (MEMSTREAM_API_KEY_CACHE_S)."""
        from adapters.privacy.apikeys import ApiKeys
        return self._get("keys", lambda: ApiKeys(self.settings))

    @property
    def log_ends(self):
        """Where each partition of the log ends (asked of the broker only past the last end seen)."""
        from adapters.bus import LogEnds
        return self._get("log_ends", lambda: LogEnds(self.settings))

    def open(self) -> "Backend":
        self.models, self.client, self.keys   # noqa: B018 (opening them is the point)
        return self

    def close(self) -> None:
        """Close what was opened, the publisher first (its close delivers what is still queued,
        e.g. a CLI recall's memory.recalled)."""
        with self._lock:
            opened, self._opened = self._opened, {}
        for name in ("client", "models", "keys", "log_ends"):
            if name in opened:
                opened[name].close()

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
