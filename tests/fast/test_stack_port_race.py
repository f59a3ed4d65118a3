"""`stack up` survives a port briefly held by a client socket (a first-run failure on a busy machine).

Postgres' default port 55432 lies in Linux's ephemeral range, so any outgoing connection may be
given it as its source port for a moment; the check before the start sees only listeners, and the
server then exits with "Address already in use". Here a real client socket holds a real port while
a real server process starts on it: `up`'s wait must start it again once the port is free.
"""
from __future__ import annotations

import socket
import sys
import threading
import time

from kernel.config import Settings
from memstream.stack import services
from memstream.stack.base import Service
from memstream.stack.process import Layout

SERVER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError as e:
    print("could not bind:", e, flush=True)
    sys.exit(1)
s.listen()
while True:
    c, _ = s.accept(); c.close()
"""


class TinyServer(Service):
    name = "tiny"

    def __init__(self, settings: Settings, port: int):
        super().__init__(settings)
        self.port = port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def ports(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", self.port)]

    def markers(self) -> list[str]:
        return [str(self.port)]

    def argv(self) -> list[str]:
        return [sys.executable, "-c", SERVER, str(self.port)]

    def probe(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False


def _client_socket_holding_a_port() -> tuple[socket.socket, socket.socket, int]:
    """A connected client socket whose source port is then the port the server wants."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.socket()
    client.bind(("127.0.0.1", 0))             # no SO_REUSEADDR: as a kernel-chosen source port
    client.connect(listener.getsockname())
    return client, listener, client.getsockname()[1]


def test_a_server_that_lost_its_port_to_a_client_socket_is_started_again(tmp_path, capsys):
    settings = Settings(stack_dir=tmp_path)
    Layout.of(settings).logs.mkdir(parents=True, exist_ok=True)
    client, listener, port = _client_socket_holding_a_port()
    svc = TinyServer(settings, port)
    proc = svc.start()
    threading.Timer(1.0, lambda: (client.close(), listener.close())).start()
    try:
        services._wait_started(svc, proc, time.monotonic() + 60, 60)
        assert svc.probe()
        log = svc.log_file.read_text()
        assert "could not bind" in log, "the first start should have met the held port"
        assert "starting again" in capsys.readouterr().out
    finally:
        svc.stop()


def test_a_real_failure_is_still_reported(tmp_path):
    """An exit for any other reason is not retried."""
    settings = Settings(stack_dir=tmp_path)
    Layout.of(settings).logs.mkdir(parents=True, exist_ok=True)

    class Crashing(TinyServer):
        def argv(self) -> list[str]:
            return [sys.executable, "-c", "raise SystemExit('bad config')"]

    svc = Crashing(settings, 1)
    proc = svc.start()
    try:
        services._wait_started(svc, proc, time.monotonic() + 30, 30)
    except services.StackError as e:
        assert not isinstance(e, services._PortRaced)
        assert "exited during start-up" in str(e)
    else:
        raise AssertionError("a crashing server was reported healthy")
