"""Neo4j with auth (adapters/neo4j_auth.py, memstream/stack/files/neo4j/Launcher.java): the local
Neo4j refuses a client without credentials or with a wrong password, lets in the configured user,
and the password `stack up` made is a 0600 file that is never on the launcher's command line, in
its log, or in `memstream config`."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError

from adapters import neo4j_auth
from memstream.stack.neo4j import Neo4j

pytestmark = [pytest.mark.stack, pytest.mark.timeout(120)]


def connect(settings, auth) -> None:
    with GraphDatabase.driver(settings.neo4j_uri, auth=auth, connection_timeout=5) as driver:
        driver.verify_connectivity()
        driver.execute_query("RETURN 1")


def test_a_client_without_credentials_is_refused(settings):
    with pytest.raises(AuthError):
        connect(settings, None)


def test_a_wrong_password_is_refused(settings):
    # One failed attempt only: three in a row lock the user out for a few seconds (Neo4j's
    # dbms.security.auth_max_failed_attempts), which the tests running alongside would feel.
    with pytest.raises(AuthError):
        connect(settings, (settings.neo4j_user, "not-" + neo4j_auth.password(settings)))


def test_a_user_that_does_not_exist_is_refused(settings):
    with pytest.raises(AuthError):
        connect(settings, ("memstream-nobody", neo4j_auth.password(settings)))


def test_the_configured_credentials_work_and_the_stack_sees_them_current(settings):
    with neo4j_auth.driver(settings, connection_timeout=5) as driver:
        records, _, _ = driver.execute_query("RETURN 41 + 1 AS n")
        assert records[0]["n"] == 42
        users, _, _ = driver.execute_query("SHOW CURRENT USER YIELD user, passwordChangeRequired", database_="system")
        assert users[0]["user"] == settings.neo4j_user and users[0]["passwordChangeRequired"] is False
    svc = Neo4j(settings)
    assert svc.probe() and not svc.outdated()    # `stack up` would leave it running as it is


def test_the_password_file_is_private_and_never_shown(settings):
    if settings.neo4j_password is not None:
        pytest.skip("the password comes from MEMSTREAM_NEO4J_PASSWORD here")
    path = neo4j_auth.password_file(settings)
    assert path.stat().st_mode & 0o777 == 0o600
    pw = neo4j_auth.password(settings)
    assert len(pw) >= 32
    svc = Neo4j(settings)
    pid = svc.pid()
    assert pid is not None
    argv = open(f"/proc/{pid}/cmdline", "rb").read()
    assert pw.encode() not in argv                    # ps shows argv to every user
    assert pw not in svc.log_file.read_text(errors="replace")
    debug_log = svc.layout.logs / "neo4j" / "debug.log"
    if debug_log.exists():
        assert pw not in debug_log.read_text(errors="replace")
    # `memstream config` masks a password given as a setting, and never reads the file's
    shown = subprocess.run([sys.executable, "-m", "memstream.app.cli", "config"], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "MEMSTREAM_NEO4J_PASSWORD": "given-" + pw})
    assert shown.returncode == 0, shown.stderr
    assert pw not in shown.stdout + shown.stderr
    assert "neo4j_user" in shown.stdout
