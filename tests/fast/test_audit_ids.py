"""The audit index's reading of events without services (projections/audit_index.py): which memory
ids an event concerns. The index in Postgres: tests/test_audit_index.py."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from types import SimpleNamespace

from projections.audit_index import memory_ids_of
from schemas.envelope import Envelope
from schemas.events import (FactExtracted, MemoryCreated, MemoryLinked, MemorySuperseded, PreferenceSet,
                            TurnRecorded, UserErased)


NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


def envelope(type_: str, data) -> Envelope:
    return Envelope(str(uuid.uuid4()), type_, 1, "u", NOW, None, None, "test", data, 1)


def test_memory_ids_of_known_types():
    created = MemoryCreated(memory_id="m1", fact_id="f1", content="c", category="fact", importance=0.5, embedding=[0.0])
    assert memory_ids_of(envelope("memory.created", created)) == ["m1"]  # its fact_id is not a memory id
    fact = FactExtracted(fact_id="f1", source_turn="t", channel="rule", content="c", importance=0.5, embedding=[0.0],
                         embed_model="e5")
    assert memory_ids_of(envelope("fact.extracted", fact)) == ["f1"]
    assert memory_ids_of(envelope("preference.set", PreferenceSet(key="k", value="v", pref_version=1, memory_id="m2"))) == ["m2"]
    assert memory_ids_of(envelope("preference.set", PreferenceSet(key="k", value="v", pref_version=1))) == []
    linked = MemoryLinked(from_id="m1", to_id="m2", kind="SIMILAR_TO")
    assert memory_ids_of(envelope("memory.linked", linked)) == ["m1", "m2"]
    superseded = MemorySuperseded(memory_id="m1", superseded_by="m3", reason="slot")
    assert memory_ids_of(envelope("memory.superseded", superseded)) == ["m1", "m3"]
    assert memory_ids_of(envelope("turn.recorded", TurnRecorded(session="s", role="user", content="hi"))) == []
    assert memory_ids_of(envelope("user.erased", UserErased())) == []


def test_memory_ids_of_tolerates_erased_and_unknown_events():
    assert memory_ids_of(envelope("memory.created", None)) == []  # erased: data unreadable
    future = {"memory_ids": ["a", "b", "a"], "target_memory_id": "c", "memory_id": None, "weight": 0.3}
    assert memory_ids_of(envelope("memory.merged", future)) == ["a", "b", "c"]
    assert memory_ids_of(envelope("memory.odd", {"memory_ids": "not-a-list", "memory_id": {"x": 1}})) == []
    assert memory_ids_of(envelope("memory.linked", SimpleNamespace(from_id="x", to_id="y"))) == ["x", "y"]
    assert memory_ids_of(envelope("fact.extracted", {})) == []
