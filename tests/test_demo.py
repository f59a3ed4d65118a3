"""`memstream demo` (what `./dev demo` runs after installing): the whole pipeline on a fresh namespace
with a short conversation, and an output made for people — what it waits on, what memory learned,
and no line from librdkafka, faust, Java or the Neo4j driver (real stack)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.timeout(600)

# What leaked into the demo's output before: a raw librdkafka line ("%4|1796318926.502|GETPID|…"),
# faust/mode/aiokafka log records, a Java stack trace, Neo4j driver notifications, Python warnings.
NOISE = re.compile(r"^%\d\||rdkafka|\bfaust\b|\baiokafka\b|\bmode\.|Exception in thread|^\s+at [a-z]+\.[\w.$]+\(|"
                   r"neo4j\.notifications|GqlStatusObject|Received notification|Traceback|Warning:|WARNING|\x1b\[",
                   re.IGNORECASE | re.MULTILINE)


def test_the_demo_runs_on_a_fresh_namespace_and_prints_only_what_a_person_reads(settings):
    ns = f"{settings.namespace}_demo{uuid.uuid4().hex[:4]}"
    proc = subprocess.run([sys.executable, "-m", "memstream.app.cli", "demo"], capture_output=True, text=True,
                          timeout=560, env={**os.environ, "MEMSTREAM_NAMESPACE": ns})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "== what memory learned" in out and "location" in out and "Shanghai" in out, out[-4000:]
    noisy = [m.group(0) for m in NOISE.finditer(out)]
    assert not noisy, f"library noise in the demo's output: {noisy[:5]}\n{out[-4000:]}"
    assert out.count("java      ") <= 1, "the install block is printed at most once"
