"""No serving request connects to Postgres as the database owner (#28 item 2).

Every connection names its role and process in pg_stat_activity (`application_name`
memstream:<role>:<pid>, kernel/config.py). The API runs in this process (TestClient); a watcher
samples pg_stat_activity every few milliseconds while the audit routes, as-of reads (recall,
profile, preferences, memories: each replays the user's history into a throw-away schema) and an
erasure are served, and until the storage scrub that follows the erasure is done (the pipeline's
projectors run it: the API only asks), and counts the owner sessions of this process."""
from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from fastapi.testclient import TestClient

from adapters.bus import Position
from memstream.app.storage_scrub import scrub_report
from projections.queries import memories, preferences
from tests.helpers import unique_user, wait_for


class OwnerWatch:
    """Samples this process's owner sessions in pg_stat_activity until stopped."""

    def __init__(self, settings):
        # as the owner, to see what the sessions run; named apart from the process it watches
        self.conn = psycopg.connect(settings.pg_dsn() + " application_name=memstream-test-watch", autocommit=True)
        self.name = f"memstream:owner:{os.getpid()}"
        self.seen: list[tuple[str | None, str | None]] = []
        self.samples = 0
        # owner sessions this process held before the watch (another test's key store, e.g. `keys
        # rotate`'s, keeps its erasure listener open for the process's life): not the requests' work
        # as long as they stay as they were (a request that used one would change its state or query)
        self.before = {r[0]: (r[1], r[2]) for r in self.conn.execute(
            "SELECT pid, state, left(query, 120) FROM pg_stat_activity WHERE application_name = %s", (self.name,)).fetchall()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rows = self.conn.execute("SELECT pid, state, left(query, 120) FROM pg_stat_activity WHERE application_name = %s",
                                     (self.name,)).fetchall()
            self.seen += [(state, query) for pid, state, query in rows if self.before.get(pid) != (state, query)]
            self.samples += 1
            time.sleep(0.003)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self.conn.close()


@pytest.mark.timeout(600)
def test_audit_as_of_and_erasure_requests_make_no_owner_connection(settings, client, pipeline, admin_key):
    from memstream.app.api import create_app

    user = unique_user("leastpriv")
    t0 = datetime.now(UTC) - timedelta(hours=2)
    client.record_turn(user, "s1", "user", "I live in Lisbon.", at=t0)
    client.record_turn(user, "s1", "user", "I moved to Porto.", at=t0 + timedelta(hours=1))
    wait_for(lambda: len(memories(settings, user)) == 2 and preferences(settings, user), what=f"{user} projected")
    between = (t0 + timedelta(minutes=30)).isoformat()
    auth = {"Authorization": f"Bearer {admin_key}"}
    app = create_app(settings)
    with TestClient(app) as http:
        # warm-up outside the watch: what a process does once at start (its key store's DDL, the
        # pools) is not a request's work
        assert http.get(f"/v1/users/{user}/preferences", headers=auth).status_code == 200
        mem_id = memories(settings, user)[0]["memory_id"]
        with OwnerWatch(settings) as watch:
            answers = {
                "audit user": http.get(f"/v1/audit/users/{user}", headers=auth),
                "audit memory": http.get(f"/v1/audit/memories/{mem_id}", headers=auth),
                "recall as of": http.post("/v1/recall", headers=auth,
                                          json={"user": user, "query": "where do I live?", "k": 3, "as_of": between}),
                "preferences as of": http.get(f"/v1/users/{user}/preferences", params={"as_of": between}, headers=auth),
                "profile as of": http.get(f"/v1/users/{user}/profile", params={"as_of": between}, headers=auth),
                "memories as of": http.get(f"/v1/users/{user}/memories", params={"as_of": between}, headers=auth),
            }
            for what, r in answers.items():
                assert r.status_code == 200, (what, r.status_code, r.text)
            assert "Lisbon" in str(answers["preferences as of"].json()) and "Porto" not in str(
                answers["preferences as of"].json()), "the as-of read answered from the past"
            erased = http.delete(f"/v1/users/{user}", headers=auth)
            assert erased.status_code == 202, erased.text
            # the scrub needs the owner: it runs in the pipeline's projectors process, not here
            report = wait_for(lambda: scrub_report(settings, Position.parse(erased.json()["token"])), timeout=300,
                              what="the pipeline's storage scrub")
            assert report["complete"], report
    assert watch.samples > 20, "the watcher sampled while the requests ran"
    assert watch.seen == [], f"owner sessions of the serving process: {watch.seen[:5]}"
