"""Memory decisions, in-process and deterministic (no I/O): dedup, links, supersession, replay."""
import numpy as np

from domain.memory_rules import Rules, UserState, decide
from kernel.ids import derived_id, uuid7
from schemas.events import FactExtracted, MemoryLinked, MemoryReinforced, MemorySuperseded, PreferenceSet

RULES = Rules(dedup_threshold=0.95, link_threshold=0.80, recent_window=3, link_max=3)


def unit(*xs):
    v = np.asarray(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


def fact(vec, key=None, value=None, category="identity", importance=0.5, tags=(), slot=None, content="c"):
    fid = uuid7()
    return FactExtracted(fact_id=fid, source_turn=uuid7(), channel="rule", key=key, value=value, content=content,
                         category=category, importance=importance, embedding=vec, embed_model="m",
                         tags=list(tags), slot_hint=slot)


def run(state, f):
    return decide(state, f, RULES, lambda tag: derived_id(f.fact_id, tag))


def kinds(ds):
    return [type(d.data).__name__ for d in ds]


def test_first_fact_creates_memory_and_preference_v1():
    state, ds = run(UserState(), fact(unit(1, 0, 0), "location", "北京"))
    assert kinds(ds) == ["MemoryCreated", "PreferenceSet"]
    assert ds[1].data.pref_version == 1 and ds[1].data.supersedes is None


def test_duplicate_reinforces_with_absolute_values():
    state, _ = run(UserState(), fact(unit(1, 0, 0), category="general", importance=0.4, tags=["a"]))
    state, ds = run(state, fact(unit(1, 0.01, 0), category="preference", importance=0.9, tags=["b"], slot="drink"))
    (d,) = ds
    r = d.data
    assert isinstance(r, MemoryReinforced)
    assert (r.importance, r.category, r.slot_hint, r.tags, r.access_count) == (0.9, "preference", "drink", ["a", "b"], 1)
    _, ds = run(state, fact(unit(1, 0.02, 0), category="general", importance=0.1, slot="other"))
    r2 = ds[0].data
    assert (r2.importance, r2.category, r2.slot_hint, r2.access_count) == (0.9, "preference", "drink", 2)


def test_similar_vectors_with_different_slot_values_are_not_duplicates():
    state, _ = run(UserState(), fact(unit(1, 0, 0), "likes:tea", "true"))
    _, ds = run(state, fact(unit(1, 0.01, 0), "likes:coffee", "true"))
    assert kinds(ds)[0] == "MemoryCreated"


def test_links_follows_and_similar_to():
    state, a = run(UserState(), fact(unit(1, 0, 0)))
    state, b = run(state, fact(unit(0, 1, 0)))
    state, c = run(state, fact(unit(1, 0.6, 0)))  # cos to a = 0.857 (link), to b = 0.51 (no link)
    links = [d.data for d in c if isinstance(d.data, MemoryLinked)]
    a_id, b_id, c_id = a[0].data.memory_id, b[0].data.memory_id, c[0].data.memory_id
    assert [(l.kind, l.from_id, l.to_id) for l in links] == [("FOLLOWS", b_id, c_id), ("SIMILAR_TO", c_id, a_id)]
    assert abs(links[1].weight - 0.8575) < 1e-3


def test_new_value_supersedes_old_preference_and_memory():
    state, ds1 = run(UserState(), fact(unit(1, 0, 0), "location", "北京"))
    first_pref_id = derived_id(ds1[0].data.fact_id, ds1[1].tag)
    old_memory = ds1[0].data.memory_id
    state, ds2 = run(state, fact(unit(0, 1, 0), "location", "上海"))
    sup = [d.data for d in ds2 if isinstance(d.data, MemorySuperseded)]
    pref = [d.data for d in ds2 if isinstance(d.data, PreferenceSet)][0]
    assert sup[0].memory_id == old_memory and sup[0].superseded_by == ds2[0].data.memory_id
    assert (pref.value, pref.pref_version, pref.supersedes) == ("上海", 2, first_pref_id)
    # the outdated memory leaves the working set: saying 北京 again creates a fresh memory
    state, ds3 = run(state, fact(unit(1, 0, 0), "location", "北京"))
    assert kinds(ds3)[0] == "MemoryCreated"


def test_same_value_again_sets_no_new_version():
    state, _ = run(UserState(), fact(unit(1, 0, 0), "name", "Alice"))
    state, ds = run(state, fact(unit(0, 0, 1), "name", "Alice"))
    assert not any(isinstance(d.data, PreferenceSet) for d in ds)


def test_recent_window_is_bounded():
    state = UserState()
    for i in range(10):
        state, _ = run(state, fact(unit(1, i, i * i)))
    assert len(state.recent) == RULES.recent_window


def test_redelivered_fact_yields_identical_decisions():
    state, _ = run(UserState(), fact(unit(1, 0, 0), "location", "北京"))
    f = fact(unit(0, 1, 0), "location", "上海")
    state, first = run(state, f)
    snapshot = UserState.from_dict(state.to_dict())
    state, again = run(state, f)
    assert [(d.tag, d.data) for d in again] == [(d.tag, d.data) for d in first]
    assert state == snapshot


def test_state_survives_serialisation():
    state, _ = run(UserState(), fact(unit(1, 0, 0), "name", "Alice", tags=["x"]))
    back = UserState.from_dict(state.to_dict())
    assert back == state and np.allclose(back.recent[0].vec, state.recent[0].vec)
    assert isinstance(back.recent[0].vec, np.ndarray)


def test_same_slot_and_value_reinforces_whatever_the_wording():
    state, first = run(UserState(), fact(unit(1, 0, 0), "location", "北京"))
    _, ds = run(state, fact(unit(0, 1, 0), "location", "北京"))  # orthogonal vector, same key and value
    assert kinds(ds) == ["MemoryReinforced"] and ds[0].data.memory_id == first[0].data.memory_id


def test_similar_to_links_are_capped_at_the_most_similar():
    rules = Rules(dedup_threshold=0.999, link_threshold=0.5, recent_window=10, link_max=2)
    state = UserState()
    for x in (0.9, 0.5, 0.7):  # three recent memories, all above the link threshold to the next one
        state, _ = decide(state, fact(unit(1, x, 0)), rules, lambda t: t)
    f = fact(unit(1, 0.8, 0))
    _, ds = decide(state, f, rules, lambda t: t)
    weights = sorted((d.data.weight for d in ds if isinstance(d.data, MemoryLinked) and d.data.kind == "SIMILAR_TO"),
                     reverse=True)
    assert len(weights) == 2 and weights[0] > 0.99
