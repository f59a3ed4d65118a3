"""Operators' key management: the HTTP API's keys (adapters/privacy/apikeys.py) and the key
store's master key (adapters/privacy/keystore.py). Whoever runs these holds the stack's database
credentials, i.e. is already an operator, so no API key is asked for; creating, revoking and
re-wrapping are the owner role's rights alone. Plain functions: nothing here waits on the log.
"""
from __future__ import annotations

from contextlib import contextmanager

from kernel.errors import MemstreamError


@contextmanager
def _api_keys(settings):
    from adapters.privacy.apikeys import ApiKeys
    keys = ApiKeys(settings, role="owner")
    try:
        yield keys
    finally:
        keys.close()


def create_api_key(settings, tenant: str, scopes: list[str], *, user: str | None = None,
                   name: str = "") -> tuple[dict, str]:
    """(the key's record, the key itself): shown once, stored only hashed."""
    with _api_keys(settings) as keys:
        return keys.create(tenant, scopes, user=user, name=name)


def list_api_keys(settings, tenant: str | None = None) -> list[dict]:
    with _api_keys(settings) as keys:
        return keys.list(tenant)


def revoke_api_key(settings, key_id: str) -> None:
    """API processes refuse it within MEMSTREAM_API_KEY_CACHE_S (their caches)."""
    with _api_keys(settings) as keys:
        if not keys.revoke(key_id):
            raise MemstreamError(f"no active API key {key_id}")


def rotate_master_key(settings) -> int:
    """Re-wrap every data key with the current master key, in place; returns how many."""
    from adapters.privacy.keystore import KeyStore
    keys = KeyStore(settings, role="owner")
    try:
        return keys.rotate_master()
    finally:
        keys.close()
