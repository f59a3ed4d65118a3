"""Memory keeps what it is given, offline: a new user's first turn, through the CLI as a person
would type it, against the real pipeline (no LLM configured)."""
from __future__ import annotations

import os
import subprocess

import orjson

from memstream.app.workers import worker_command
from tests.helpers import unique_user

NURSE = ("Hi! I'm a nurse and I work night shifts. I'm allergic to peanuts. "
         "Last week I adopted a cat named Miso.")


def cli(settings, *args) -> bytes:
    done = subprocess.run(worker_command("x")[:3] + list(args), capture_output=True, timeout=180,
                          env={**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace})
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


def test_the_nurse_turn_is_remembered_whole(settings, pipeline):
    user = unique_user("nurse")
    token = cli(settings, "publish", "turn", "--user", user, "--session", "s1", "--role", "user",
                "--text", NURSE).decode().strip()

    def recall(query: str) -> list[dict]:
        return orjson.loads(cli(settings, "recall", "--user", user, "--query", query, "--after", token, "--json"))

    pets = recall("what pet does the user have?")
    assert pets and "cat" in pets[0]["content"] and "Miso" in pets[0]["content"], pets
    work = recall("what does the user do for work?")
    assert work and ("nurse" in work[0]["content"] or "night shift" in work[0]["content"]), work
    allergy = [h for h in recall("what is the user allergic to?") if "peanut" in h["content"]]
    assert allergy and allergy[0]["category"] == "policy", allergy     # the allergy stays a constraint
