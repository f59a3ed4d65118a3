"""API keys for tests that call the HTTP API: an admin key per namespace, and keys made to measure."""
from __future__ import annotations

from kernel.config import Settings
from adapters.privacy.tenants import SCOPES

_ADMIN: dict[str, str] = {}


def make_key(settings: Settings, tenant: str = "default", scopes=SCOPES, user: str | None = None,
             name: str = "tests") -> str:
    from adapters.privacy.apikeys import ApiKeys
    store = ApiKeys(settings, role="owner")   # creating keys is the operator's (the API role only verifies)
    try:
        return store.create(tenant, scopes, user=user, name=name)[1]
    finally:
        store.close()


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def admin_headers(settings: Settings) -> dict:
    """Every scope, tenant default, in the settings' namespace (a test's own pipeline has its own)."""
    if settings.namespace not in _ADMIN:
        _ADMIN[settings.namespace] = make_key(settings, name="tests-admin")
    return bearer(_ADMIN[settings.namespace])
