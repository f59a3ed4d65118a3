"""Crypto hygiene of the contract: fork-safe randomness, associated data over the clear envelope,
authenticated control events."""
from __future__ import annotations

import base64
import uuid
from datetime import datetime, timezone

import orjson
import pytest

from kernel.errors import InvalidEvent
from projections.queries import memories
from schemas.codec import CONTROL_TYPES, decode, encode, make_envelope
from schemas.events import LATEST, FactExtracted, MemoryCreated, TurnRecorded, UserErased
from tests.helpers import unique_user, wait_for
from tests.kafka_helpers import dead_letters
from tests.fast.test_sealing import _in_child


def test_forked_child_seals_with_fresh_nonces(keys):
    """The nonce actually used by encode() (the first 12 bytes of the sealed blob) differs between
    a parent and its forked child sealing under the same user key."""
    user = unique_user()
    keys.key_for_write(user)

    def nonces() -> list[str]:
        out = []
        for i in range(50):
            env = make_envelope(TurnRecorded(session="s", role="user", content=f"turn {i}"), user=user)
            ct = orjson.loads(encode(env, keys))["sealed"]["ct"]
            out.append(base64.b64decode(ct)[:12].hex())
        return out

    child = _in_child(nonces)
    parent = nonces()
    assert not set(child) & set(parent), "parent and child sealed with the same nonce under one key"


# -- seal v2: the associated data covers the clear envelope -----------------------------------

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)


def _sealed_fact(keys, user: str) -> dict:
    fact = FactExtracted(fact_id=str(uuid.uuid4()), source_turn=str(uuid.uuid4()), channel="rule", key="name",
                         value="张三", content="用户叫张三", category="identity", importance=0.9,
                         embedding=[0.1, 0.2], embed_model="test")
    env = make_envelope(fact, user=user, time=T0, causation=str(uuid.uuid4()), correlation="c1", producer="extractor/1")
    wire = orjson.loads(encode(env, keys))
    assert wire["sealed"]["v"] == 2
    return wire


TAMPERINGS = {
    "type": lambda w: w.update(type="memory.created"),
    "time": lambda w: w.update(time="2025-03-01T09:30:00Z"),
    "causation": lambda w: w.update(causation=str(uuid.uuid4())),
    "correlation": lambda w: w.update(correlation="c2"),
    "producer": lambda w: w.update(producer="operator/1"),
    "clear data": lambda w: w["data"].update(importance=0.1),
    "downgraded to seal v1": lambda w: w["sealed"].pop("v"),
}


@pytest.mark.parametrize("what", list(TAMPERINGS))
def test_altering_the_clear_envelope_after_sealing_fails_to_open(keys, what):
    wire = _sealed_fact(keys, unique_user())
    decode(orjson.dumps(wire), keys)   # untouched, it opens
    TAMPERINGS[what](wire)
    # made a memory decision, it is refused earlier still: it carries no decision MAC (#28)
    with pytest.raises(InvalidEvent, match="no proof of origin" if what == "type" else "fails authentication"):
        decode(orjson.dumps(wire), keys)


def test_the_same_instant_spelt_differently_still_opens(keys):
    """What is authenticated is the instant, not its spelling ('Z' and '+00:00' are one time)."""
    wire = _sealed_fact(keys, unique_user())
    wire["time"] = wire["time"].replace("Z", "+00:00")
    assert decode(orjson.dumps(wire), keys).time == T0


def test_a_tampered_record_is_dead_lettered_by_the_consumers(settings, client, keys, pipeline):
    """On the real stack: a turn whose role was flipped after sealing (extractor, a faust agent) and a
    memory.created whose time was moved (the projectors) both land in the dead-letter topic."""
    user = unique_user("tamper")
    turn = make_envelope(TurnRecorded(session="s1", role="assistant", content="I like tampering"), user=user)
    wire = orjson.loads(encode(turn, keys))
    wire["data"]["role"] = "user"    # would make an assistant turn extractable
    client._producer.send(settings.topic("turns"), user, orjson.dumps(wire)).result(10)
    created = MemoryCreated(memory_id=str(uuid.uuid4()), fact_id=str(uuid.uuid4()), content="c",
                            category="general", importance=0.5, embedding=[0.1])
    wire = orjson.loads(encode(make_envelope(created, user=user, time=T0), keys))
    wire["time"] = "2020-01-01T00:00:00Z"
    client._producer_for("memory").send(settings.topic("memory"), user, orjson.dumps(wire)).result(10)   # admin: publisher may not

    def mine():
        return [d for d in dead_letters(settings) if d["key"] == user]
    dls = wait_for(lambda: {d["source"]["topic"] for d in mine()} >= {settings.topic("turns"), settings.topic("memory")},
                   what="the tampered records' dead letters") and mine()
    # the turn fails its seal; the memory.created its decision MAC, which covers the time too and is
    # checked before the seal (#28)
    for d in dls:
        expected = "fails its decision MAC" if d["source"]["topic"] == settings.topic("memory") else "fails authentication"
        assert expected in d["reason"], (d["source"]["topic"], d["reason"])
    assert {d["consumer"] for d in dls} >= {"extractor"}
    assert not memories(settings, user)


# -- control events carry a MAC of the key store's control key --------------------------------

def test_control_types_seal_nothing_and_are_signed(keys):
    """The MAC covers the clear envelope only, which is all of a control event (nothing sealed):
    a user.erased must verify after the user's key is gone."""
    for t in CONTROL_TYPES:
        assert not LATEST[t].SEALED, t
    user = unique_user("ctl")
    wire = orjson.loads(encode(make_envelope(UserErased(), user=user), keys))
    assert wire["auth"]["kid"] == keys.control_key()[0]
    keys.erase(user)
    assert decode(orjson.dumps(wire), keys).type == "user.erased"


# -- erasure stays erased: no key is ever created again ---------------------------------------

def test_no_key_is_ever_created_for_an_erased_user(keys, settings):
    from adapters.bus import dead_letter_record
    from kernel.errors import UserErased as Erased
    from adapters.privacy.keystore import KeyStore
    from adapters.resilience import DROPPED, classify

    user = unique_user("gone")
    keys.key_for_write(user)
    other = KeyStore(settings)          # another cache, as in another process
    try:
        other.key_for_write(user)
        assert keys.erase(user) and keys.is_erased(user)
        # the other store's cached key is dropped by the erasure's notification, not by a timeout
        wait_for(lambda: user not in other._write, timeout=5, what="the other store's cache invalidated")
        for store in (keys, other):
            with pytest.raises(Erased):
                store.key_for_write(user)
            assert store.key_for_read(user, "any") is None
        assert not keys.has_key(user) and classify(Erased("x")) == DROPPED
        # a dead letter of an erased user keeps only the digest (it cannot be sealed for them any more)
        dl = orjson.loads(dead_letter_record(keys, reason="r", topic="t", partition=0, offset=1, consumer="c",
                                             key=user.encode(), raw=b"secret"))
        assert dl["sealed_raw"] is None and dl["raw_omitted"] == "the key's user was erased"
        assert not keys.erase(user)     # idempotent: no key, still erased
    finally:
        other.close()


def test_the_erasure_listener_ends_when_no_key_store_uses_it(settings):
    """A process's LISTEN thread follows its key stores: it ends once the last one is closed,
    instead of reconnecting forever to a database it no longer needs (a stopped test stack)."""
    import threading

    from adapters.privacy.keystore import KeyStore, _Listener
    store = KeyStore(settings)
    listener = _Listener._by_dsn[store._dsn]
    assert listener.thread.is_alive()
    others = [s for s in list(listener.stores) if s is not store]
    for other in others:            # key stores of other tests in this process
        listener.stores.discard(other)
    store.close()
    wait_for(lambda: not listener.thread.is_alive(), timeout=15, what="the listener thread to end")
    assert store._dsn not in _Listener._by_dsn or _Listener._by_dsn[store._dsn] is not listener
    fresh = KeyStore(settings)      # the next key store starts a listener of its own
    try:
        again = _Listener._by_dsn[store._dsn]
        assert again is not listener and again.thread.is_alive() and again.ready.is_set()
        assert "keystore-erasures" in {t.name for t in threading.enumerate()}
        for other in others:        # … which the other tests' key stores use again
            again.stores.add(other)
    finally:
        fresh.close()
