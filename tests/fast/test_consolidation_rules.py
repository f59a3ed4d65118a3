"""Consolidation and forgetting as pure decisions (no I/O): decay, merge, dedup, expiry, progressive
forgetting, access, explicit forgetting, the session summary — all in event time."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from domain.decay import importance_at
from domain.consolidation import (FORGOTTEN_VALUE, consolidate, effective_importance, forget,
                                            merge_content, recalled, summarize_content)
from domain.ledger import BUCKETS, Ledger, bucket_of
from domain.memory_rules import Rules, UserState, decide
from domain.sessions import SessionState, add_turn, extractive_summary, fold
from kernel.ids import derived_id, uuid7
from schemas.events import (FactExtracted, MemoryDecayed, MemoryDeduped, MemoryExpired, MemoryMerged,
                            MemorySummarized, PreferenceSet)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = 86400.0
DIM = 16
# Aging only (no idle steps) unless a test turns them on.
RULES = Rules(consolidate_every=5, idle_lower_days=0, idle_summarize_days=0, idle_expire_days=0)


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def e(i: int) -> np.ndarray:
    v = np.zeros(DIM)
    v[i] = 1.0
    return v


def rot(a: np.ndarray, b: np.ndarray, degrees: float) -> np.ndarray:
    """a rotated towards the (orthogonal) unit vector b by `degrees`."""
    t = np.radians(degrees)
    return np.cos(t) * a + np.sin(t) * b


def fact(vec, importance=0.5, day=0.0, content="c", key=None, value=None, category="fact") -> tuple[FactExtracted, float]:
    at = T0 + timedelta(days=day)
    fid = uuid7(at)
    return FactExtracted(fact_id=fid, source_turn=uuid7(at), channel="rule", content=content, category=category,
                         importance=importance, embedding=unit(vec).tolist(), embed_model="m", key=key,
                         value=value), at.timestamp()


def run(state: UserState, f: tuple[FactExtracted, float], rules: Rules = RULES):
    data, at = f
    return decide(state, data, rules, lambda tag: derived_id(data.fact_id, tag), at=at)


def types(ds) -> list[str]:
    return [d.data.TYPE for d in ds]


def of(ds, cls):
    return [d.data for d in ds if isinstance(d.data, cls)]


def mid(ds) -> str:
    return ds[0].data.memory_id


def at_day(day: float) -> float:
    return (T0 + timedelta(days=day)).timestamp()


# -- trigger --------------------------------------------------------------------------------

def test_consolidation_runs_every_n_stores_and_never_without_rules():
    state = UserState()
    seen = []
    for i in range(10):
        state, ds = run(state, fact(e(i % DIM), day=i * 10, importance=0.6))
        seen.append(state.stores == 0)
        assert not any(d.tag.startswith("decayed:") for d in ds)   # time passing publishes nothing
    # stores 5 and 10 consolidate (and age the ledger); the others only decide the fact
    assert seen == [False] * 4 + [True] + [False] * 4 + [True]
    first = state.ledger.get(state.recent[0].memory_id)
    assert first.importance == round(0.6 * 0.995 ** 90, 4)          # aged at store 10 (day 90)
    assert state.stores == 0
    off = UserState()
    for i in range(10):
        off, ds = run(off, fact(e(i % DIM), day=i * 10), Rules())
        assert all(not d.tag.startswith(("decayed:", "merged:", "expired:")) for d in ds)


# -- decay ---------------------------------------------------------------------------------

def readers_see(state: UserState, m: str, day: float) -> float:
    """What a read model computes for memory `m` at `day` from what was published (decay.py)."""
    entry = state.ledger.get(m)
    return importance_at(entry.shown, entry.shown_at, at_day(day), RULES.decay_rate)


def test_decay_is_a_function_decided_in_hundredths_and_never_published_for_time_alone():
    state, ds = run(UserState(), fact(e(0), importance=0.6))
    m = mid(ds)
    assert consolidate(state, RULES, at_day(5)) == []          # time passing writes nothing
    assert state.ledger.get(m).importance == round(0.6 * 0.995 ** 5, 4) == readers_see(state, m, 5)
    assert consolidate(state, RULES, at_day(6)) == []
    assert state.ledger.get(m).importance == round(0.6 * 0.995 ** 5, 4)   # moved by < 0.01: not stepped
    assert consolidate(state, RULES, at_day(10)) == []
    # from the base and the creation time, not compounded step by step; readers agree at every day
    assert state.ledger.get(m).importance == round(0.6 * 0.995 ** 10, 4) == 0.5707 == readers_see(state, m, 10)
    single = UserState()
    single, ds = run(single, fact(e(0), importance=0.6))
    consolidate(single, RULES, at_day(10))
    assert single.ledger.get(mid(ds)).importance == 0.5707


def test_an_entry_stored_before_decay_was_a_function_publishes_its_steps_until_it_has_published_once():
    state, ds = run(UserState(), fact(e(0), importance=0.6))
    m = mid(ds)
    old = state.ledger.get(m)
    old.shown = old.shown_at = None                            # as a ledger written by an older worker
    d = of(consolidate(state, RULES, at_day(5)), MemoryDecayed)
    assert [(x.memory_id, x.importance, x.previous, x.reason) for x in d] == [(m, round(0.6 * 0.995 ** 5, 4), 0.6, "decay")]
    assert (state.ledger.get(m).shown, state.ledger.get(m).shown_at) == (0.5851, at_day(5))
    # readers decay the rounded 0.5851: within the rounding of one published value
    assert consolidate(state, RULES, at_day(10)) == [] and readers_see(state, m, 10) == pytest.approx(0.5707, abs=1e-4)


def test_reinforcement_restates_the_memory_and_a_late_fact_never_turns_the_clock_back():
    state, ds = run(UserState(), fact(e(0), importance=0.6))
    m = mid(ds)
    consolidate(state, RULES, at_day(20))
    assert state.ledger.get(m).importance == round(0.6 * 0.995 ** 20, 4)
    state, ds = run(state, fact(e(0), importance=0.5, day=20))      # a duplicate: reinforce
    assert types(ds) == ["memory.reinforced"] and ds[0].data.importance == round(0.6 * 0.995 ** 20, 4)
    entry = state.ledger.get(m)
    assert (entry.anchor, entry.last_access, entry.access) == (at_day(20), at_day(20), 1)
    # A fact from day 3 arrives late: the user's clock stays at day 20, so nothing is re-grown and
    # the late memory is aged from its own creation time.
    state, ds = run(state, fact(e(1), importance=0.9, day=3))
    assert state.clock == at_day(20)
    assert not of(consolidate(state, RULES, state.clock), MemoryDecayed)
    assert state.ledger.get(mid(ds)).importance == round(0.9 * 0.995 ** 17, 4) == readers_see(state, mid(ds), 20)


# -- merge and dedup ----------------------------------------------------------------------

def geometry():
    """a, b in the merge band (cos 0.978); c in the band with both, but within dedup of their merge."""
    a = e(0)
    b = rot(e(0), e(1), 12.0)
    return a, b


def test_merge_keeps_the_higher_importance_with_weighted_embedding_content_and_provenance():
    a, b = geometry()
    assert 0.95 <= float(unit(a) @ unit(b)) < 0.98
    state, da = run(UserState(), fact(a, importance=0.7, content="用户喜欢爬山", category="general"))
    state, db = run(state, fact(b, importance=0.5, content="用户喜欢周末去香山爬山", category="preference"))
    ma, mb = mid(da), mid(db)
    assert types(db)[0] == "memory.created"                  # below dedup: write time does not fold it
    ds = consolidate(state, RULES, at_day(1))
    (merged,) = of(ds, MemoryMerged)
    assert (merged.memory_id, merged.retired_id, merged.parent_ids) == (ma, mb, [ma, mb])
    assert merged.fact_ids == [da[0].data.fact_id, db[0].data.fact_id]
    assert merged.importance == 0.7 and merged.category == "preference"  # upgraded from general
    assert merged.content == "用户喜欢爬山；用户喜欢周末去香山爬山"
    want = unit(0.7 * unit(a) + 0.5 * unit(b))
    assert np.allclose(merged.embedding, want, atol=1e-6) and abs(np.linalg.norm(merged.embedding) - 1) < 1e-6
    assert merged.access_count == 0
    entry = state.ledger.get(ma)
    assert entry.last_access == entry.anchor == at_day(0)       # a merge is no access, no re-statement
    assert state.ledger.get(mb) is None and [r.memory_id for r in state.recent] == [ma]


def test_merge_content_keeps_the_longer_when_one_contains_the_other():
    assert merge_content("用户喜欢爬山", "用户喜欢爬山和游泳") == "用户喜欢爬山和游泳"
    assert merge_content("User likes tea and cake", "likes tea") == "User likes tea and cake"
    assert merge_content("A", "B") == "A；B"


def test_a_merge_can_make_a_dedup_and_the_higher_importance_is_kept():
    a, b = geometry()
    m_dir = unit(0.6 * unit(a) + 0.6 * unit(b))
    c = rot(m_dir, e(2), 11.0)  # close to the merged vector, in the band with each parent
    cos = lambda x, y: float(unit(x) @ unit(y))
    assert cos(c, a) < 0.98 and cos(c, b) < 0.98 and cos(c, a) < cos(a, b) and cos(c, m_dir) >= 0.98
    state, da = run(UserState(), fact(a, importance=0.6, content="User plays chess"))
    state, _ = run(state, fact(b, importance=0.6, content="User plays chess online", day=0.001))  # the older survives
    state, dc = run(state, fact(c, importance=0.4, content="User plays chess with friends", day=0.002))
    ds = consolidate(state, RULES, at_day(0.002))
    assert types(ds) == ["memory.merged", "memory.deduped"]
    (dd,) = of(ds, MemoryDeduped)
    assert (dd.memory_id, dd.retired_id) == (mid(da), mid(dc)) and dd.similarity >= 0.98
    assert dd.importance == 0.6
    assert [r.memory_id for r in state.recent] == [mid(da)]


def test_keyed_memories_with_another_key_or_value_never_merge():
    a, b = geometry()
    state, _ = run(UserState(), fact(a, key="likes:tea", value="true"))
    state, _ = run(state, fact(b, key="likes:coffee", value="true"))
    assert of(consolidate(state, RULES, at_day(0)), MemoryMerged) == []
    state, _ = run(UserState(), fact(a, key="likes:tea", value="true"))
    state, _ = run(state, fact(b, key="likes:tea", value="false"))
    assert of(consolidate(state, RULES, at_day(0)), MemoryMerged) == []
    state, _ = run(UserState(), fact(a, key="likes:tea", value="true", content="User likes tea"))
    state, _ = run(state, fact(b, content="User likes green tea"))  # one side without a key: the sentences decide
    assert len(of(consolidate(state, RULES, at_day(0)), MemoryMerged)) == 1


def test_only_memories_touched_since_the_last_consolidation_are_compared():
    a, b = geometry()
    state, _ = run(UserState(), fact(a))
    state, _ = run(state, fact(b))
    state.dirty = []  # as if consolidated already
    assert of(consolidate(state, RULES, at_day(0)), MemoryMerged) == []


# -- expiry and protection ---------------------------------------------------------------

def linked_user():
    """P with in-degree 3 (FOLLOWS from E + SIMILAR_TO from Q1, Q2); E with in-degree 0 after forgetting A."""
    p = e(5)
    q1, q2 = rot(p, e(6), 21.0), rot(p, e(7), 21.0)   # cos 0.934: a link, not a merge
    state, da = run(UserState(), fact(e(0), importance=0.6))
    state, de = run(state, fact(e(9), importance=0.25))
    state, dp = run(state, fact(p, importance=0.25))
    state, dq1 = run(state, fact(q1, importance=0.8))
    state, dq2 = run(state, fact(q2, importance=0.8))
    return state, {n: mid(d) for n, d in (("A", da), ("E", de), ("P", dp), ("Q1", dq1), ("Q2", dq2))}


def test_old_unimportant_memories_expire_unless_graph_protected():
    state, ids = linked_user()
    assert state.ledger.get(ids["P"]).in_degree == 3
    assert state.ledger.get(ids["E"]).in_degree == 1       # FOLLOWS from A
    consolidate(state, RULES, at_day(29))
    assert not of(consolidate(state, RULES, at_day(30)), MemoryExpired)
    ds = consolidate(state, RULES, at_day(31))
    expired = {x.memory_id: x for x in of(ds, MemoryExpired)}
    assert set(expired) == {ids["E"]}                       # P is as old and as unimportant, but protected
    assert expired[ids["E"]].reason == "ttl" and expired[ids["E"]].importance < 0.3
    assert state.ledger.get(ids["E"]) is None and state.ledger.get(ids["P"]) is not None


def test_forgetting_a_source_lowers_in_degree_and_can_unprotect():
    state, ids = linked_user()
    assert forget(state, ids["Q1"])
    assert state.ledger.get(ids["P"]).in_degree == 2
    expired = {x.memory_id for x in of(consolidate(state, RULES, at_day(31)), MemoryExpired)}
    assert ids["P"] in expired


# -- progressive forgetting and access ------------------------------------------------------

IDLE = Rules(consolidate_every=5)  # the defaults: lower at 14 idle days, summarise at 30, expire at 60


def test_idle_memory_is_lowered_then_summarised_then_expired():
    state, ds = run(UserState(), fact(e(0), importance=0.9, content="用户下周要去北京出差，住在朝阳区的酒店"))
    m = mid(ds)
    assert consolidate(state, IDLE, at_day(13)) == [] or not of(consolidate(state, IDLE, at_day(13)), MemoryExpired)
    (low,) = of(consolidate(state, IDLE, at_day(14)), MemoryDecayed)
    assert low.reason == "idle" and low.importance == round(0.9 * 0.995 ** 14 * 0.5, 4)
    (summ,) = of(consolidate(state, IDLE, at_day(30)), MemorySummarized)
    assert (summ.memory_id, summ.content) == (m, "用户下周要去北京出差")
    assert not of(consolidate(state, IDLE, at_day(59)), MemoryExpired)
    (gone,) = of(consolidate(state, IDLE, at_day(60)), MemoryExpired)
    assert gone.reason == "idle" and gone.idle_days == 60.0


def test_a_recall_undoes_the_lowering_and_resets_the_idle_clock():
    state, ds = run(UserState(), fact(e(0), importance=0.9))
    m = mid(ds)
    consolidate(state, IDLE, at_day(20))
    assert state.ledger.get(m).stage == 1
    got = recalled(state, [m, "not-mine"], at_day(21))
    assert got == [] and state.ledger.dirty      # nothing to publish, but the state changed: save it
    (up,) = of(consolidate(state, IDLE, at_day(21)), MemoryDecayed)
    assert up.reason == "refresh" and up.importance == round(0.9 * 0.995 ** 21, 4)
    entry = state.ledger.get(m)
    assert (entry.recalls, entry.last_access, entry.stage) == (1, at_day(21), 0)
    assert all(x.reason == "decay" for x in of(consolidate(state, IDLE, at_day(34)), MemoryDecayed))
    assert state.ledger.get(m).stage == 0                                 # idle 13 days: not lowered yet


def test_summaries_are_extractive_first_clauses():
    assert summarize_content("用户喜欢爬山，尤其是秋天的香山", 40) == "用户喜欢爬山"
    assert summarize_content("User moved to Berlin. They work at a bank.", 40) == "User moved to Berlin"
    assert summarize_content("x" * 100, 10) == "x" * 9 + "…"
    assert summarize_content("v1.2 is the version in use", 40) == "v1.2 is the version in use"


# -- explicit forgetting ------------------------------------------------------------------

def test_forgetting_the_memory_of_a_preference_lets_the_same_value_come_back_as_a_new_version():
    state, ds = run(UserState(), fact(e(0), key="location", value="北京"))
    m = mid(ds)
    assert forget(state, m) and not forget(state, m)
    assert state.prefs["location"].value == FORGOTTEN_VALUE and state.last_memory_id is None
    state, ds = run(state, fact(e(0), key="location", value="北京", day=1))
    assert types(ds)[0] == "memory.created"
    (pref,) = of(ds, PreferenceSet)
    assert pref.pref_version == 2 and not [d for d in ds if d.data.TYPE == "memory.superseded"]


# -- bounds ---------------------------------------------------------------------------------

def test_a_store_triggered_sweep_ages_at_most_sweep_max_memories_round_robin():
    rules = Rules(consolidate_every=5, sweep_max=50, idle_lower_days=0, idle_summarize_days=0, idle_expire_days=0)
    state = UserState()
    for i in range(400):
        state, _ = run(state, fact(unit(np.random.default_rng(i).normal(size=DIM)), importance=0.6), Rules())
    assert len(state.ledger) == 400
    first = stepped(state, lambda: consolidate(state, rules, at_day(10)))
    assert 50 <= len(first) < 400 and state.cursor != 0
    covered = set(first)
    for _ in range(BUCKETS):
        covered |= stepped(state, lambda: consolidate(state, rules, at_day(10)))
    assert len(covered) == 400                       # round-robin reaches every memory
    full = UserState(ledger=Ledger.from_dict(state.ledger.to_dict()))
    assert len(stepped(full, lambda: consolidate(full, rules, at_day(20), full=True))) == 400  # a tick: all of them


def stepped(state: UserState, step) -> set[str]:
    """The memories whose decided importance a consolidation moved (aging publishes nothing)."""
    before = {m: x.importance for m, x in state.ledger.items()}
    assert not of(step(), MemoryDecayed)
    return {m for m, x in state.ledger.items() if x.importance != before[m]}


def test_ledger_buckets_are_stable_and_roundtrip():
    assert bucket_of("0190a1b2-0000-7000-8000-000000000000") == bucket_of("0190a1b2-0000-7000-8000-000000000000")
    state, _ = linked_user()
    copy = Ledger.from_dict(state.ledger.to_dict())
    assert [(k, v.to_list()) for k, v in copy.items()] == [(k, v.to_list()) for k, v in state.ledger.items()]
    back = UserState.from_dict(state.to_dict(), copy)
    assert back == state and back.clock == state.clock


def test_decisions_are_deterministic_for_the_same_history():
    def history():
        state = UserState()
        out = []
        rng = np.random.default_rng(3)
        for i in range(25):
            data = FactExtracted(fact_id=derived_id("0190a1b2-0000-7000-8000-000000000000", f"f{i}"),
                                 source_turn="t", channel="rule", content=f"c{i}", importance=float(rng.uniform(0.1, 0.9)),
                                 embedding=unit(rng.normal(size=DIM) + 3 * e(i % 3)).tolist(), embed_model="m")
            state, ds = decide(state, data, RULES, lambda tag: tag, at=at_day(i * 3))
            out += [(d.tag, d.data.model_dump(), d.at) for d in ds]
        return out
    assert history() == history()


def test_effective_importance_never_exceeds_one():
    from domain.ledger import Entry
    assert effective_importance(Entry("c", 1.0, 0, 0, 1.0, 0), RULES, 0) == 1.0


# -- session summaries ---------------------------------------------------------------------

def test_session_overflow_folds_the_older_messages_into_a_rolling_summary():
    state = SessionState()
    window, chunk = 4, 2
    out = []
    for n in range(9):
        older = add_turn(state, f"e{n}", float(n), "user" if n % 2 == 0 else "assistant", f"message {n}. more", window, chunk)
        if older:
            out.append([m[1] for m in older])
            fold(state, older, extractive_summary(state.summary, older, 200))
    assert out == [["e0", "e1"], ["e2", "e3"]]
    assert [m[1] for m in state.buf] == ["e4", "e5", "e6", "e7", "e8"]
    assert state.summary == "user: message 0 / assistant: message 1 / user: message 2 / assistant: message 3"
    assert (state.version, state.count, state.through_id) == (2, 4, "e3")
    assert add_turn(state, "e1", 1.0, "assistant", "message 1", window, chunk) is None  # re-delivered
    long = extractive_summary("x" * 300, [[0, "a", "user", "y"]], 100)
    assert len(long) == 100 and long.endswith("user: y")


@pytest.mark.parametrize("n", [1, 7])
def test_recall_of_unknown_memories_changes_nothing(n):
    state = UserState()
    got = recalled(state, [f"m{i}" for i in range(n)], at_day(1), archived_ids=["m0"])
    assert got == [] and not state.ledger.dirty


def test_a_redelivered_fact_re_emits_its_own_decisions_but_never_consolidates_twice():
    state = UserState()
    facts = [fact(e(i), importance=0.6, day=i * 10) for i in range(5)]
    ids = []
    for f in facts[:4]:
        state, ds = run(state, f)
        ids.append(mid(ds))
    state, first = run(state, facts[4])
    assert state.stores == 0                                       # the 5th store consolidated
    assert state.ledger.get(ids[0]).importance == round(0.6 * 0.995 ** 40, 4)
    again_state, again = run(state, facts[4])                      # crash re-delivery: state already saved
    assert [(d.tag, d.data) for d in again] == [(d.tag, d.data) for d in first if not d.tag.startswith("decayed:")]
    assert again_state.stores == 0


def test_the_audit_index_knows_which_memories_each_new_event_concerns():
    import uuid as _uuid

    from projections.audit_index import memory_ids_of
    from schemas.envelope import Envelope
    from schemas.events import MemoryForgotten, MemoryRecalled

    def env(data):
        return Envelope(str(_uuid.uuid4()), data.TYPE, 1, "u", T0, None, None, "test", data, 1)
    merged = MemoryMerged(memory_id="a", retired_id="b", parent_ids=["a", "b"], fact_ids=["fa", "fb"], similarity=0.96,
                          importance=0.7, category="fact", access_count=0, content="c", embedding=[0.0])
    assert memory_ids_of(env(merged)) == ["a", "b"]
    deduped = MemoryDeduped(memory_id="a", retired_id="c", fact_ids=[], similarity=0.99, importance=0.7,
                            category="fact", access_count=1)
    assert memory_ids_of(env(deduped)) == ["a", "c"]
    assert memory_ids_of(env(MemoryForgotten(memory_id="a", memory_ids=["a", "b", "c"]))) == ["a", "b", "c"]
    assert memory_ids_of(env(MemoryRecalled(memory_ids=["x", "y"]))) == ["x", "y"]
    for cls, extra in ((MemoryDecayed, {"importance": 0.5, "previous": 0.6, "reason": "decay", "age_days": 1.0}),
                       (MemoryExpired, {"reason": "ttl", "importance": 0.1, "age_days": 31.0, "idle_days": 31.0,
                                        "in_degree": 0}),
                       (MemorySummarized, {"content": "c", "idle_days": 30.0})):
        assert memory_ids_of(env(cls(memory_id="m", **extra))) == ["m"]


# -- forgetting archives, a recall revives, TTL by kind ----------------------------------------

from domain.ledger import ARCHIVE_CAP, ARCHIVE_KEY, Entry  # noqa: E402
from schemas.events import MemoryRevived  # noqa: E402

BY_KIND = Rules(consolidate_every=5, idle_lower_days=0, idle_summarize_days=0, idle_expire_days=0,
                ttl_by_kind=(("general", 7.0), ("preference", 365.0)), keep_kinds=("identity", "policy"),
                keep_tags=("decision",))


def test_an_expired_memory_is_archived_with_a_compact_record_and_leaves_the_working_set():
    state, ids = linked_user()
    consolidate(state, RULES, at_day(31))
    e_id = ids["E"]
    assert state.ledger.get(e_id) is None and e_id not in [r.memory_id for r in state.recent]
    entry, at = state.ledger.archived(e_id)
    assert at == at_day(31) and entry.base == 0.25 and entry.created == at_day(0) and entry.kind == "fact"
    assert entry.inc == [ids["A"]] and entry.content == "" and state.ledger.archived_count() == 1
    # stored beside the live entries of its bucket, and read back the same
    dumped = state.ledger.to_dict()
    assert any(e_id in d.get(ARCHIVE_KEY, {}) for d in dumped.values())
    copy = Ledger.from_dict(dumped)
    assert copy.archived(e_id) == state.ledger.archived(e_id) and len(copy) == len(state.ledger)
    consolidate(state, RULES, at_day(60))
    assert state.ledger.archived(e_id) == copy.archived(e_id)  # aging never touches it


def test_a_recall_revives_an_archived_memory_back_into_aging():
    state, ids = linked_user()
    consolidate(state, RULES, at_day(31))
    e_id, p_id = ids["E"], ids["P"]
    revived = recalled(state, [p_id, e_id], at_day(40), archived_ids=[e_id])
    assert [d.tag for d in revived] == [f"revived:{e_id}"]
    (d,) = of(revived, MemoryRevived)
    assert (d.memory_id, d.importance, d.archived_days, d.reason) == (e_id, 0.25, 9.0, "recalled")
    assert d.previous == round(0.25 * 0.995 ** 31, 4)
    back = state.ledger.get(e_id)
    assert (back.anchor, back.last_access, back.stage, back.recalls, back.created) == (at_day(40), at_day(40), 0, 1,
                                                                                        at_day(0))
    assert state.ledger.archived(e_id) is None and state.ledger.get(p_id).recalls == 1
    # re-stated at the recall: its TTL counts from day 40, so it is not archived again at once
    assert not of(consolidate(state, RULES, at_day(41)), MemoryExpired)
    (again,) = of(consolidate(state, RULES, at_day(71)), MemoryExpired)
    assert again.memory_id == e_id and again.reason == "ttl"
    # a second recall of a live memory revives nothing
    assert of(recalled(state, [p_id], at_day(72)), MemoryRevived) == []


def test_a_revived_memory_goes_through_progressive_forgetting_again_without_its_content():
    state, ds = run(UserState(), fact(e(0), importance=0.9, content="用户下周要去北京出差，住在朝阳区的酒店"))
    m = mid(ds)
    for day in (14, 30, 60):
        consolidate(state, IDLE, at_day(day))
    assert state.ledger.archived(m) is not None
    (rev,) = recalled(state, [m], at_day(61))
    assert rev.data.importance == 0.9
    out = []
    for day in (75, 91, 121):
        out += consolidate(state, IDLE, at_day(day))
    # lowered, not summarised (the ledger lost its content: the read models keep the last one), archived
    assert "idle" in {x.reason for x in of(out, MemoryDecayed)} and not of(out, MemorySummarized)
    assert types(out)[-1] == "memory.expired" and of(out, MemoryExpired)[0].reason == "idle"
    assert state.ledger.archived(m) is not None


def test_ttl_by_kind_small_talk_short_preferences_a_year_identity_policy_and_decisions_never():
    state = UserState()
    ids = {}
    for i, (name, category, tags) in enumerate((("chat", "general", []), ("pref", "preference", []),
                                                ("fact", "fact", []), ("who", "identity", []),
                                                ("rule", "policy", ["constraint"]), ("choice", "fact", ["decision"]))):
        data, at = fact(e(i), importance=0.2, category=category)
        data = data.model_copy(update={"tags": tags})
        state, ds = run(state, (data, at), BY_KIND)
        ids[name] = mid(ds)

    def archived_at(day):
        return {x.memory_id for x in of(consolidate(state, BY_KIND, at_day(day)), MemoryExpired)}

    inv = {v: k for k, v in ids.items()}
    assert archived_at(7) == set()
    assert {inv[m] for m in archived_at(8)} == {"chat"}
    assert {inv[m] for m in archived_at(31)} == {"fact"}
    assert archived_at(365) == set()
    assert {inv[m] for m in archived_at(366)} == {"pref"}
    assert archived_at(3650) == set()
    kinds = {inv[m]: (e_.kind, e_.pinned) for m, e_ in state.ledger.items()}
    assert kinds == {"who": ("identity", False), "rule": ("policy", False), "choice": ("fact", True)}


def test_kept_kinds_skip_progressive_forgetting_but_still_decay():
    rules = Rules(consolidate_every=5, keep_kinds=("identity",))
    state, ds = run(UserState(), fact(e(0), importance=0.9, content="用户叫张三，在上海工作", category="identity"), rules)
    m = mid(ds)
    out = []
    for day in (14, 30, 60, 400):
        out += consolidate(state, rules, at_day(day))
    assert not of(out, MemoryDecayed)            # never lowered, so nothing but time: nothing published
    assert not of(out, MemorySummarized) and not of(out, MemoryExpired)
    assert state.ledger.get(m).importance == round(0.9 * 0.995 ** 400, 4)


def test_the_archive_is_bounded_per_bucket_dropping_the_oldest_first():
    ledger = Ledger()
    ids = [f"m{i:05d}" for i in range(20000)]
    in_bucket = [m for m in ids if bucket_of(m) == bucket_of(ids[0])]
    assert len(in_bucket) > ARCHIVE_CAP
    for n, m in enumerate(in_bucket):
        ledger.put(m, Entry("c", 0.5, 0, 0, 0.5, 0))
        ledger.archive(m, float(n))
    kept = [m for m in in_bucket if ledger.archived(m) is not None]
    assert kept == in_bucket[-ARCHIVE_CAP:]          # the newest ARCHIVE_CAP archived


def test_forgetting_an_archived_memory_drops_its_record_and_its_edges():
    state, ids = linked_user()
    consolidate(state, RULES, at_day(31))
    assert forget(state, ids["E"]) and state.ledger.archived(ids["E"]) is None
    assert recalled(state, [ids["E"]], at_day(40)) == []
    # forgetting A (E's FOLLOWS source) while E is archived: E's record forgets the edge
    state, ids = linked_user()
    consolidate(state, RULES, at_day(31))
    assert forget(state, ids["A"]) and state.ledger.archived(ids["E"])[0].inc == []


def test_rules_from_settings_carry_the_forgetting_by_kind():
    from kernel.config import Settings
    rules = Rules.from_settings(Settings(forget_keep_kinds="Identity, policy", forget_keep_tags="decision"))
    assert rules.keep_kinds == ("identity", "policy") and rules.keep_tags == ("decision",)
    s = Settings()
    assert rules.ttl_days("general") == s.ttl_general_days and rules.ttl_days("preference") == s.ttl_preference_days
    assert rules.ttl_days("fact") == (s.expire_ttl_days or None) and rules.ttl_days("identity") is None
    assert rules.ttl_days("fact", pinned=True) is None and Rules(expire_ttl_days=0).ttl_days("fact") is None


def test_entries_stored_before_kinds_were_kept_still_load():
    old = ["c", 0.5, 0.0, 0.0, 0.5, 0.0, 0, 0, 0, [], [], ["f"]]
    entry = Entry.from_list(old)
    assert (entry.kind, entry.pinned, entry.facts) == (None, False, ["f"])
    assert Entry.from_list(entry.to_list()) == entry


def test_a_recall_revives_only_archived_hits_above_the_relevance_bar():
    """Issue 30 item 4: a recall revived every archived memory in its top k, relevant or not."""
    state, ids = linked_user()
    consolidate(state, RULES, at_day(31))
    e_id, p_id = ids["E"], ids["P"]
    assert state.ledger.archived(e_id) is not None
    low = recalled(state, [p_id, e_id], at_day(40), archived_ids=[e_id], scores=[0.6, 0.12])
    assert low == [] and state.ledger.archived(e_id) is not None       # returned, not relevant: stays archived
    assert state.ledger.get(p_id).recalls == 1                          # the live hit is still refreshed
    (back,) = of(recalled(state, [p_id, e_id], at_day(41), archived_ids=[e_id], scores=[0.6, 0.31]), MemoryRevived)
    assert back.memory_id == e_id and state.ledger.get(e_id) is not None


def test_a_recall_event_without_scores_revives_as_before():
    state, ids = linked_user()
    consolidate(state, RULES, at_day(31))
    e_id = ids["E"]
    assert len(of(recalled(state, [e_id], at_day(40), archived_ids=[e_id], scores=[]), MemoryRevived)) == 1
