"""Who is calling, and what they may do and reach: the one check behind the API, MCP and console.

A caller is a Principal (a verified API key: its tenant, scopes and perhaps the one end user it is
bound to; adapters/privacy/tenants.py) or the OPERATOR: whoever runs the CLI holds the stack's
credentials already, so it has every scope and names internal user ids as they are (a tenant's
user as `<tenant>/<user>`). Use cases take either and ask the same three questions of it:
`internal(user)` (NotYours for a user outside its reach), `owns(internal_id)` and `scopes`.
"""
from __future__ import annotations

import asyncio

from kernel.errors import MissingScope, NotAuthenticated
from adapters.privacy import tenant_barrier
from services import rate_limits
from adapters.privacy.tenants import DEFAULT_TENANT, SCOPES, NotYours, Principal

NO_KEY = "no API key: send `Authorization: Bearer <key>` or `X-API-Key: <key>`"
UNKNOWN_KEY = "unknown or revoked API key"


class Operator:
    """The CLI's caller: every scope, every user, ids as they are inside memstream."""
    key_id = "operator"
    tenant = DEFAULT_TENANT
    scopes = frozenset(SCOPES)
    user = None

    def internal(self, user: str) -> str:
        return user

    def owns(self, internal: str) -> bool:
        return True

    def external(self, internal: str) -> str:
        return internal


OPERATOR = Operator()
Caller = Principal | Operator


async def authenticate(backend, token: str | None, *scopes: str, client: str | None = None,
                       limit: bool = True, lookup_charged: bool = False) -> Principal:
    """The key's principal when it holds every one of `scopes` and is within its rate limits
    (services/rate_limits.py). The key cache answers without I/O in the common case; a key it has
    not seen is verified against the key store in a worker thread, within `client`'s (its address)
    limit of such lookups, so a flood of random keys is refused before it reaches the key store.
    `limit=False`: this request was charged already (the MCP server's HTTP key gate);
    `lookup_charged`: its unknown-key lookup was (the API's early refusal, memstream/app/early_refusal.py)."""
    if not token:
        raise NotAuthenticated(NO_KEY)
    keys = backend.keys
    if limit and not lookup_charged:
        charge_unknown_key(keys, backend.settings, token, client)
    known, p = keys.cached(token)
    if not known:
        p = await asyncio.to_thread(keys.verify, token)
    if p is None:
        raise NotAuthenticated(UNKNOWN_KEY)
    require(p, *scopes)
    if limit:
        rate_limits.limits_for(backend.settings).admit(p.key_id, p.tenant)
    # the request's reads from here on see only this tenant's rows, whatever a query's WHERE says
    tenant_barrier.bind(p.tenant)
    return p


def charge_unknown_key(keys, settings, token: str, client: str | None) -> bool:
    """A key the cache does not know and this process never verified (a key in use is re-checked,
    never held back) takes one of `client`'s lookups: RateLimited when none is left. True when
    charged. authenticate and the API's early refusal (memstream/app/early_refusal.py) both ask here."""
    known, _ = keys.cached(token)
    if known or keys.was_valid(token):
        return False
    rate_limits.limits_for(settings).admit_lookup(client)
    return True


def require(caller: Caller, *scopes: str) -> None:
    missing = [s for s in scopes if s not in caller.scopes]
    if missing:
        raise MissingScope(missing[0])


def owned(caller: Caller, owner: str | None, what: str = "no such memory") -> str:
    """`owner` (an internal user id) when the caller may reach it; another tenant's (or another
    user's than a bound key's) is as absent as none: NotYours, answered as not found."""
    if owner is None or not caller.owns(owner):
        raise NotYours(what)
    return owner
