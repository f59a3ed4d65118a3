"""Decision provenance without services: the rules profile and its hash, on every decision the
memory core makes, and the contract of rules.adopted. The memory worker's start-up gate, on the
real stack: tests/test_rules_profile.py."""
from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

import numpy as np
import orjson

from kernel.config import Settings
from domain.memory_state import Rules
from domain.rules_profile import (COVERED_RULES_FIELDS, FROM_RULES, describe_differences, differences,
                                            profile_hash, profile_of, rules_hash)
from kernel.ids import uuid7
from schemas.codec import decode, encode, make_envelope
from schemas.events import FactExtracted, MemoryLinked, RulesAdopted
from streams.memory_core import MemoryCore, PlainStates
from tests.fast.inmemory import DECISION_KEY, KeyRing


T0 = datetime(2026, 1, 1, tzinfo=UTC)

HEX12 = re.compile(r"^[0-9a-f]{12}$")


def test_the_hash_is_short_stable_and_follows_only_the_effective_rules():
    base = Settings()
    h = rules_hash(Rules.from_settings(base))
    assert HEX12.match(h)
    assert rules_hash(Rules.from_settings(Settings())) == h                 # same settings, same hash
    # the same rules written differently: names in another order and case, an int TTL for a float one
    same = Settings(forget_keep_kinds="Policy, identity", ttl_general_days=int(base.ttl_general_days))
    assert rules_hash(Rules.from_settings(same)) == h
    assert rules_hash(Rules.from_settings(Settings(dedup_threshold=0.9))) != h
    # settings outside the rules (recall weights, the embedder's batch, the tick slicing) leave it alone
    other = Settings(recall_w_keyword=0.1, recall_graph_score=0.2, tick_slice_users=7, partitions=5)
    assert rules_hash(Rules.from_settings(other)) == h


def test_the_profile_names_settings_and_holds_their_values():
    s = Settings(dedup_threshold=0.93, forget_keep_tags="decision,constraint")
    profile = profile_of(Rules.from_settings(s))
    assert list(profile) == sorted(profile)
    assert set(profile) <= set(Settings.model_fields)
    for name, value in profile.items():
        if name.startswith("forget_keep_"):
            assert value == ",".join(sorted(x.strip().lower() for x in getattr(s, name).split(",")))
        else:
            assert value == getattr(s, name), name
    assert profile_hash(profile) == rules_hash(Rules.from_settings(s))


def test_every_rule_is_in_the_profile():
    """Every field of Rules is covered: changing any one changes the hash."""
    assert {f.name for f in dataclasses.fields(Rules)} == COVERED_RULES_FIELDS
    base = Rules.from_settings(Settings())
    h = rules_hash(base)
    for f in dataclasses.fields(Rules):
        value = getattr(base, f.name)
        if isinstance(value, tuple):
            changed = value + ((("general", 1.5),) if f.name == "ttl_by_kind" else ("zzz",))
        elif isinstance(value, int):
            changed = value + 1
        else:
            changed = value / 2
        assert rules_hash(dataclasses.replace(base, **{f.name: changed})) != h, f.name


def test_the_profile_is_exactly_what_the_rules_read_from_settings():
    """Rules.from_settings reads these settings and no others: a setting that changes decisions
    cannot be missing from the profile, and none is in it for nothing."""
    read: set[str] = set()
    real = Settings()

    class Spy:
        def __getattr__(self, name):
            read.add(name)
            return getattr(real, name)

    Rules.from_settings(Spy())
    assert read == set(FROM_RULES)


def test_differences_name_the_variables_with_old_and_new_values():
    old = profile_of(Rules.from_settings(Settings()))
    new = profile_of(Rules.from_settings(Settings(dedup_threshold=0.9, link_max=5)))
    diffs = differences(old, new)
    assert diffs == [("dedup_threshold", old["dedup_threshold"], 0.9), ("link_max", old["link_max"], 5)]
    text = describe_differences(diffs)
    assert f"MEMSTREAM_DEDUP_THRESHOLD {old['dedup_threshold']} → 0.9" in text and "MEMSTREAM_LINK_MAX" in text
    assert differences(old, old) == []


def test_every_decision_of_the_core_carries_the_hash_and_its_contract_reads_old_ones():
    rules = Rules(dedup_threshold=0.95, link_threshold=0.5, recent_window=5, consolidate_every=2)
    core = MemoryCore(Settings(partitions=3), rules, KeyRing(), {}, {}, PlainStates())
    outs = []
    for i, vec in enumerate(([1, 0, 0], [1, 0.01, 0], [0.9, 0.4, 0], [0, 1, 0])):
        v = (np.asarray(vec, dtype=np.float32) / np.linalg.norm(vec)).tolist()
        fid = uuid7()
        f = FactExtracted(fact_id=fid, source_turn=uuid7(), channel="rule", content=f"c{i}", importance=0.5,
                          embedding=v, embed_model="m", key="k" if i == 3 else None, value="v" if i == 3 else None)
        outs += list(core.on_fact(make_envelope(f, user="alice", time=T0, id=fid, producer="test")))
    types = {o.envelope.type for o in outs}
    assert {"memory.created", "memory.reinforced", "memory.linked", "preference.set"} <= types
    assert {o.envelope.data.rules_profile for o in outs} == {rules_hash(rules)}
    # on the wire it is clear data (the projections and the gate read it without a key) ...
    keys = KeyRing()
    raw = encode(outs[0].envelope, keys)
    assert orjson.loads(raw)["data"]["rules_profile"] == rules_hash(rules)
    # ... and a decision written before it existed (no such field at all, nor a decision MAC: both
    # came later) still reads, with none
    wire = orjson.loads(encode(make_envelope(MemoryLinked(from_id="a", to_id="b", kind="FOLLOWS"), user="bob",
                                             time=T0, producer="memory-processor/1"), keys))
    del wire["data"]["rules_profile"], wire["auth"]
    keys.decision_key = lambda: dataclasses.replace(DECISION_KEY, since_ms=2_000_000_000_000)   # type: ignore[method-assign]
    back = decode(orjson.dumps(wire), keys, appended_ms=1_700_000_000_000)
    assert back.data.rules_profile is None and back.data.to_id == "b"


def test_rules_adopted_roundtrips():
    profile = profile_of(Rules.from_settings(Settings()))
    data = RulesAdopted(profile=profile_hash(profile), settings=profile, previous=None)
    back = decode(encode(make_envelope(data, user="system:rules", time=T0, producer="memory-processor/1"),
                         KeyRing()), KeyRing())
    assert back.data.settings == profile and profile_hash(back.data.settings) == data.profile
