"""`memstream init`: set up a namespace on Kafka, Postgres and Neo4j that are already running.

`memstream stack up` does this for the local stack it starts itself; `init` is the same set-up for
services someone else runs (docker-compose.yml's one-shot `init` service, a managed Postgres, a
Kafka cluster), found through the ordinary MEMSTREAM_* settings. It reuses the functions `stack up`
and `memstream keys` use, so both paths make the same things:

1. secrets      master keys, the Kafka principals', Postgres roles' and Neo4j's passwords: a
                setting wins; otherwise a 0600 file under <stack_dir>/secrets, made once (`stack up`'s
                ensure_* functions). The services must already know the passwords they check: in
                docker-compose.yml they come from `.env`, so only the master keys are made here.
2. postgres     every component's role logs in to the databases it uses (the roles themselves are
                the server's: memstream/stack/files/postgres/roles.sql), then the read models' tables.
3. kafka        the namespace's topics, state changelogs and ACLs (bus.ensure_topics, as the admin
                principal), then each principal logs in (a wrong password is named here, not as a
                worker's restart loop later).
4. neo4j        the application's user logs in.
5. api key      the local admin key (tenant default, every scope) in <stack_dir>/secrets/api.key,
                never printed (privacy/apikeys.ensure_local_admin_key).

Idempotent: a second run creates nothing and says "present". A service that does not answer is
retried until --wait runs out (compose starts init once its services are healthy, but a managed
service may still be starting), then named in one line (exit 2).
"""
from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

from kernel.config import Settings
from kernel.errors import ConfigError, MemstreamError
from adapters.resilience import Unavailable

T = TypeVar("T")
RETRY_EVERY_S = 1.0

# librdkafka's own log lines repeat, once per retry, what the one-line error already says.
_QUIET = logging.getLogger("memstream.init.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _until(deadline: float, what: str, attempt: Callable[[], T], transient: tuple[type[BaseException], ...]) -> T:
    """Call `attempt` until it succeeds or `deadline` passes; then Unavailable naming `what` and why."""
    while True:
        try:
            return attempt()
        except transient as exc:
            if time.monotonic() >= deadline:
                raise Unavailable(f"{what} did not answer in time: {_first_line(exc)}") from None
            time.sleep(RETRY_EVERY_S)


# -- 1. secrets ----------------------------------------------------------------------------------

def ensure_secrets(settings: Settings) -> dict[str, str]:
    from adapters import kafka_auth, neo4j_auth
    from adapters.privacy import decision_key, masterkeys, pgroles
    out = {"master keys": masterkeys.ensure_master_keys(settings),
           "decision key": decision_key.ensure(settings),
           "kafka passwords": kafka_auth.ensure_passwords(settings),
           "postgres passwords": pgroles.ensure_passwords(settings),
           "neo4j password": neo4j_auth.ensure_password(settings)}
    masterkeys.load_master_keys(settings)        # parses: a malformed MEMSTREAM_MASTER_KEYS is named now
    decision_key.require(settings)              # likewise MEMSTREAM_DECISION_KEY
    return out


# -- 2. postgres ---------------------------------------------------------------------------------

# (role, database) pairs every component needs, as `stack up` checks them (memstream/stack/postgres.py)
def _pg_logins(s: Settings) -> list[tuple[str, str]]:
    return [("owner", s.pg_database), ("owner", s.pg_keys_database), ("projector", s.pg_database),
            ("api", s.pg_database), ("api", s.pg_keys_database), ("keystore", s.pg_keys_database)]


def ensure_postgres(settings: Settings, deadline: float) -> str:
    import psycopg

    from adapters.privacy import pgroles
    from projections.pg import ensure_schema

    for role, db in _pg_logins(settings):
        def login(role: str = role, db: str = db) -> None:
            try:
                with psycopg.connect(settings.pg_dsn(db, role=role), connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
            except psycopg.OperationalError as exc:
                # A refused login will not heal by waiting: say so now, not after --wait.
                if any(m in str(exc) for m in ("password authentication failed", "does not exist")):
                    raise ConfigError(f"postgres: {pgroles.role_name(settings, role)}@{db} cannot log in "
                                      f"({_first_line(exc).rsplit(': ', 1)[-1]}); the roles and databases come from "
                                      f"memstream/stack/files/postgres/roles.sql with the passwords in "
                                      f"MEMSTREAM_PG_*PASSWORD") from None
                raise
        _until(deadline, f"postgres at {settings.pg_host}:{settings.pg_port}", login, (psycopg.OperationalError,))
    ensure_schema(settings)          # the read models' tables: the API answers before the projectors start
    return f"{len(_pg_logins(settings))} logins ok, read-model tables present"


# -- 3. kafka ------------------------------------------------------------------------------------

def _kafka_login(settings: Settings, principal, timeout: float) -> None:
    """One metadata request as `principal`: succeeds only after its SASL/SCRAM login."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    from adapters.kafka_auth import kafka_config, username
    errors: list = []
    client = AdminClient({**kafka_config(settings, principal), "error_cb": errors.append, "logger": _QUIET})
    try:
        client.list_topics(timeout=timeout)
    except KafkaException as exc:
        client.poll(0)               # serves error_cb: the reason behind "Failed to get metadata"
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            raise ConfigError(f"kafka: {username(principal)} cannot log in (SASL authentication failed): "
                              f"check MEMSTREAM_KAFKA_{principal.upper()}_PASSWORD") from None
        why = errors[0].str() if errors else exc.args[0].str()
        raise Unavailable(f"{username(principal)}: {why}") from None


def ensure_kafka(settings: Settings, deadline: float) -> str:
    from confluent_kafka import KafkaException

    from adapters.bus import ensure_topics
    from adapters.kafka_auth import ADMIN, PRINCIPALS

    # The admin first: nothing else can work before it can (and it creates the ACLs the others need).
    _until(deadline, f"kafka at {settings.kafka_bootstrap}", lambda: _kafka_login(settings, ADMIN, 5.0), (Unavailable,))
    created = _until(deadline, "kafka topic creation", lambda: ensure_topics(settings), (KafkaException, Unavailable))
    for principal in PRINCIPALS:
        _kafka_login(settings, principal, 10.0)
    return (f"created {len(created)} topics ({', '.join(created)})" if created else "topics present") + \
        f"; ACLs set; {len(PRINCIPALS)} principals log in"


# -- 4. neo4j ------------------------------------------------------------------------------------

def ensure_neo4j(settings: Settings, deadline: float) -> str:
    from neo4j.exceptions import AuthError, ServiceUnavailable, SessionExpired

    from adapters.neo4j_auth import driver

    def login() -> None:
        with driver(settings, connection_timeout=5) as d:
            d.verify_connectivity()
    try:
        _until(deadline, f"neo4j at {settings.neo4j_uri}", login, (ServiceUnavailable, SessionExpired, OSError))
    except AuthError:
        raise ConfigError(f"neo4j: {settings.neo4j_user} cannot log in at {settings.neo4j_uri}: "
                          f"check MEMSTREAM_NEO4J_PASSWORD") from None
    return f"{settings.neo4j_user} logs in"


# -- 5. the admin API key ------------------------------------------------------------------------

def ensure_admin_key(settings: Settings) -> str:
    from adapters.privacy.apikeys import ensure_local_admin_key
    return ensure_local_admin_key(settings)


# -- the command ---------------------------------------------------------------------------------

def run_init(settings: Settings, wait_s: float = 120.0, report: Callable[[str, str], None] | None = None) -> dict[str, str]:
    """Every step in order; returns {step: what it found or did}. Raises MemstreamError (one line)."""
    deadline = time.monotonic() + wait_s
    done: dict[str, str] = {}

    def step(name: str, result: str) -> None:
        done[name] = result
        if report:
            report(name, result)

    for name, result in ensure_secrets(settings).items():
        step(name, result)
    step("postgres", ensure_postgres(settings, deadline))
    step("kafka", ensure_kafka(settings, deadline))
    step("neo4j", ensure_neo4j(settings, deadline))
    step("api key", ensure_admin_key(settings))
    return done


def cmd_init(args) -> None:
    """The CLI's `memstream init [--wait S] [--json]`."""
    import sys

    import orjson

    from kernel.config import get_settings
    if args.wait < 0:
        raise MemstreamError(f"--wait {args.wait:g} must be 0 or more seconds")
    s = get_settings()
    t0 = time.monotonic()
    show = None if args.json else (lambda name, result: print(f"{name:<19}{result}", flush=True))
    done = run_init(s, wait_s=args.wait, report=show)
    if args.json:
        sys.stdout.write(orjson.dumps({"namespace": s.namespace, **done}, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(f"namespace {s.namespace} ready in {time.monotonic() - t0:.1f} s")

