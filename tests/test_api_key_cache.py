"""The API key cache under a flood of random keys (#28): unknown keys are cached apart and evicted
oldest first, so a flood never pushes out a verified key (which would send every legitimate caller
back to the database). Real key store (Postgres)."""
from __future__ import annotations

import secrets

from adapters.privacy import apikeys
from adapters.privacy.apikeys import ApiKeys
from tests.auth_helpers import make_key


def random_key() -> str:
    return f"msk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"


def test_a_flood_of_random_keys_never_evicts_a_verified_one(settings, monkeypatch):
    monkeypatch.setattr(apikeys, "MISSES_MAX", 50)
    legit = make_key(settings, scopes=["memory:read"])
    store = ApiKeys(settings, cache_s=60, role="owner")   # owner: this test also revokes
    try:
        principal = store.verify(legit)
        assert principal is not None and principal.scopes == frozenset({"memory:read"})
        flood = [random_key() for _ in range(200)]
        assert all(store.verify(k) is None for k in flood)
        # the verified key is still answered from memory; only the 50 newest unknown keys are held
        assert store.cached(legit) == (True, principal)
        assert len(store._misses) == 50
        assert store.cached(flood[-1]) == (True, None) and store.cached(flood[0]) == (False, None)
        # a revocation forgets both at once in this process
        store.revoke(principal.key_id)
        assert store.cached(legit) == (False, None) and store.verify(legit) is None
    finally:
        store.close()
