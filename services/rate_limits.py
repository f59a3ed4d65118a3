"""Request rate limits (issue 28 item 4): per API key, per tenant, and per client address for keys
the key cache does not know, each a token bucket in this process (like the wait and as-of quotas:
N API processes admit N times the rate).

Why three: a key's own limit keeps one agent from crowding out the others of its tenant; the
tenant's keeps a tenant with many keys from crowding out other tenants; the client limit bounds
what a flood of random keys costs (each unknown key is one key-store lookup, privacy/apikeys.py),
so known keys, served from the key cache, never queue behind it. One more request than a bucket
holds is refused at once (RateLimited, HTTP 429 with Retry-After; an MCP tool error saying when to
retry), never queued: a queue would hold the flooder's work in the server anyway.

The rule itself is pure (TokenBucket, with the clock passed in); the buckets live in bounded maps
(the least recently used go first: an idle bucket is a full one, so forgetting it changes nothing).
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from kernel.errors import RateLimited
from adapters.metrics import RATE_LIMITED

MAX_BUCKETS = 100_000      # per kind: a flood of new client addresses cannot grow memory without bound


@dataclass
class TokenBucket:
    """`rate` tokens a second up to `burst`; a request takes one."""
    rate: float
    burst: float
    tokens: float
    stamp: float

    def take(self, now: float) -> float:
        """0 when a token was taken; else the seconds until one will be there (nothing taken)."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class Buckets:
    """One bucket per name, at most MAX_BUCKETS of them."""

    def __init__(self, rate: float, burst: float, clock=time.monotonic, max_buckets: int = MAX_BUCKETS):
        self.rate, self.burst, self.clock, self.max = rate, max(1.0, burst), clock, max_buckets
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._lock = threading.Lock()     # the MCP server and the API's worker threads share them

    def take(self, name: str) -> float:
        if self.rate <= 0:
            return 0.0                     # this limit is off
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(name)
            if bucket is None:
                bucket = self._buckets[name] = TokenBucket(self.rate, self.burst, self.burst, now)
                while len(self._buckets) > self.max:
                    self._buckets.popitem(last=False)
            else:
                self._buckets.move_to_end(name)
            return bucket.take(now)


class RateLimits:
    """The three limits of one process, from its settings."""

    def __init__(self, settings, clock=time.monotonic):
        s = settings
        self.keys = Buckets(s.rate_limit_per_key, s.rate_limit_per_key * s.rate_limit_burst_s, clock)
        self.tenants = Buckets(s.rate_limit_per_tenant, s.rate_limit_per_tenant * s.rate_limit_burst_s, clock)
        self.lookups = Buckets(s.key_lookups_per_client, s.key_lookups_per_client * s.rate_limit_burst_s, clock)

    def admit(self, key_id: str, tenant: str) -> None:
        """A verified key's request: RateLimited when its key's or its tenant's bucket is empty. The
        tenant is charged only for requests its key admits, so a key over its own limit does not
        spend its tenant's."""
        wait = self.keys.take(key_id)
        if wait:
            raise _limited("key", "this API key", wait)
        wait = self.tenants.take(tenant)
        if wait:
            raise _limited("tenant", "this key's tenant", wait)

    def admit_lookup(self, client: str | None) -> None:
        """A key the cache does not know, from `client` (an address; None: the stdio MCP or a test
        client, one bucket for all of them)."""
        wait = self.lookups.take(client or "-")
        if wait:
            raise _limited("lookup", "unknown API keys from this client", wait)


def _limited(limit: str, whose: str, wait: float) -> RateLimited:
    RATE_LIMITED.labels(limit).inc()
    retry = max(1, math.ceil(wait))
    return RateLimited(f"too many requests for {whose}: retry after {retry} s", retry_after_s=retry)


_limits: dict[tuple, RateLimits] = {}


def limits_for(settings) -> RateLimits:
    """This process's limits for these settings (one set per distinct configuration: tests and
    benches change the settings of one process)."""
    k = (settings.rate_limit_per_key, settings.rate_limit_per_tenant, settings.key_lookups_per_client,
         settings.rate_limit_burst_s)
    found = _limits.get(k)
    if found is None:
        found = _limits[k] = RateLimits(settings)
    return found
