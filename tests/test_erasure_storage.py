"""Erasure reaches storage (memstream/app/storage_scrub.py): a user keeps publishing while being
erased; afterwards no file of the stack holds their plaintext or their deleted data key.

The files are read as bytes: every file of Postgres' data directory (heap, indexes, statistics,
WAL, both databases), of Neo4j's (store files and transaction logs), the Kafka log directories of
this namespace's topics (sealed payloads only), the faust state of this namespace and every
service and worker log."""
from __future__ import annotations

import mmap
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from adapters import neo4j_auth
from memstream.app.storage_scrub import scrub_storage
from adapters.erasure import erase_user
from projections.queries import memories, preferences, session_window, task_status, task_steps
from tests.helpers import KeepsPublishing, unique_user, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


def graph_nodes(settings, user) -> int:
    with neo4j_auth.driver(settings) as driver, driver.session() as s:
        return s.run("MATCH (m:Memory {ns: $ns, user: $u}) RETURN count(m) AS n", ns=settings.namespace, u=user).single()["n"]


def wrapped_key(settings, user) -> bytes:
    with psycopg.connect(settings.pg_dsn(settings.pg_keys_database)) as conn:
        row = conn.execute(sql.SQL("SELECT wrapped FROM {}.user_keys WHERE user_id = %s").format(
            sql.Identifier(settings.log_namespace)), (user,)).fetchone()
    assert row is not None
    return bytes(row[0])


def files_under(*roots: Path):
    for root in roots:
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def holders(paths, needles: list[bytes]) -> tuple[list[tuple[str, int]], int, int]:
    """([(file, which needle)] for every file holding one, files read, bytes read)."""
    found, n_files, n_bytes = [], 0, 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                if not size:
                    continue
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    n_files, n_bytes = n_files + 1, n_bytes + size
                    found += [(str(path), i) for i, needle in enumerate(needles) if m.find(needle) != -1]
        except (FileNotFoundError, PermissionError, ValueError):   # unlinked meanwhile / a socket or the like
            continue
    return found, n_files, n_bytes


def extractor_dropped(settings) -> int:
    from adapters.resilience import read_health
    return read_health(settings).get("extractor", {}).get("components", {}).get("extractor", {}).get("dropped_erased", 0)


def entity_names(settings, user: str) -> str:
    """The user's entity names in pg-relations, lower-cased and joined (names keep their case there)."""
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT name FROM {}.entities WHERE user_id = %s AND name IS NOT NULL")
                            .format(sql.Identifier(settings.namespace)), (user,)).fetchall()
    return " ".join(r[0].lower() for r in rows)


def test_erase_while_publishing_leaves_no_plaintext_on_disk(settings, client, keys, pipeline):
    from schemas.codec import encode, make_envelope
    from schemas.events import TurnRecorded

    user = unique_user("shred")
    # letters only: a name ("My sister is called Vorpalsnark…") is read up to its first digit
    canary = "vorpalsnark" + uuid.uuid4().hex[:12].translate(str.maketrans("0123456789", "ghijklmnop"))
    # 1. The user's content reaches every read model: memories (pgvector + graph), preferences,
    #    the session window, a task buffer.
    client.record_turn(user, "s1", "user", f"My name is {canary}.")
    client.record_turn(user, "s1", "user", f"I live in {canary}ville.")
    client.record_turn(user, "s1", "user", f"I like {canary} tea")
    client.start_task(user, "t1", goal=f"book a table at {canary} bistro")
    client.record_step(user, "t1", f"called {canary} bistro")
    # relational memory (#26): an entity name and a relation's evidence in pg-relations
    client.record_turn(user, "s1", "user", f"My sister is called {canary.capitalize()}.")
    wait_for(lambda: len(memories(settings, user)) >= 3 and preferences(settings, user)
             and len(session_window(settings, user, "s1")) >= 4 and task_steps(settings, user, "t1")
             and graph_nodes(settings, user) >= 3 and canary in entity_names(settings, user),
             what="the user's content in every read model")
    assert any(canary in m["content"] for m in memories(settings, user))
    key_bytes = wrapped_key(settings, user)
    baseline = extractor_dropped(settings)
    # sealed before the erasure, produced after it: events in flight
    in_flight = [encode(make_envelope(TurnRecorded(session="s1", role="user", content=f"I like {canary} number {i}"),
                                      user=user), keys) for i in range(5)]

    # 2. The user keeps publishing (another process's client: its own key cache) while being erased.
    with KeepsPublishing(settings, user, "s2", f"I live in {canary}town{{i}}") as publisher:
        wait_for(lambda: len(publisher.published) >= 10, what="the user publishing")
        position = erase_user(settings, user, requested_by="test")
        for raw in in_flight:
            client._producer.send(settings.topic("turns"), user, raw).result(10)
        t = time.monotonic()
        report = scrub_storage(settings, after=position, wait_s=120)
        scrub_s = time.monotonic() - t
        wait_for(lambda: len(publisher.refused) >= 10, timeout=10, what="the SDK to refuse the erased user")
    published, refused = publisher.published, publisher.refused
    print(f"\nscrub {scrub_s:.1f} s: {report.as_dict()}")
    assert report.complete, report.gaps
    assert report.rewrite["swapped"] and report.wal["older_than_redo_left"] == 0

    # 3. Their later events are dropped, and counted: the SDK refuses to seal for them, and the
    #    extractor drops the ones sealed before the erasure that arrive after it.
    wait_for(lambda: extractor_dropped(settings) - baseline >= len(in_flight), what="the extractor's dropped_erased count")
    dropped = len(refused) + extractor_dropped(settings) - baseline
    assert dropped >= 10 + len(in_flight)
    print(f"later events dropped: {len(refused)} refused by the SDK, {extractor_dropped(settings) - baseline} "
          f"dropped by the extractor; {len(published)} published before the erasure")
    # ... and none is projected, in any read model
    keep = unique_user("shred-keep")
    client.record_turn(keep, "s1", "user", "I live in Elsewhere.")   # the pipeline moves on, past the erased user's events
    client.flush()
    wait_for(lambda: memories(settings, keep), what="a later user's turn projected")
    assert not memories(settings, user) and not preferences(settings, user) and graph_nodes(settings, user) == 0
    assert not session_window(settings, user, "s1") and not session_window(settings, user, "s2")
    assert not task_steps(settings, user, "t1") and task_status(settings, user, "t1") is None

    # 4. No file holds the plaintext (the canary, whatever case its first letter took) or the key.
    data = settings.stack_dir / "data"
    needles = [canary[1:].encode(), key_bytes]
    roots = [data / "postgres", data / "neo4j", *sorted((data / "kafka").glob(f"*{settings.namespace}*")),
             settings.stack_dir / "faust" / settings.namespace, settings.stack_dir / "logs"]
    t = time.monotonic()
    found, n_files, n_bytes = holders(files_under(*roots), needles)
    print(f"grepped {n_files} files, {n_bytes / 2**20:.0f} MiB in {time.monotonic() - t:.1f} s")
    assert not found, [(path, ("plaintext", "deleted key")[i]) for path, i in found]
    # the search does find what is there: the canary is in the log, sealed, and in no file as plaintext;
    # a bystander's plaintext still sits in Postgres' files
    bystander, marker = unique_user("shred-by"), "jabberwock" + uuid.uuid4().hex[:12]
    client.record_turn(bystander, "s1", "user", f"I like {marker} tea")
    wait_for(lambda: memories(settings, bystander), what="the bystander's memory")
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    found, _, _ = holders(files_under(data / "postgres"), [marker[1:].encode()])
    assert found, "the search must see plaintext that is there"


def test_the_erase_command_scrubs_storage_and_the_scrub_is_idempotent(settings, client, pipeline, capsys):
    import orjson

    from memstream.app.cli import main

    user = unique_user("shred-cli")
    client.record_turn(user, "s1", "user", "I like marmalade")
    wait_for(lambda: memories(settings, user), what="the user's memory")
    assert main(["erase", "user", user, "--by", "test", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["user"] == user and out["scrub"]["complete"] and out["scrub"]["rewrite"]["swapped"], out
    assert not memories(settings, user) and not session_window(settings, user, "s1")
    # the scrub alone, again: nothing left to wait for, rewrites again, finds no old WAL to keep
    assert main(["erase", "scrub", "--after", out["token"]]) == 0
    assert "storage scrubbed" in capsys.readouterr().out


def test_an_erasure_over_http_is_followed_by_the_pipelines_scrub(settings, client, pipeline, admin_key):
    """The API answers 202 and files the scrub; the projectors' process runs it (as the owner,
    which the API does not need) and records the report with the request."""
    from fastapi.testclient import TestClient

    from adapters.bus import Position
    from memstream.app.api import create_app
    from memstream.app.storage_scrub import scrub_report

    user = unique_user("shred-api")
    client.record_turn(user, "s1", "user", "I like quince jelly")
    wait_for(lambda: memories(settings, user), what="the user's memory")
    app = create_app(settings)
    with TestClient(app) as http:
        resp = http.delete(f"/v1/users/{user}", headers={"Authorization": f"Bearer {admin_key}"})
        assert resp.status_code == 202, resp.text       # answered before the scrub, which follows
    position = Position.parse(resp.json()["token"])
    report = wait_for(lambda: scrub_report(settings, position), timeout=300, what="the pipeline's scrub")
    assert report["complete"] and report["rewrite"]["swapped"], report
    assert not memories(settings, user) and not session_window(settings, user, "s1")
