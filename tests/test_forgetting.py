"""Forgetting on the real stack: progressive forgetting of idle memories (lowered → summarised →
archived, undone by a recall), an archived memory that stays in pgvector and is revived by a recall,
recall publishing `memory.recalled` from the API and the CLI, explicit forgetting of a memory and of
a user, session compression through the LLM channel and without it — and a replay of the whole log
reproducing every projection."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from memstream.app import cli
from services.forget import forget_user
from adapters.sdk import MemoryClient
from memstream.app.ticker import publish_ticks
from projections import pg
from projections.queries import audit_events, memories, preferences, session_window
from memstream.app.api import create_app
from tests.auth_helpers import admin_headers
from query.recall import RecallRequest, recall
from query.store import ReadModels
from schemas.events import MemoryRecalled
from tests.consolidation_helpers import (assert_replay_reproduces, basis, graph_nodes, own_pipeline, pg_items,
                                         publish, publish_fact, types_for, unit, wait_agree)
from tests.helpers import unique_user, wait_for
from tests.llm_server import Reply, ScriptedLLM, system_text, user_text

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=timezone.utc)
LLM_SUMMARY = "用户在和助手讨论旅行计划"


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def respond(body: dict) -> Reply:
    if system_text(body).startswith("You compress"):
        if "[plain]" in user_text(body):
            return Reply(status=400)  # not retryable: the summarizer falls back to the extractive summary
        return Reply.json({"summary": LLM_SUMMARY})
    return Reply.json({"facts": []})    # the LLM extraction channel finds nothing new


@pytest.fixture(scope="module")
def live(settings):
    # A short forgetting schedule (14 / 30 / 60 idle days, the seed's decay, factor and 30-day TTL) so
    # the walk-through fits in 60 days; the defaults are much slower (measured on LoCoMo: README).
    schedule = {"idle_lower_days": 14.0, "idle_summarize_days": 30.0, "idle_expire_days": 60.0, "decay_rate": 0.995,
                "idle_factor": 0.5, "expire_ttl_days": 30.0}
    env = {f"MEMSTREAM_{k.upper()}": str(v) for k, v in schedule.items()}
    with ScriptedLLM(respond) as llm, own_pipeline(settings, "forget", env={"MEMSTREAM_LLM_BASE_URL": llm.base_url, **env},
                                                   llm_base_url=llm.base_url, **schedule) as pair:
        yield pair


def last_accessed(live, memory_id: str) -> datetime | None:
    with pg.connect(live, autocommit=True) as conn:
        row = conn.execute(f'SELECT last_accessed_at FROM "{live.namespace}".memory_items WHERE memory_id = %s',
                           (memory_id,)).fetchone()
    return row[0] if row else None


def in_order(seq: list[str], wanted: list[str]) -> bool:
    it = iter(seq)
    return all(w in it for w in wanted)


def test_idle_memories_are_lowered_then_summarised_then_archived_and_a_recall_brings_one_back(live):
    live, keys = live
    user = unique_user("idle")
    dim = live.embed_dim
    x = publish_fact(live, keys, user, day(0), "用户下周要去北京出差，住在朝阳区", basis(0, dim), 0.9)
    y = publish_fact(live, keys, user, day(0), "用户喜欢喝乌龙茶，不加糖", basis(1, dim), 0.9)
    wait_agree(live, user, "two memories", lambda it: len(it) == 2)

    # day 14: both idle for 14 days → weight lowered (x 0.5)
    publish_ticks(live, day(14))
    low = round(0.9 * 0.995 ** 14 * 0.5, 4)
    wait_agree(live, user, "lowered", lambda it: it[x]["importance"] == low and it[y]["importance"] == low, at=day(14))

    # day 15: a recall returns y → its access is refreshed; the next tick restores its weight
    publish(live, keys, "memory", user, MemoryRecalled(memory_ids=[y], source="test"), day(15))
    wait_for(lambda: last_accessed(live, y) == day(15), what="last access refreshed by the recall")
    publish_ticks(live, day(16))
    wait_agree(live, user, "y restored", lambda it: it[y]["importance"] == round(0.9 * 0.995 ** 16, 4), at=day(16))
    # x: nothing published since its lowering; readers decay it themselves
    assert pg_items(live, user)[x]["importance"] == low
    assert abs(pg_items(live, user, day(16))[x]["importance"] - round(0.9 * 0.995 ** 16 * 0.5, 4)) <= 1e-4

    # day 30: x idle 30 days → summarised; y idle 15 days → lowered again
    publish_ticks(live, day(30))
    items = wait_agree(live, user, "x summarised", lambda it: it[x]["content"] == "用户下周要去北京出差", at=day(30))
    assert items[y]["content"] == "用户喜欢喝乌龙茶，不加糖" and items[y]["importance"] == round(0.9 * 0.995 ** 30 * 0.5, 4)

    # day 60: x idle 60 days → archived (importance still >= 0.3: the idle path, not the TTL); y summarised
    publish_ticks(live, day(60))
    items = wait_agree(live, user, "x archived", lambda it: it[x]["status"] == "archived", at=day(60))
    assert items[x]["importance"] >= 0.3
    assert (items[y]["status"], items[y]["content"]) == ("active", "用户喜欢喝乌龙茶")
    # the audit index is its own projector: it may be a moment behind
    wait_for(lambda: in_order(types_for(live, x), ["memory.created", "memory.decayed", "memory.summarized",
                                                   "memory.expired"]), what="x's life in the audit index")
    wait_for(lambda: in_order(types_for(live, y), ["memory.decayed", "memory.recalled", "memory.decayed",
                                                   "memory.summarized"]), what="y's life in the audit index")


def nearest(live, user: str, vec) -> list[tuple[str, str]]:
    """(memory id, status) of the user's rows by cosine distance, every status: what an archive tier searches."""
    import numpy as np
    with pg.connect(live, autocommit=True) as conn:
        return conn.execute(f'SELECT memory_id, status FROM "{live.namespace}".memory_items WHERE user_id = %s '
                            'ORDER BY embedding <=> %s LIMIT 3', (user, np.asarray(unit(vec), dtype=np.float32))).fetchall()


def default_recall(live, req: RecallRequest):
    models = ReadModels(live)
    try:
        return recall(models, req)
    finally:
        models.close()


def test_an_archived_memory_stays_recallable_and_a_recall_revives_it(live):
    live, keys = live
    user = unique_user("arch")
    dim = live.embed_dim
    old = publish_fact(live, keys, user, day(0), "用户小时候在杭州学过围棋", basis(3, dim), 0.25)
    wait_agree(live, user, "created", lambda it: old in it)
    # day 31: older than the 30-day TTL with importance < 0.3 → archived, not lost
    publish_ticks(live, day(31))
    items = wait_agree(live, user, "archived", lambda it: it[old]["status"] == "archived")
    assert items[old]["content"] == "用户小时候在杭州学过围棋" and graph_nodes(live, user)[old]["status"] == "archived"
    assert nearest(live, user, basis(3, dim)) == [(old, "archived")]       # row and embedding intact
    # recall finds it in the archive tier, marks it, and names it in memory.recalled: the processor revives it
    with TestClient(create_app(live), headers=admin_headers(live)) as http:
        hits = http.post("/v1/recall", json={"user": user, "query": "围棋", "k": 3}).json()
    assert [(h["memory_id"], h["why"].get("archived")) for h in hits] == [(old, True)]
    recalls = wait_for(lambda: [a for a in audit_events(live, user) if a["type"] == "memory.recalled"],
                       what="memory.recalled in the audit index")
    assert recalls[-1]["memory_ids"] == [old]
    items = wait_agree(live, user, "revived", lambda it: it[old]["status"] == "active")
    assert items[old]["importance"] == 0.25                               # its base importance, re-stated
    assert graph_nodes(live, user)[old]["status"] == "active"
    req = RecallRequest(user, "围棋", k=3, expand=False, query_embedding=unit(basis(3, dim)))
    assert [h.memory_id for h in default_recall(live, req)] == [old]      # in the default (active) tier again
    wait_for(lambda: in_order(types_for(live, old), ["memory.created", "memory.expired", "memory.recalled",
                                                     "memory.revived"]), what="archived and revived in the audit index")


def test_recall_publishes_memory_recalled_from_the_api_and_the_cli(live, monkeypatch, capsys):
    live, _ = live
    user = unique_user("rec")
    with MemoryClient(live) as client:
        client.record_turn(user, "s1", "user", "I like green tea")
    [mem] = wait_for(lambda: memories(live, user), what="the memory")
    with TestClient(create_app(live), headers=admin_headers(live)) as http:
        hits = http.post("/v1/recall", json={"user": user, "query": "green tea", "k": 3}).json()
    assert [h["memory_id"] for h in hits] == [mem["memory_id"]]
    monkeypatch.setattr(cli, "get_settings", lambda: live)
    assert cli.main(["recall", "--user", user, "--query", "tea", "--json"]) == 0
    rows = wait_for(lambda: len(r := [a for a in audit_events(live, user) if a["type"] == "memory.recalled"]) == 2 and r,
                    what="one memory.recalled per recall call")
    assert all(r["memory_ids"] == [mem["memory_id"]] for r in rows)
    wait_for(lambda: last_accessed(live, mem["memory_id"]) is not None, what="access refreshed in pgvector")

    # `memstream forget memory` on the CLI: gone from every projection
    capsys.readouterr()
    assert cli.main(["forget", "memory", mem["memory_id"], "--user", user, "--by", "test"]) == 0
    assert mem["memory_id"] in capsys.readouterr().out
    wait_agree(live, user, "forgotten", lambda it: not it and not preferences(live, user))
    wait_for(lambda: types_for(live, mem["memory_id"]) == ["memory.forgotten"], what="audit keeps only the record")
    assert cli.main(["forget", "memory", "no-such-id", "--user", user]) == 2


def test_forgetting_a_user_drops_their_memory_but_not_their_conversation(live):
    live, _ = live
    user = unique_user("fu")
    with MemoryClient(live) as client:
        for text in ("我喜欢喝咖啡", "我住在北京"):
            client.record_turn(user, "s1", "user", text)
        wait_agree(live, user, "two memories", lambda it: len(it) == 2 and len(preferences(live, user)) == 2)
        forget_user(live, user, requested_by="test")
        wait_agree(live, user, "nothing left", lambda it: not it and not preferences(live, user))
        assert graph_nodes(live, user) == {}
        wait_for(lambda: {r["type"] for r in audit_events(live, user)} == {"turn.recorded", "user.forgotten"},
                 what="audit: the turns and the record only")
        assert [m["content"] for m in session_window(live, user, "s1")] == ["我喜欢喝咖啡", "我住在北京"]
        # The key stays: memory starts again from new turns (the processor's state went too).
        client.record_turn(user, "s1", "user", "我住在杭州")
        pref = wait_for(lambda: preferences(live, user), what="a new preference")
    assert [(p["key"], p["value"], p["version"]) for p in pref] == [("location", "杭州", 1)]
    wait_agree(live, user, "one new memory", lambda it: len(it) == 1)


def test_a_session_that_overflows_its_window_gets_a_summary(live):
    live, _ = live
    user = unique_user("sess")
    window = 2 * live.short_term_turns
    n = window + live.session_summary_chunk          # the turn that overflows by a chunk
    roles = ["user", "assistant"]
    with MemoryClient(live) as client:
        for session, tag in (("trip", ""), ("plain", "[plain] ")):
            for i in range(n):
                client.record_turn(user, session, roles[i % 2], f"{tag}第{i}条：我们聊聊旅行。还有别的",
                                   at=day(0) + timedelta(seconds=i))

    def summarized(session):
        got = session_window(live, user, session, with_summary=True)
        return got["summary"] and len(got["messages"]) == window and got

    trip = wait_for(lambda: summarized("trip"), what="the LLM summary")
    assert (trip["summary"]["summary"], trip["summary"]["channel"]) == (LLM_SUMMARY, "llm")
    assert (trip["summary"]["version"], trip["summary"]["message_count"]) == (1, n - window)
    assert trip["messages"][0]["content"].startswith(f"第{n - window}条")   # the window starts where the summary ends
    assert trip["summary"]["through_time"] == (day(0) + timedelta(seconds=n - window - 1)).isoformat()
    plain = wait_for(lambda: summarized("plain"), what="the extractive summary")
    assert plain["summary"]["channel"] == "rule"
    assert plain["summary"]["summary"].startswith("user: [plain] 第0条：我们聊聊旅行 / assistant: [plain] 第1条：我们聊聊旅行 /")
    with TestClient(create_app(live), headers=admin_headers(live)) as http:
        assert http.get(f"/v1/users/{user}/sessions/trip").json()["summary"]["summary"] == LLM_SUMMARY


def test_replay_reproduces_every_projection(live):
    live, keys = live
    assert_replay_reproduces(live, keys)
