"""Consolidation on the real stack, one user walked through simulated days in event time:
reinforce → decay (a tick 10 days later) → merge and dedup (the 5th store) → forget → expiry with and
without graph protection (a tick at day 45); pgvector, key-value, Neo4j and the audit index agree
after every step, and replaying the log from the start reproduces every projection."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from services.forget import forget_memory
from memstream.app.ticker import TICKER_USER, publish_ticks
from projections.queries import audit_events, preferences
from streams.routing import partition_of
from tests.consolidation_helpers import (assert_replay_reproduces, basis, graph_nodes, own_pipeline, pg_items,
                                         publish_fact, rot, types_for, unit, wait_agree)
from tests.helpers import unique_user, wait_for

T0 = datetime(2025, 6, 1, 8, 0, tzinfo=timezone.utc)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def audit_has(live, memory_id: str, event_type: str) -> list[str]:
    """The memory's event types once the audit index (its own projector, maybe behind) has `event_type`."""
    return wait_for(lambda: event_type in (t := types_for(live, memory_id)) and t, what=f"{event_type} in the audit index")


@pytest.fixture(scope="module")
def live(settings):
    # One user per tick event: a tick for a partition with several users continues in further ticks.
    # The walk-through spans 45 days: a short forgetting schedule (14 / 30 / 60 idle days, the seed's
    # decay, idle factor and 30-day TTL); the defaults are much slower (measured on LoCoMo: README).
    schedule = {"idle_lower_days": 14.0, "idle_summarize_days": 30.0, "idle_expire_days": 60.0, "decay_rate": 0.995,
                "idle_factor": 0.5, "expire_ttl_days": 30.0}
    env = {f"MEMSTREAM_{k.upper()}": str(v) for k, v in schedule.items()}
    with own_pipeline(settings, "cons", env={"MEMSTREAM_TICK_SLICE_USERS": "1", **env}, tick_slice_users=1,
                      **schedule) as pair:
        yield pair


def test_one_user_through_reinforce_decay_merge_dedup_forget_and_expiry(live):
    live, keys = live
    user = unique_user("cons")
    dim = live.embed_dim
    e = lambda i: basis(i, dim)  # noqa: E731
    a, p = e(0), e(5)
    ids: dict[str, str] = {}

    def fact(name, at, content, vec, importance, **kw):
        ids[name] = publish_fact(live, keys, user, at, content, vec, importance, **kw)

    # -- day 0: five stores, one of them a reinforcement ----------------------------------------
    fact("A", day(0), "用户喜欢爬山", a, 0.6, key="likes:爬山", value="true", category="preference")
    fact("A2", day(0) + timedelta(minutes=1), "我喜欢爬山", rot(a, e(1), 2), 0.5, key="likes:爬山", value="true")
    fact("E", day(0) + timedelta(minutes=2), "用户昨天看了一场电影，片名记不清了", e(9), 0.25)
    fact("P", day(0) + timedelta(minutes=3), "用户养了一只猫，名字叫咪咪", p, 0.25)
    fact("Q1", day(0) + timedelta(minutes=4), "用户的猫喜欢晒太阳", rot(p, e(6), 21), 0.8)
    # Bystanders: with 7 users on 3 partitions some partition has several, so ticks continue.
    others = [unique_user("by") for _ in range(6)]
    for other in others:
        publish_fact(live, keys, other, day(0), "用户喜欢下棋", e(20), 0.5)
    items = wait_agree(live, user, "day 0: reinforced", lambda it: len(it) == 4 and it.get(ids["A"], {}).get("access_count") == 1)
    assert ids["A2"] not in items, "the same key and value reinforces, it does not create"
    assert items[ids["A"]]["importance"] == 0.6
    assert [p_["memory_id"] for p_ in preferences(live, user)] == [ids["A"]]
    audit_has(live, ids["A"], "memory.reinforced")

    # The tick for this user's partition is the one that ages them (murmur2, as the producers place keys).
    assert partition_of(user.encode(), live.partitions) == next(
        r["partition"] for r in audit_events(live, user) if r["type"] == "fact.extracted")

    # -- day 10: a tick; everything decays from its base and creation time ----------------------
    # Decay is a function: readers compute it at their time from what was published; the tick
    # writes no event for time passing (domain/decay.py).
    publish_ticks(live, day(10))
    want = {"A": round(0.6 * 0.995 ** 10, 4), "E": round(0.25 * 0.995 ** 10, 4), "P": round(0.25 * 0.995 ** 10, 4),
            "Q1": round(0.8 * 0.995 ** 10, 4)}
    wait_agree(live, user, "day 10: decayed", lambda it: all(abs(it[ids[n]]["importance"] - v) <= 1e-4
                                                             for n, v in want.items()), at=day(10))
    assert want["A"] == 0.5707
    wait_for(lambda: {r["producer"] for r in audit_events(live, TICKER_USER) if r["type"] == "decay.ticked"}
             == {"ticker/1", "memory-processor/1"}, what="the tick published, and continued")
    for other in others:  # every user of every partition, across continued ticks
        wait_agree(live, other, "bystander decayed", lambda it: [m["importance"] for m in it.values()] == [0.4756],
                   at=day(10))
    assert types_for(live, ids["A"]).count("memory.decayed") == 0

    # -- day 10: five more stores; the fifth runs consolidation: merge A+B, then dedup C into A --
    b = rot(a, e(1), 12)
    m_dir = np.asarray(unit(want["A"] * np.asarray(unit(a)) + 0.5 * np.asarray(unit(b))))
    c = rot(m_dir, e(2), 11)
    cos = lambda x, y: float(np.dot(unit(x), unit(y)))  # noqa: E731
    assert 0.95 <= cos(a, b) < 0.98 and cos(c, a) < cos(a, b) and cos(c, b) < 0.98 and cos(c, m_dir) >= 0.98
    fact("B", day(10) + timedelta(hours=1), "用户喜欢周末去香山爬山", b, 0.5)  # the same proposition as A
    fact("C", day(10) + timedelta(hours=2), "用户爱好登山", c, 0.4)
    fact("Q2", day(10) + timedelta(hours=3), "用户每天早上喂猫", rot(p, e(7), 21), 0.8)
    fact("F", day(10) + timedelta(hours=4), "用户在学西班牙语", e(10), 0.6)
    fact("G", day(10) + timedelta(hours=5), "用户的生日在三月", e(11), 0.6)
    items = wait_agree(live, user, "day 10: merged and deduped",
                       lambda it: it.get(ids["C"], {}).get("status") == "deduped", at=day(10) + timedelta(hours=5))
    A, B, C = items[ids["A"]], items[ids["B"]], items[ids["C"]]
    assert (A["status"], A["content"], A["importance"]) == ("active", "用户喜欢爬山；用户喜欢周末去香山爬山", 0.5707)
    assert A["parent_ids"] == sorted([ids["A"], ids["B"]]) and A["source_fact_ids"] == [ids["A"], ids["B"], ids["C"]]
    assert (B["status"], B["merged_into"], C["merged_into"]) == ("merged", ids["A"], ids["A"])
    audit_has(live, ids["B"], "memory.merged")
    audit_has(live, ids["C"], "memory.deduped")
    assert graph_nodes(live, user)[ids["P"]]["in_degree"] == 3   # FOLLOWS from E, SIMILAR_TO from Q1 and Q2

    # -- forget A: it and what was merged into it, in every projection ------------------------
    _, forgotten = forget_memory(live, user, ids["A"], requested_by="test", at=day(10) + timedelta(hours=6))
    assert sorted(forgotten) == sorted([ids["A"], ids["B"], ids["C"]])
    items = wait_agree(live, user, "A forgotten", lambda it: ids["A"] not in it and not preferences(live, user))
    assert ids["B"] not in items and ids["C"] not in items
    for name in ("A", "B", "C"):
        wait_for(lambda: types_for(live, ids[name]) == ["memory.forgotten"], what=f"audit of {name}: only the record")
    assert graph_nodes(live, user)[ids["E"]]["in_degree"] == 0   # its FOLLOWS came from A

    # -- day 45: a tick; E (old, unimportant, in-degree 0) is archived, P (as old, in-degree 3) stays --
    # (expiry archives since issue 10: memory.expired keeps its name, the projections say `archived`)
    publish_ticks(live, day(45))
    items = wait_agree(live, user, "day 45: expiry", lambda it: it[ids["E"]]["status"] == "archived", at=day(45))
    assert items[ids["P"]]["status"] == "active" and items[ids["P"]]["importance"] < 0.3
    assert items[ids["P"]]["content"] == "用户养了一只猫"                # idle for 45 days: summarised
    assert graph_nodes(live, user)[ids["P"]]["in_degree"] == 3
    life_e = audit_has(live, ids["E"], "memory.expired")
    assert life_e[-3:] == ["memory.decayed", "memory.summarized", "memory.expired"], life_e
    assert {n: items[ids[n]]["status"] for n in ("Q1", "Q2", "F", "G")} == {
        "Q1": "active", "Q2": "active", "F": "archived", "G": "archived"}  # 0.8 x decay x 0.5 stays >= 0.3

    # -- the log, replayed from the start into fresh stores, gives the same projections -----------
    assert pg_items(live, user, day(45)) == items
    assert_replay_reproduces(live, keys)
