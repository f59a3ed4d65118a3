"""The fast tier: no Kafka, no Postgres, no Neo4j.

Two guards keep it honest, beside the collection check in tests/conftest.py (a fast test whose
fixtures include `stack`, `settings`, `pipeline`… is a usage error):

- the service fixtures are overridden here with ones that fail, so a fast test reaching one some
  other way (request.getfixturevalue) fails at set-up instead of bringing the stack up;
- a tripwire: during every fast test the settings point Kafka, Postgres and Neo4j at a listener of
  this process (MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS, _PG_PORT, _NEO4J_BOLT_PORT, also inherited by the
  subprocesses a test starts), and a test during which anything connected to it fails. A port
  rather than a patched socket module: librdkafka and libpq connect from C.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from kernel.config import get_settings


class Tripwire:
    """A TCP listener that counts the connections it accepts and closes them at once."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.peers: list[int] = []       # the client ports of the connections accepted, in order
        self.own: set[int] = set()       # ours, from settled()
        threading.Thread(target=self._accept, name="fast-tier-tripwire", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self.peers.append(peer[1])
            conn.close()

    def settled(self) -> int:
        """How many connections others made so far: connects once itself and waits until that one
        is accepted, so every earlier one (accepted in order) is counted, and leaves its own out."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as mine:
            port = mine.getsockname()[1]
        self.own.add(port)
        deadline = time.monotonic() + 5
        while port not in self.peers and time.monotonic() < deadline:
            time.sleep(0.001)
        return sum(1 for p in list(self.peers) if p not in self.own)


@pytest.fixture(scope="session")
def tripwire():
    wire = Tripwire()
    yield wire
    wire.sock.close()


@pytest.fixture(autouse=True)
def no_services(tripwire, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{tripwire.port}")
    monkeypatch.setenv("MEMSTREAM_KAFKA_BROKERS", "1")
    monkeypatch.setenv("MEMSTREAM_PG_PORT", str(tripwire.port))
    monkeypatch.setenv("MEMSTREAM_NEO4J_BOLT_PORT", str(tripwire.port))
    get_settings.cache_clear()
    before = tripwire.settled()
    yield
    get_settings.cache_clear()
    after = tripwire.settled()
    assert after == before, (
        f"a fast test connected to a store ({after - before} connection(s) to Kafka/Postgres/Neo4j's "
        "address): it belongs in the stack tier (tests/, not tests/fast/)")


def _refuse(name: str):
    @pytest.fixture(name=name, scope="session")
    def refused():
        pytest.fail(f"a fast test (tests/fast/) asked for `{name}`, which needs the real stack: "
                    "move it to the stack tier", pytrace=False)
    return refused


stack = _refuse("stack")
settings = _refuse("settings")
admin_key = _refuse("admin_key")
keys = _refuse("keys")
client = _refuse("client")
pipeline = _refuse("pipeline")
