"""Erasure tombstones: the pgvector, preference and graph projectors refuse events of a user they
saw erased — in the same batch as the erasure and in every later one — on the real Postgres and Neo4j."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from adapters import neo4j_auth
from projections.graph_projector import GraphProjector
from projections.postgres_projectors import MemoryItemsProjector, PreferencesProjector
from projections.queries import memories, preferences
from projections.runner import Item
from schemas.codec import make_envelope
from schemas.events import MemoryCreated, PreferenceSet, UserErased
from tests.helpers import unique_user

T0 = datetime(2026, 5, 1, tzinfo=timezone.utc)


def _created(settings, user: str, i: int) -> list:
    mid = str(uuid.uuid4())
    at = T0 + timedelta(minutes=i)
    return [make_envelope(MemoryCreated(memory_id=mid, fact_id=str(uuid.uuid4()), content=f"fact {i}", key=f"k{i}",
                                        value="v", category="preference", importance=0.5, embedding=[0.1] * settings.embed_dim),
                          user=user, time=at),
            make_envelope(PreferenceSet(key=f"k{i}", value="v", pref_version=1, memory_id=mid), user=user, time=at)]


def _graph_nodes(settings, user: str) -> int:
    with neo4j_auth.driver(settings) as driver, driver.session() as s:
        return s.run("MATCH (m:Memory {ns: $ns, user: $u}) RETURN count(m) AS n", ns=settings.namespace, u=user).single()["n"]


@pytest.mark.parametrize("projector_type", [MemoryItemsProjector, PreferencesProjector, GraphProjector])
def test_a_projector_refuses_events_of_a_user_it_saw_erased(settings, projector_type):
    victim, bystander = unique_user("tomb"), unique_user("tomb-keep")
    topic = f"test.tombstones.{uuid.uuid4().hex[:8]}"   # positions of its own: no live partition is touched
    projector = projector_type(settings)
    projector.setup()
    offset = 0

    def apply(envs) -> None:
        nonlocal offset
        items = [Item(topic, 0, offset + n, e) for n, e in enumerate(envs)]
        projector.apply(items, {(topic, 0): offset + len(envs)}, expected={(topic, 0): offset or None})
        offset += len(envs)

    def rows(user: str) -> int:
        if projector_type is MemoryItemsProjector:
            return len(memories(settings, user))
        if projector_type is PreferencesProjector:
            return len(preferences(settings, user))
        return _graph_nodes(settings, user)

    try:
        # 1. one batch: a row, the erasure, then a late event of the victim (read with a key some
        #    process still had cached) and one of a bystander
        apply(_created(settings, victim, 0) + [make_envelope(UserErased(), user=victim, time=T0 + timedelta(hours=1))]
              + _created(settings, victim, 1) + _created(settings, bystander, 2))
        assert rows(victim) == 0 and rows(bystander) == 1
        assert projector.refused_erased == 2
        # 2. a later batch: still refused (the tombstone is stored, not only remembered in this batch)
        apply(_created(settings, victim, 3) + _created(settings, bystander, 4))
        assert rows(victim) == 0 and rows(bystander) == 2
        assert projector.refused_erased == 4
        # 3. the erasure again (a replay, a re-run): idempotent
        apply([make_envelope(UserErased(), user=victim, time=T0 + timedelta(hours=2))])
        assert rows(victim) == 0 and rows(bystander) == 2
    finally:
        projector.close()
