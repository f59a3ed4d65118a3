"""The memory processor's stored state: binary (UserState.to_bytes, seal_bytes), and states stored
before that (JSON, seal_blob) still read the same."""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import orjson

from domain.memory_state import STATE_BYTES, UserState
from schemas.codec import SEALED_BYTES, kept_bytes, open_bytes, seal_blob, seal_bytes
from streams.memory_core import SealedStates
from tests.fast.test_memory_core import T0, StaticKeys, fact, sealed_core, unit


def user_with_history(keys=None):
    core = sealed_core(keys)
    rng = np.random.default_rng(3)
    for i in range(12):
        v = rng.standard_normal(8)
        list(core.on_fact(fact("ana", unit(*v), T0 + timedelta(hours=i), content=f"Ana fact {i}",
                               key="location" if i % 4 == 0 else None, value=f"city {i}" if i % 4 == 0 else None)))
    return core


def test_a_state_round_trips_through_bytes_with_its_vectors_exact():
    core = user_with_history()
    state = core.load_state("ana")
    assert state.recent, "the user has a window"
    data = state.to_bytes()
    assert data.startswith(STATE_BYTES)
    back = UserState.from_bytes(data)
    assert back == state
    for a, b in zip(back.recent, state.recent, strict=True):
        assert a.vec.dtype == np.float32 and np.array_equal(a.vec, b.vec)


def test_a_state_stored_as_json_before_reads_the_same():
    """Values written by the processor before the binary format: orjson of to_dict, sealed as JSON."""
    keys = StaticKeys()
    core = user_with_history(keys)
    state = core.load_state("ana")
    old_value = kept_bytes(orjson.dumps(seal_blob(keys, "ana", "state:ana", orjson.dumps(state.to_dict()))))
    assert old_value.startswith(b"{")
    core.states[b"ana"] = old_value
    assert core.load_state("ana") == state
    # and the core goes on deciding from it, writing the new format
    list(core.on_fact(fact("ana", unit(1, 2, 3, 4, 5, 6, 7, 8), T0 + timedelta(days=1), content="Ana new fact")))
    assert core.states[b"ana"].startswith(SEALED_BYTES)


def test_the_binary_state_is_sealed_and_smaller():
    keys = StaticKeys()
    core = user_with_history(keys)
    state = core.load_state("ana")
    new = core.states[b"ana"]
    old = kept_bytes(orjson.dumps(seal_blob(keys, "ana", "state:ana", orjson.dumps(state.to_dict()))))
    assert len(new) < 0.85 * len(old)
    for plain in (b"Ana fact", b"city 4", state.recent[0].vec.astype("<f4").tobytes()[:16]):
        assert plain not in new
    # bound to its label (a state moved to another key does not open) and to the user's key
    assert open_bytes(keys, "ana", "state:ana", new) is not None
    try:
        open_bytes(keys, "ana", "state:bob", new)
        raise AssertionError("a sealed state opened under another label")
    except Exception as exc:   # cryptography's InvalidTag
        assert type(exc).__name__ == "InvalidTag"


def test_an_erased_users_binary_state_reads_as_gone():
    keys = StaticKeys()
    sealed = seal_bytes(keys, "ana", "state:ana", b"x")
    del keys.keys["ana"]
    assert open_bytes(keys, "ana", "state:ana", sealed) is None
    assert SealedStates(keys).load("ana", "state:ana", sealed) is None
