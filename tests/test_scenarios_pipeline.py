"""The scenario suite (#30) on the real stack: a few scenarios of tests/fixtures/scenarios pushed
through the CLI as a person would type them, then profile and context read back from Postgres.
What the pure suite (tests/fast/test_scenarios.py) decides must be what the agent is handed: the
current value of every slot, and no superseded state served as current (law 8)."""
from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone

import orjson

from bench.scenarios import load
from memstream.app.workers import worker_command
from tests.helpers import unique_user

SCENARIOS = ("en-move-and-new-job", "en-taste-change", "mixed-intro-job-family-diet", "zh-move-job-taste")


def cli(settings, *args) -> bytes:
    done = subprocess.run(worker_command("x")[:3] + list(args), capture_output=True, timeout=180,
                          env={**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace})
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


def _shifted(turns: list[dict]) -> list[tuple[dict, datetime]]:
    """The scenario's times moved so its last turn is a minute ago (the API takes no future times)."""
    times = [datetime.fromisoformat(str(t["at"]).replace("Z", "+00:00")) for t in turns]
    delta = datetime.now(timezone.utc) - timedelta(minutes=1) - max(times)
    return [(t, at + delta) for t, at in zip(turns, times)]


def test_profile_and_context_serve_only_current_states(settings, pipeline):
    by_id = {s["id"]: s for s in load()}
    for sid in SCENARIOS:
        scenario = by_id[sid]
        user = unique_user("scn")
        token = None
        for turn, at in _shifted(scenario["turns"]):
            token = cli(settings, "publish", "turn", "--user", user, "--session", "s1", "--role",
                        turn.get("role", "user"), "--text", turn["text"], "--at", at.isoformat()).decode().strip()
        profile = orjson.loads(cli(settings, "profile", "--user", user, "--after", token, "--json"))
        prefs = {k: v["value"] for k, v in profile["preferences"].items()}
        exp = scenario["expect"]
        for key, value in exp.get("current", {}).items():
            assert str(prefs.get(key, "")).lower() == str(value).lower(), (sid, key, prefs)
        served = [m["content"] for c in ("identity", "preference", "policy") for m in profile[c]]
        stale = [f for f in exp.get("not_current", []) if "=" not in f]
        assert not [f for f in stale if any(f.lower() in c.lower() for c in served)], (sid, served)
        for qa in exp.get("answers", [])[:1]:
            ctx = orjson.loads(cli(settings, "context", "--user", user, "--query", qa["q"], "--after", token,
                                   "--json"))
            text = ctx["text"]
            assert qa["a"].lower() in text.lower(), (sid, text)
            assert not [f for f in stale if f.lower() in text.lower()], (sid, text)
