"""Request rate limits (services/rate_limits.py, #28 item 4): the token bucket with a clock of our
own, the three limits, and authenticate() applying them before any key-store lookup."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kernel.config import get_settings
from kernel.errors import NotAuthenticated, RateLimited, TooManyWaits
from adapters.privacy.tenants import Principal
from services import rate_limits
from services.access import authenticate
from services.rate_limits import Buckets, RateLimits, TokenBucket


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_lets_a_burst_through_then_the_rate_and_says_how_long_to_wait():
    b = TokenBucket(rate=10, burst=20, tokens=20, stamp=0.0)
    assert [b.take(0.0) for _ in range(20)] == [0.0] * 20
    wait = b.take(0.0)
    assert wait == pytest.approx(0.1), "one token comes back every 1/rate seconds"
    assert b.take(0.05) == pytest.approx(0.05), "a refused request takes nothing"
    assert b.take(0.1) == 0.0
    assert b.take(100.0) == 0.0 and b.tokens == pytest.approx(19), "an idle bucket fills to its burst, no more"


def test_buckets_are_per_name_bounded_and_off_at_rate_zero():
    clock = Clock()
    buckets = Buckets(rate=1, burst=2, clock=clock, max_buckets=3)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]
    assert buckets.take("b") == 0.0, "another name has its own bucket"
    for name in ("c", "d", "e"):
        buckets.take(name)
    assert len(buckets._buckets) == 3 and "a" not in buckets._buckets, "the least recently used go first"
    off = Buckets(rate=0, burst=0, clock=clock)
    assert all(off.take("a") == 0.0 for _ in range(10_000))


def _limits(**rates) -> tuple[RateLimits, Clock]:
    clock = Clock()
    settings = get_settings().model_copy(update={"rate_limit_per_key": 5, "rate_limit_per_tenant": 8,
                                                 "key_lookups_per_client": 3, "rate_limit_burst_s": 1, **rates})
    return RateLimits(settings, clock), clock


def test_a_key_over_its_rate_is_refused_and_does_not_spend_its_tenants_share():
    limits, clock = _limits()
    for _ in range(5):
        limits.admit("k1", "acme")
    with pytest.raises(RateLimited, match="this API key: retry after 1 s") as refused:
        limits.admit("k1", "acme")
    assert refused.value.retry_after_s == 1 and isinstance(refused.value, TooManyWaits), "a 429 like a full wait quota"
    for _ in range(3):
        limits.admit("k2", "acme")          # the tenant's 8: 5 of k1's, 3 of k2's (k1's refused one not counted)
    with pytest.raises(RateLimited, match="this key's tenant"):
        limits.admit("k2", "acme")
    limits.admit("k3", "globex")            # another tenant is not touched
    clock.now += 1.0
    limits.admit("k1", "acme")              # a second later, the rate is back


def test_unknown_keys_are_limited_per_client():
    limits, clock = _limits()
    for _ in range(3):
        limits.admit_lookup("10.0.0.1")
    with pytest.raises(RateLimited, match="unknown API keys from this client"):
        limits.admit_lookup("10.0.0.1")
    limits.admit_lookup("10.0.0.2")


class Keys:
    """A key store: one key known; counts the lookups that reach it."""

    def __init__(self, principal: Principal):
        self.principal, self.lookups = principal, 0

    def cached(self, token: str):
        return (True, self.principal) if token == "known" else (False, None)

    def verify(self, token: str):
        self.lookups += 1
        return None

    def was_valid(self, token: str) -> bool:
        return token == "expired"      # a key verified before whose cache entry ran out


def test_authenticate_refuses_a_flood_of_random_keys_before_the_key_store_and_still_serves_known_keys():
    rate_limits._limits.clear()
    settings = get_settings().model_copy(update={"key_lookups_per_client": 2, "rate_limit_burst_s": 5,
                                                 "rate_limit_per_key": 1000})
    keys = Keys(Principal("k1", "acme", frozenset({"memory:read"})))
    backend = SimpleNamespace(settings=settings, keys=keys)

    async def flood() -> list[str]:
        out = []
        for i in range(30):
            try:
                await authenticate(backend, f"msk_random{i}", client="10.0.0.9")
            except NotAuthenticated:
                out.append("401")
            except RateLimited:
                out.append("429")
        return out

    answers = asyncio.run(flood())
    assert answers[:10] == ["401"] * 10 and set(answers[10:]) == {"429"}, answers
    assert keys.lookups == 10, "only the burst reached the key store"
    known = asyncio.run(authenticate(backend, "known", "memory:read", client="10.0.0.9"))
    assert known.key_id == "k1", "a known key (from the cache) is not held back by the flood"
    with pytest.raises(NotAuthenticated):      # (this Keys finds no principal for it: the point is no 429)
        asyncio.run(authenticate(backend, "expired", "memory:read", client="10.0.0.9"))
    assert keys.lookups == 11, "a key in use whose cache entry expired is re-checked despite the flood"
    rate_limits._limits.clear()


def test_the_api_refuses_a_flood_of_unknown_keys_before_routing_and_charges_each_lookup_once():
    """memstream/app/early_refusal.py: the same decision as authenticate, taken from the headers
    before FastAPI routes the request; an admitted request is marked so authenticate does not
    charge it again (else only half the bucket's lookups would reach the key store)."""
    from memstream.app.early_refusal import CHARGED, EarlyRefusal

    rate_limits._limits.clear()
    settings = get_settings().model_copy(update={"key_lookups_per_client": 2, "rate_limit_burst_s": 5,
                                                 "rate_limit_per_key": 1000, "unknown_key_refusal_delay_s": 0})
    keys = Keys(Principal("k1", "acme", frozenset({"memory:read"})))
    backend = SimpleNamespace(settings=settings, keys=keys)
    reached = []

    async def app(scope, receive, send):       # what FastAPI would run: authenticate, then answer
        reached.append(scope["path"])
        token = dict(scope["headers"]).get(b"authorization", b"").decode().partition(" ")[2] or None
        try:
            await authenticate(backend, token, client=scope["client"][0],
                               lookup_charged=bool(scope.get("state", {}).get(CHARGED)))
            status = 200
        except NotAuthenticated:
            status = 401
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = EarlyRefusal(app, settings, lambda: keys)

    async def get(token: str | None, header: bytes = b"authorization") -> tuple[int, dict]:
        headers = [] if token is None else [(header, (f"Bearer {token}" if header == b"authorization" else token).encode())]
        scope = {"type": "http", "path": f"/p{len(reached)}", "headers": headers, "client": ("10.0.0.9", 1), "state": {}}
        sent = []

        async def send(message):
            sent.append(message)

        await gate(scope, None, send)
        return sent[0]["status"], dict(sent[0]["headers"])

    async def flood():
        return [await get(f"msk_random{i}") for i in range(30)]

    answers = asyncio.run(flood())
    assert [s for s, _ in answers[:10]] == [401] * 10, answers
    assert {s for s, _ in answers[10:]} == {429} and all(h[b"retry-after"] for _, h in answers[10:])
    assert keys.lookups == 10 and len(reached) == 10, "the refused 20 never reached the app"
    assert asyncio.run(get("known"))[0] == 200, "a known key passes the flood"
    assert asyncio.run(get("msk_other", b"x-api-key"))[0] == 429, "X-API-Key is the same key, refused alike"
    assert asyncio.run(get(None))[0] == 401 and reached[-1], "no key: the app answers it"
    rate_limits._limits.clear()


def test_a_refused_unknown_key_is_answered_after_the_delay_and_no_more_are_held_than_the_cap(monkeypatch):
    """The tarpit (early_refusal.py): a refusal waits MEMSTREAM_UNKNOWN_KEY_REFUSAL_DELAY_S, so a
    flooder that waits for answers is slowed to its connections / delay; past MAX_HELD held at once
    the rest are answered at once; a known key is never held."""
    import time

    from memstream.app import early_refusal
    from memstream.app.early_refusal import EarlyRefusal

    rate_limits._limits.clear()
    settings = get_settings().model_copy(update={"key_lookups_per_client": 1, "rate_limit_burst_s": 1,
                                                 "rate_limit_per_key": 1000, "unknown_key_refusal_delay_s": 0.3})
    keys = Keys(Principal("k1", "acme", frozenset({"memory:read"})))

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = EarlyRefusal(app, settings, lambda: keys)
    monkeypatch.setattr(early_refusal, "MAX_HELD", 3)

    async def get(token: str) -> tuple[int, float]:
        scope = {"type": "http", "path": "/", "headers": [(b"authorization", f"Bearer {token}".encode())],
                 "client": ("10.0.0.7", 1), "state": {}}
        sent, t0 = [], time.monotonic()

        async def send(message):
            sent.append(message)
        await gate(scope, None, send)
        return sent[0]["status"], time.monotonic() - t0

    async def scenario():
        await get("msk_first")                       # takes the one lookup
        burst = await asyncio.gather(*(get(f"msk_r{i}") for i in range(5)))
        known = await get("known")
        return burst, known

    burst, known = asyncio.run(scenario())
    assert {s for s, _ in burst} == {429}
    held = sorted(t for _, t in burst)
    assert all(t >= 0.29 for t in held[-3:]), held          # three held for the delay …
    assert all(t < 0.1 for t in held[:2]), held             # … the two past the cap answered at once
    assert known[0] == 200 and known[1] < 0.1, "a known key is never held"
    assert gate.held == 0
    rate_limits._limits.clear()
