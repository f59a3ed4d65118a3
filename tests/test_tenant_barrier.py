"""The tenant barrier inside Postgres (#28 item 3): row-level security on every read-model table
with a user_id, and each API request's reads bound to its key's tenant, so a query that forgets
its tenant filter still returns only that tenant's rows. Real Postgres, real roles."""
from __future__ import annotations

import asyncio
import contextvars
import uuid

import psycopg
import pytest
from psycopg import sql

from adapters.privacy import tenant_barrier
from adapters.privacy.apikeys import ApiKeys
from services.access import authenticate
from projections import pg
from projections.registry import PROJECTORS, build_projector
from query.store import ReadModels
from tests.auth_helpers import make_key

pytestmark = pytest.mark.stack


@pytest.fixture()
def spaced(settings):
    """A namespace of its own holding one preference of a user of each of three tenants."""
    ns = settings.model_copy(update={"namespace": f"{settings.namespace}_rls{uuid.uuid4().hex[:6]}"})
    pg.ensure_schema(ns)
    for name in PROJECTORS:          # every projector's tables, as a running stack has them
        p = build_projector(name, ns)
        p.setup()
        p.close()
    tag = uuid.uuid4().hex[:6]
    users = {"default": f"alice{tag}", "acme": f"acme/bob{tag}", "globex": f"globex/carol{tag}"}
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:      # the owner: no barrier for it
        for u in users.values():
            conn.execute(sql.SQL("INSERT INTO {}.preferences (user_id, key, value, version, event_id, updated_at) "
                                 "VALUES (%s, 'city', 'x', 1, %s, now())").format(sql.Identifier(ns.namespace)),
                         (u, str(uuid.uuid4())))
    yield ns, users
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(ns.namespace)))


def _unfiltered(models: ReadModels) -> set[str]:
    """Every preference row the API role's connection sees: the query names no user or tenant."""
    with models.pool.connection() as conn:
        return {r[0] for r in conn.execute(models.q("SELECT user_id FROM {s}.preferences")).fetchall()}


def _as(tenant: str | None, fn, *args):
    ctx = contextvars.copy_context()

    def run():
        if tenant is not None:
            tenant_barrier.bind(tenant)
        return fn(*args)
    return ctx.run(run)


def test_a_query_without_a_tenant_filter_sees_only_the_bound_tenant(spaced):
    ns, users = spaced
    models = ReadModels(ns, pool_size=1)     # one connection: each checkout reuses the last one's
    try:
        assert _as("acme", _unfiltered, models) == {users["acme"]}
        assert _as("globex", _unfiltered, models) == {users["globex"]}
        assert _as("default", _unfiltered, models) == {users["default"]}
        assert _as("nobody", _unfiltered, models) == set()
        # unbound (the operator's CLI, no API key): every tenant, by design; and a binding left on
        # the pooled connection by the last request never survives into the next checkout
        assert _as(None, _unfiltered, models) == set(users.values())
        assert _as("acme", _unfiltered, models) == {users["acme"]}
        assert _as(None, _unfiltered, models) == set(users.values())
    finally:
        models.close()


def test_every_user_keyed_table_is_behind_the_barrier(spaced):
    ns, _ = spaced
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relrowsecurity, array(SELECT polname FROM pg_policy p WHERE p.polrelid = c.oid ORDER BY 1) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid "
            "AND a.attname = 'user_id' WHERE n.nspname = %s AND c.relkind = 'r'", (ns.namespace,)).fetchall()
    tables = {r[0] for r in rows}
    assert {"memory_items", "preferences", "preference_history", "memory_links", "session_messages",
            "task_buffer_steps", "audit_events", "entities", "relations"} <= tables
    unguarded = [r[0] for r in rows if not r[1] or sorted(r[2]) != sorted([pg.BARRIER_POLICY, pg.WRITERS_POLICY])]
    assert not unguarded, unguarded


def test_the_projectors_role_still_reads_and_writes_every_tenant(spaced):
    ns, users = spaced
    with pg.connect(ns, autocommit=True) as conn:        # the projectors' role, never bound
        s = sql.Identifier(ns.namespace)
        assert {r[0] for r in conn.execute(sql.SQL("SELECT user_id FROM {}.preferences").format(s))} == set(users.values())
        conn.execute(sql.SQL("UPDATE {}.preferences SET value = 'y' WHERE user_id = %s").format(s), (users["globex"],))
        assert conn.execute(sql.SQL("SELECT value FROM {}.preferences WHERE user_id = %s").format(s),
                            (users["globex"],)).fetchone()[0] == "y"


def test_an_api_keys_request_binds_its_tenant_for_the_threads_it_reads_in(spaced):
    ns, users = spaced
    key = make_key(ns, "acme", ["memory:read"], name="rls")

    class Backend:
        settings = ns
        keys = ApiKeys(ns, cache_s=60)
    models = ReadModels(ns, pool_size=1)

    async def request():
        await authenticate(Backend(), key, "memory:read")
        # what a service does: its reads run in a worker thread, which inherits the binding
        return await asyncio.to_thread(_unfiltered, models)
    try:
        assert asyncio.run(request()) == {users["acme"]}
        assert tenant_barrier.bound() == tenant_barrier.UNBOUND     # the request's binding stayed in it
    finally:
        models.close()
        Backend.keys.close()
