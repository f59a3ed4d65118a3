"""Decision provenance: the rules profile, its hash on every decision, and the memory worker's
start-up gate (a worker under other rules refuses to join, unless told to roll over).

On the real stack (a private namespace each, except the end-to-end check of the shared pipeline's
decisions); the profile and its hash in-process: tests/fast/test_rules_profile_core.py."""
from __future__ import annotations

import io
import os
import re
import time
import uuid

import orjson
import pytest

from kernel.config import Settings, get_settings
from domain.memory_state import Rules
from domain.rules_profile import ProfileMismatch, profile_hash, profile_of, rules_hash
from tests.fast.inmemory import KeyRing


# -- the gate, on the real stack -----------------------------------------------------------------

def _private(tag: str) -> Settings:
    """A namespace of its own on the shared stack: its memory topic's profiles are this test's alone."""
    from adapters.bus import ensure_topics
    from projections import pg
    s = get_settings().model_copy(update={"namespace": f"{os.environ['MEMSTREAM_TEST_NAMESPACE']}_{tag}{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    return s


def _governing(s: Settings) -> dict[int, str | None]:
    from streams.rules_gate import _reader, read_partition
    with _reader(s) as r:
        topic = s.topic("memory")
        return {p: read_partition(r, topic, p, *r.watermarks((topic, p))).governing for p in range(s.partitions)}


@pytest.mark.stack
def test_the_gate_adopts_refuses_and_rolls_over(stack):
    from streams.rules_gate import check_profile
    s = _private("rg")
    keys = KeyRing()
    default = profile_of(Rules.from_settings(s))
    loose = profile_of(Rules.from_settings(s.model_copy(update={"dedup_threshold": 0.9})))
    # 1. an empty memory topic: every partition adopts the profile (its full settings in the log)
    first = check_profile(s, default, keys)
    assert first.adopted == list(range(s.partitions)) and first.rolled_over == {}
    assert set(_governing(s).values()) == {profile_hash(default)}
    # 2. the same profile again: nothing to write
    assert check_profile(s, default, keys).adopted == []
    # 3. another dedup threshold: refused, naming the variable with both values
    with pytest.raises(ProfileMismatch) as err:
        check_profile(s, loose, keys)
    text = str(err.value)
    assert f"MEMSTREAM_DEDUP_THRESHOLD {default['dedup_threshold']} → 0.9" in text
    assert profile_hash(default) in text and profile_hash(loose) in text and "MEMSTREAM_RULES_ROLLOVER=1" in text
    assert err.value.exit_code == 2
    # 4. told to roll over: it adopts, naming what it replaced; from then on its profile governs
    rolled = check_profile(s, loose, keys, rollover=True)
    assert rolled.rolled_over == {p: profile_hash(default) for p in range(s.partitions)}
    assert set(_governing(s).values()) == {profile_hash(loose)}
    assert check_profile(s, loose, keys).adopted == []
    with pytest.raises(ProfileMismatch, match=r"MEMSTREAM_DEDUP_THRESHOLD 0.9 → "):
        check_profile(s, default, keys)


@pytest.mark.stack
def test_a_memory_worker_under_other_rules_refuses_and_is_not_restarted_and_starts_with_rollover(stack):
    """Real worker processes: the refusal is exit 2 with the setting named, the supervisor holds it;
    with MEMSTREAM_RULES_ROLLOVER=1 the same worker starts."""
    from memstream.app.workers import Supervisor, worker_command, worker_env
    from adapters.resilience import health_file
    from streams.rules_gate import check_profile
    from tests.helpers import wait_for
    s = _private("rw")
    check_profile(s, profile_of(Rules.from_settings(s)), KeyRing())   # decisions so far: the defaults
    env = {"MEMSTREAM_DEDUP_THRESHOLD": "0.9", "MEMSTREAM_METRICS_PORT": "0"}
    out = io.StringIO()
    sup = Supervisor(s, names=("memory",), env=env, log_dir=s.stack_dir / "logs", out=out)
    sup.start("memory")
    proc = sup.procs["memory"]
    try:
        wait_for(lambda: proc.poll() is not None, timeout=120, what="the worker to refuse")
        assert proc.returncode == 2
        for _ in range(10):   # several rounds, past the first restart's backoff (1 s)
            sup.check()
            time.sleep(0.2)
        assert sup.procs["memory"] is proc and sup.restarts["memory"] == 0
        assert "MEMSTREAM_DEDUP_THRESHOLD" in sup.held["memory"] and "refused to start" in out.getvalue()
        log = sup.log_path("memory").read_text()
        assert re.search(r"memstream: memory worker refused to start.*MEMSTREAM_DEDUP_THRESHOLD \S+ → 0\.9", log)
        assert "Traceback" not in log
        health = orjson.loads(health_file(s, "memory").read_bytes())
        assert health["components"]["memory"]["state"] == "refused"
    finally:
        sup.stop()
    # with rollover: it gets past the gate and decides under its profile from now on
    loose = profile_hash(profile_of(Rules.from_settings(s.model_copy(update={"dedup_threshold": 0.9}))))
    import subprocess
    log_path = s.stack_dir / "logs" / f"{s.namespace}-memory-rollover.log"
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(worker_command("memory"), env=worker_env(s, {**env, "MEMSTREAM_RULES_ROLLOVER": "1"}),
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: proc.poll() is not None or f"deciding under rules profile {loose}" in log_path.read_text(),
                 timeout=120, what="the rolled-over worker to start")
        assert proc.poll() is None, log_path.read_text()[-2000:]
        assert set(_governing(s).values()) == {loose}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.stack
def test_the_pipelines_decisions_carry_its_profile_and_a_worker_under_other_rules_refuses_to_join(settings, pipeline,
                                                                                                  client):
    """The shared namespace: its memory worker's decisions carry the hash; a second memory worker
    with another dedup threshold refuses to join the same group (and leaves it undisturbed)."""
    import subprocess
    from memstream.app.workers import worker_command, worker_env
    from streams.routing import partition_of
    from streams.rules_gate import _backwards, _reader
    from tests.helpers import unique_user, wait_for
    mine = rules_hash(Rules.from_settings(settings))
    user = unique_user("prov")
    client.record_turn(user, "s", "user", "I live in Provenance Town")
    topic, p = settings.topic("memory"), partition_of(user.encode(), settings.partitions)

    def decisions():
        with _reader(settings) as reader:
            low, high = reader.watermarks((topic, p))
            return [r for r in _backwards(reader, topic, p, low, high) if r.get("user") == user]
    found = wait_for(lambda: [r for r in decisions() if r["type"] == "memory.created"], timeout=90,
                     what="the user's memory.created")
    assert {r["data"]["rules_profile"] for r in decisions()} == {mine}

    env = worker_env(settings, {"MEMSTREAM_DEDUP_THRESHOLD": str(settings.dedup_threshold / 2),
                                "MEMSTREAM_METRICS_PORT": "0", "MEMSTREAM_INSTANCE": "2"})
    done = subprocess.run(worker_command("memory"), env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "MEMSTREAM_DEDUP_THRESHOLD" in done.stderr and f"→ {settings.dedup_threshold / 2}" in done.stderr
    assert "Traceback" not in done.stderr
    assert found
