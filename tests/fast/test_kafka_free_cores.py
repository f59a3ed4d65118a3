"""The stream cores take decoded envelopes and return events: no Kafka client, raw record or
partitioner inside (issue 29). Their drivers — the faust agents, what-if, the fast tier's
in-memory pipeline — read, route and decode (streams/routing.py, streams/app.py)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORES = ("streams/memory_core.py", "streams/session_core.py", "streams/extraction_core.py")
# Kafka clients and faust, and the modules that handle raw records and partitions for the drivers.
FORBIDDEN = ("faust", "mode", "aiokafka", "confluent_kafka", "kafka", "streams.app", "streams.faust_adapter",
             "streams.routing", "schemas.records", "schemas.peek", "adapters.bus")


def imported(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("core", CORES)
def test_a_core_imports_no_kafka_client_and_no_record_handling(core):
    bad = sorted(m for m in imported(ROOT / core) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert bad == [], f"{core} imports {bad}: routing and decoding belong to its drivers"
