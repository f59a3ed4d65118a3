"""As of a time from the versions the read models keep (#26 item 6), against the replay as oracle.

A generated history (moves, job and taste changes, restatements, facts about others, over four
months) goes through the real pipeline; then, at every boundary between its turns and between
them, the indexed as-of reads (query/as_of.py) must answer exactly what a replay of the user's log
up to that time answers (replay/timetravel.py): the profile, the memories list and recalls.
"""
from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import psycopg
from psycopg import sql

from projections import pg
from projections.memory_history import VERSIONED_COLUMNS
from projections.queries import memories as memories_now
from query import as_of as past
from query.consistency import wait_until_applied
from query.profile import profile as profile_now
from query.recall import RecallRequest, recall as recall_now
from query.store import ReadModels
from replay.timetravel import snapshot
from tests.helpers import unique_user

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
HISTORY = [   # (days after START, what the user says)
    (0, "I live in Paris and I work as a nurse at the Saint Louis hospital."),
    (1, "I love spicy food, especially Sichuan dishes."),
    (3, "My sister is called Ana. She lives in Rome."),
    (6, "I play the violin every weekend."),
    (9, "I really love spicy food."),
    (14, "I went hiking in the Alps last weekend with my friend Tom."),
    (20, "I play the violin in a small orchestra now."),
    (31, "I moved to Berlin last week."),
    (33, "I now work as a product manager at a startup."),
    (40, "Lately I can't stand spicy food anymore, I prefer mild dishes now."),
    (52, "My favourite book is Dune."),
    (60, "I adopted a cat named Miso."),
    (75, "I moved to Lisbon."),
    (90, "Actually my favourite book is now The Left Hand of Darkness."),
    (110, "I started learning Portuguese."),
]
QUERIES = ("where does the user live?", "what does the user do for work?", "does the user like spicy food?")


def boundaries() -> list[datetime]:
    times = [START + timedelta(days=d) for d, _ in HISTORY]
    out = [START - timedelta(days=1)]
    for a, b in zip(times, times[1:] + [times[-1] + timedelta(days=30)]):
        out += [a, a + (b - a) / 2]
    return out


def comparable_hits(hits) -> list[tuple]:
    return [(h.memory_id, h.content, round(h.score, 5), round(h.importance, 5), h.archived, h.created_at) for h in hits]


def test_indexed_as_of_answers_equal_the_replay_at_every_boundary(settings, client, pipeline):
    user = unique_user("asof")
    token = None
    for days, text in HISTORY:
        token = client.record_turn(user, "s1", "user", text, at=START + timedelta(days=days)).token()
    models = ReadModels(settings, pool_size=2)
    try:
        wait_until_applied(models, token, ("pgvector-items", "kv-preferences", "audit-index"), timeout=180)
        assert past.history_complete(models), "a namespace made with the versions holds the whole past"
        with models.pool.connection() as conn:
            n = conn.execute(models.q("SELECT count(*) FROM {s}.memory_item_versions WHERE user_id = %s"), (user,)).fetchone()[0]
        assert n > len(HISTORY), "the history changed memories after creating them"
        compared = 0
        for at in boundaries():
            with snapshot(settings, user, at) as shadow:
                then = ReadModels(shadow, pool_size=1)
                try:
                    assert past.profile(models, user, at) == profile_now(then, user, at=at), at
                    assert past.memories(models, user, at, limit=500) == memories_now(shadow, user, 500, at=at), at
                    for q in QUERIES:
                        req = RecallRequest(user, q, k=5, query_embedding=models.embed_query(q))
                        assert comparable_hits(past.recall(models, req, at)) == comparable_hits(
                            recall_now(then, req, now=at)), (at, q)
                        compared += 1
                finally:
                    then.close()
        assert compared == len(boundaries()) * len(QUERIES)
        # the past is not the present: as of before the move the user lived in Paris
        before_move = START + timedelta(days=20)
        assert past.profile(models, user, before_move)["preferences"]["location"]["value"] == "Paris"
        assert profile_now(models, user)["preferences"]["location"]["value"] == "Lisbon"
        assert past.memories(models, user, START - timedelta(days=1)) == []
        # any offset Python accepts, though Postgres refuses some (-17:03) in a literal
        odd = timezone(-timedelta(hours=17, minutes=3))
        assert past.profile(models, user, before_move.astimezone(odd)) == past.profile(models, user, before_move)
        assert past.memories(models, user, datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))) == []
    finally:
        models.close()


def test_the_services_read_the_past_without_a_replay(settings, client, pipeline, monkeypatch):
    """Through the services (what HTTP, MCP and the CLI call): no replay runs where the versions hold
    the past: the replay functions are made to fail, and the answers still come."""
    from services.access import OPERATOR
    from services.backend import Backend
    from services import memories as memories_service, profile as profile_service, recall as recall_service
    import replay.timetravel as tt

    user = unique_user("asofsvc")
    t1, t2 = START, START + timedelta(days=10)
    client.record_turn(user, "s1", "user", "I live in Oslo", at=t1)
    token = client.record_turn(user, "s1", "user", "I moved to Bergen", at=t2).token()

    def no_replay(*a, **k):
        raise AssertionError("an as-of read replayed the log although the versions hold the past")
    for name in ("profile_as_of", "recall_as_of", "memories_as_of"):
        monkeypatch.setattr(tt, name, no_replay)
    caller = OPERATOR
    with Backend(settings) as backend:
        wait_until_applied(backend.models, token, ("pgvector-items", "kv-preferences"), timeout=120)
        between = t1 + timedelta(days=5)

        async def reads():
            prof = await profile_service.profile(backend, caller, user, as_of=between)
            hits = await recall_service.recall(backend, caller, user, "where do I live?", channel="test", as_of=between)
            mems = await memories_service.listed(backend, caller, user, as_of=between)
            return prof, hits, mems
        prof, hits, mems = asyncio.run(reads())
    assert prof["preferences"]["location"]["value"] == "Oslo"
    assert hits and hits[0].content == "User lives in Oslo"
    assert [m["content"] for m in mems] == ["User lives in Oslo"]


def test_versions_keep_every_column_of_a_memory_but_its_index_flag(settings, pipeline):
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        def columns(table: str) -> set[str]:
            return {r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                               "AND table_name = %s", (settings.namespace, table))}
        items, versions = columns("memory_items"), columns("memory_item_versions")
    assert items - {"ann"} == set(VERSIONED_COLUMNS), "a column added to memory_items must be versioned too"
    assert versions == set(VERSIONED_COLUMNS) | {"seq", "valid_from", "change_id"}


def test_versions_begun_beside_older_memories_are_a_gap_until_a_rebuild(settings):
    """A namespace projected before the versions existed does not hold the past in them: it is noted
    (memory_history_gaps), and as-of reads replay there; a fresh namespace has no gap."""
    ns = settings.model_copy(update={"namespace": settings.namespace + "_gap" + unique_user("")[-6:].lower()})
    pg.ensure_schema(ns)
    s = sql.Identifier(ns.namespace)
    models = ReadModels(ns, pool_size=1)
    try:
        assert past.history_complete(models)
        with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE {s}.memory_item_versions, {s}.memory_history_gaps").format(s=s))
            conn.execute(sql.SQL("INSERT INTO {s}.memory_items (memory_id, user_id, content, category, importance, embedding, "
                                 "event_id, created_at, updated_at) VALUES ('m1', 'u1', 'x', 'fact', 0.5, %s, 'e1', now(), now())")
                         .format(s=s), ([0.1] * settings.embed_dim,))
        pg.ensure_schema(ns)     # what the next start of an upgraded process does
        assert not past.history_complete(models)
    finally:
        models.close()
        with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {s} CASCADE").format(s=s))
