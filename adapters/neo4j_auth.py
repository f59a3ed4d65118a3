"""Who talks to Neo4j: one user, one password, one place that builds drivers.

The local Neo4j (memstream/stack/files/neo4j/Launcher.java) runs with auth enabled. Community
edition has no roles (RBAC is enterprise-only): every user can do everything, so there is one
user for the application, MEMSTREAM_NEO4J_USER (default neo4j), used by the graph projector,
the query layer, erasure, replay and the tests alike.

Password: MEMSTREAM_NEO4J_PASSWORD, else <stack_dir>/secrets/neo4j.password (made by
`stack up`, mode 0600, never printed). `stack up` hands the same value to the launcher in its
environment (never argv), and the launcher sets it for the user at every start.

Every driver is made by driver(settings, ...): the one place that knows the credentials.
"""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from kernel.config import Settings
from adapters.secret_files import read_secret, write_new_secret


def password_file(settings: Settings) -> Path:
    return settings.stack_dir / "secrets" / "neo4j.password"


def password(settings: Settings) -> str:
    """The application's Neo4j password: its setting, else the file `stack up` wrote. Never logged."""
    if settings.neo4j_password is not None:
        return settings.neo4j_password.get_secret_value()
    path = password_file(settings)
    return read_secret(path, f"no Neo4j password: set MEMSTREAM_NEO4J_PASSWORD "
                             f"or run `memstream stack up` to create {path}", "Neo4j password")


def auth(settings: Settings) -> tuple[str, str]:
    """(user, password) for neo4j's GraphDatabase.driver(auth=...)."""
    return settings.neo4j_user, password(settings)


def driver(settings: Settings, **kwargs: Any):
    """A driver for settings.neo4j_uri with the application's credentials; every site uses this."""
    from neo4j import GraphDatabase     # lazy: the CLI and the HTTP SDK do not need the driver
    # The server's notifications (e.g. "the label does not exist yet" before the first write, or a
    # deprecation) came back on every query and filled the projectors' log: filtered at the server.
    kwargs.setdefault("notifications_min_severity", "OFF")
    return GraphDatabase.driver(settings.neo4j_uri, auth=auth(settings), **kwargs)


def ensure_password(settings: Settings) -> str:
    """`stack up`: create the password file when no password is configured and none exists yet
    (O_EXCL, 0600: never readable by others, and two concurrent `up`s cannot both write one).
    Returns a status line, never the password."""
    if settings.neo4j_password is not None:
        return "from MEMSTREAM_NEO4J_PASSWORD"
    # 43 characters, well over Neo4j's minimum of 8
    return "created" if write_new_secret(password_file(settings), secrets.token_urlsafe(32) + "\n") else "present"
