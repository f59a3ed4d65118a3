"""The services layer's own rules, without services: who may reach what (access.py) and which
read-your-writes tokens are refused before any wait (read_your_writes.py)."""
from __future__ import annotations

import asyncio

import pytest

from kernel.config import get_settings
from kernel.errors import InvalidInput, MissingScope
from adapters.privacy.tenants import NotYours, Principal
from services.access import OPERATOR, owned, require
from services.read_your_writes import wait_for

BOUND = Principal("k1", "acme", frozenset({"memory:read"}), user="alice")
TENANT = Principal("k2", "acme", frozenset({"memory:read", "admin"}))


def test_a_key_reaches_its_tenant_and_its_bound_user_only():
    assert TENANT.internal("bob") == "acme/bob"
    assert owned(TENANT, "acme/bob") == "acme/bob"
    with pytest.raises(NotYours):
        BOUND.internal("bob")
    for outside in ("bob", "other/bob", None):    # the default tenant's, another tenant's, nobody's
        with pytest.raises(NotYours):
            owned(TENANT, outside)
    with pytest.raises(NotYours):
        owned(BOUND, "acme/bob")


def test_the_operator_names_internal_ids_as_they_are_and_has_every_scope():
    assert OPERATOR.internal("acme/bob") == "acme/bob"
    assert owned(OPERATOR, "acme/bob") == "acme/bob"
    require(OPERATOR, "admin", "audit:content")


def test_a_missing_scope_is_named():
    with pytest.raises(MissingScope, match="lacks the scope admin") as refused:
        require(BOUND, "memory:read", "admin")
    assert refused.value.scope == "admin"


class NoStores:
    """A backend whose stores are never to be opened: the refusals below come before any wait."""

    def __init__(self):
        self.settings = get_settings()

    def __getattr__(self, name):
        raise AssertionError(f"opened {name}: a token was not refused before the wait")


def test_no_token_waits_for_nothing_and_a_foreign_one_is_refused_at_once():
    backend = NoStores()
    asyncio.run(wait_for(backend, None, ("pgvector-items",), 5.0))
    for token in ("elsewhere.turns:0:1", f"{backend.settings.topic('turns')}:{backend.settings.partitions}:1"):
        with pytest.raises(InvalidInput, match="is not a position in this namespace's log"):
            asyncio.run(wait_for(backend, token, ("pgvector-items",), 5.0))


def test_a_tenant_gets_its_share_of_waiting_reads_and_the_next_is_refused_at_once(monkeypatch):
    """MEMSTREAM_MAX_WAITS_PER_TENANT (#28): one tenant's hanging waits cannot take every wait of a
    process; one more of that tenant is a TooManyWaits (HTTP 429) at once, another tenant waits."""
    from types import SimpleNamespace

    from kernel.errors import TooManyWaits
    from services import read_your_writes

    release = None
    entered: list[str] = []

    async def hangs(backend, after, reads, wait_s):
        entered.append(after)
        await release.wait()

    monkeypatch.setattr(read_your_writes, "_wait", hangs)
    backend = SimpleNamespace(settings=get_settings().model_copy(update={"max_waits_per_tenant": 2}))
    acme, globex = (Principal(k, t, frozenset({"memory:read"})) for k, t in (("k1", "acme"), ("k2", "globex")))

    async def scenario():
        nonlocal release
        release = asyncio.Event()
        held = [asyncio.create_task(wait_for(backend, f"t:0:{i}", ("pgvector-items",), 5.0, acme)) for i in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(TooManyWaits, match="2 at once per tenant"):
            await wait_for(backend, "t:0:9", ("pgvector-items",), 5.0, acme)
        other = asyncio.create_task(wait_for(backend, "t:0:5", ("pgvector-items",), 5.0, globex))
        await asyncio.sleep(0)
        assert sorted(entered) == ["t:0:0", "t:0:1", "t:0:5"]
        release.set()
        await asyncio.gather(*held, other)
        # the share is given back: acme waits again
        await wait_for(backend, "t:0:7", ("pgvector-items",), 5.0, acme)
        assert read_your_writes._waiting == {}

    asyncio.run(scenario())


def test_as_of_replays_beyond_the_budget_are_refused_at_once_and_the_budget_comes_back():
    """MEMSTREAM_MAX_AS_OF_REPLAYS (#28): a replay-based as-of read costs a schema and the user's
    history; one more than the budget is a TooManyAsOf (HTTP 429) at once, never queued."""
    import threading

    from kernel.errors import TooManyAsOf
    from services import as_of

    settings = get_settings().model_copy(update={"max_as_of_replays": 1})
    gate = threading.Event()

    async def scenario():
        first = asyncio.create_task(as_of.replayed(settings, gate.wait, 5))
        await asyncio.sleep(0.05)
        with pytest.raises(TooManyAsOf, match="1 per process"):
            await as_of.replayed(settings, lambda: "never")
        gate.set()
        assert await first is True
        assert await as_of.replayed(settings, lambda: "again") == "again"

    asyncio.run(scenario())
