"""Memory decisions, in-process and deterministic (no I/O)."""
from memstream.domain.memory_rules import UserState, decide
from memstream.ids import derived_id, uuid7
from schemas.events import FactExtracted, MemoryCreated, PreferenceSet


def fact(key, value, content="c"):
    fid = uuid7()
    return fid, FactExtracted(fact_id=fid, source_turn=uuid7(), channel="rule", key=key, value=value,
                              content=content, category="identity", importance=0.8,
                              embedding=[0.1] * 4, embed_model="m")


def run(state, fid, f):
    return decide(state, f, lambda tag: derived_id(fid, tag))


def test_first_fact_creates_memory_and_preference_v1():
    fid, f = fact("location", "北京")
    state, ds = run(UserState(), fid, f)
    assert [type(d.data) for d in ds] == [MemoryCreated, PreferenceSet]
    assert ds[1].data.pref_version == 1 and ds[1].data.supersedes is None
    assert state.prefs["location"].value == "北京"


def test_same_value_again_sets_no_new_version():
    state = UserState()
    fid, f = fact("location", "北京")
    state, _ = run(state, fid, f)
    fid2, f2 = fact("location", "北京")
    state, ds = run(state, fid2, f2)
    assert [type(d.data) for d in ds] == [MemoryCreated]
    assert state.prefs["location"].version == 1


def test_new_value_supersedes_the_old_one_which_stays_named():
    state = UserState()
    fid, f = fact("location", "北京")
    state, ds1 = run(state, fid, f)
    first_event_id = derived_id(fid, ds1[1].tag)
    fid2, f2 = fact("location", "Shanghai")
    state, ds2 = run(state, fid2, f2)
    pref = ds2[1].data
    assert (pref.value, pref.pref_version, pref.supersedes) == ("Shanghai", 2, first_event_id)


def test_redelivered_fact_yields_identical_decisions():
    state = UserState()
    fid, f = fact("name", "Alice")
    state, first = run(state, fid, f)
    state, again = run(state, fid, f)
    assert [(d.tag, d.data) for d in again] == [(d.tag, d.data) for d in first]
    assert state.prefs["name"].version == 1


def test_state_survives_serialisation():
    state = UserState()
    fid, f = fact("name", "Alice")
    state, _ = run(state, fid, f)
    assert UserState.from_dict(state.to_dict()) == state
