"""The tenant barrier inside Postgres (#28 item 3): row-level security on every read-model table
that holds a `user_id`, and the binding of each serving request's database reads to its caller's
tenant.

Isolation between tenants rests first on every query's `WHERE user_id = …` (the internal user id
carries the tenant, adapters/privacy/tenants.py). The barrier is the second wall: when a verified
API key's request reads (services/access.authenticate binds its tenant in a context variable, which
worker threads inherit), each connection it takes is set to that tenant (`memstream.tenant`), and
the policy lets the API role see only that tenant's rows, so a query that forgets its filter still
cannot cross tenants.

What it is not: a wall against someone holding the API role's password, who can set the setting
themselves. Unbound reads (the operator's CLI, the demo, benches: no API key, every tenant by
design) set it empty, which the policy reads as "not bound" and lets through; the projectors' role
has a policy of its own that lets it write everything; the owner bypasses row-level security.
"""
from __future__ import annotations

from contextvars import ContextVar
from weakref import WeakKeyDictionary

SETTING = "memstream.tenant"
UNBOUND = ""

_bound: ContextVar[str] = ContextVar("memstream_bound_tenant", default=UNBOUND)


def bind(tenant: str) -> None:
    """Bind this request's (this task's, and the threads it starts') reads to `tenant`."""
    _bound.set(tenant)


def bound() -> str:
    return _bound.get()


# What each autocommit connection was last set to (a new one holds nothing: unbound), so taking a
# pooled connection costs a round trip only when the binding changes, not on every recall.
_held: WeakKeyDictionary = WeakKeyDictionary()


def apply(conn) -> None:
    """Set a connection to the current binding every time it is taken: pooled connections are
    shared by requests of every tenant, so a value left by the last one must never survive. Only
    autocommit connections are remembered: elsewhere a rollback could undo the setting unseen."""
    want = bound()
    if conn.autocommit and _held.get(conn, UNBOUND) == want:
        return
    conn.execute("SELECT set_config(%s, %s, false)", (SETTING, want))
    if conn.autocommit:
        _held[conn] = want


# Row by row, in SQL, what tenants.split_user reads: a tenant's user id starts with "<tenant>/"; the
# default tenant's have no "/" or one after something that is no other tenant's name. Written so
# that the common cases cost a string prefix test per row (a CASE with a regular expression on
# every row made recall over 10,000 rows of one user 1.8x slower; bench/tenant_barrier.py).
_T = f"current_setting('{SETTING}', true)"
POLICY_USING = (f"coalesce({_T}, '') = '' "
                f"OR ({_T} <> 'default' AND starts_with(user_id, {_T} || '/')) "
                f"OR ({_T} = 'default' AND (strpos(user_id, '/') = 0 OR split_part(user_id, '/', 1) = 'default' "
                f"OR split_part(user_id, '/', 1) !~ '^[a-z0-9][a-z0-9-]{{0,39}}$'))")
