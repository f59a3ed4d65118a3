"""Who talks to Kafka, and with which rights: SASL/SCRAM principals and their ACLs.

The local broker (memstream/stack/kafka.py) accepts clients only over SASL/SCRAM-SHA-512 and
authorizes every request (StandardAuthorizer, nothing allowed without an ACL). Four principals:

- admin     (User:memstream-admin, a super user): the stack itself, topic and ACL creation
            (ensure_topics), erasure and forgetting (they write the memory topic), the replay,
            rebuild and what-if tools, the tests' helpers.
- worker    (User:memstream-worker): the pipeline processes (the faust apps, the projectors, the
            ticker): read and write the namespace's topics, create and tune their faust internal
            topics (changelogs, the assignor's leader topic), use the namespace's consumer groups.
- publisher (User:memstream-publisher): the SDK/API/MCP publish path: writes only the input
            topics (`<ns>.turns`, `<ns>.tasks`); reads the namespace's topics (log ends for `after`
            tokens, audit and time-travel reads, the console's dead letters) and describes its
            groups (lag); cannot write facts or memory (TopicAuthorizationFailed).
- control   (User:memstream-control): the memory-topic writes of the API, MCP and CLI processes
            (memory.recalled on every recall, forget, erase; the control events among them carry
            the key store's HMAC too): writes `<ns>.memory` only, reads nothing, creates nothing.
            Before it existed these went as the admin, so a leaked API credential was a super user.

Every Kafka client is configured by kafka_config(settings, principal): the one place that
knows the protocol, mechanism and where the password comes from. Authentication costs one SCRAM
exchange per connection, nothing per message.

Passwords: MEMSTREAM_KAFKA_<PRINCIPAL>_PASSWORD, else <stack_dir>/secrets/kafka-<principal>.password
(made by `stack up`, mode 0600, never printed).
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from pathlib import Path
from typing import Literal

from kernel.config import Settings
from kernel.errors import ConfigError
from adapters.secret_files import read_secret, write_new_secret

Principal = Literal["admin", "worker", "publisher", "control"]
ADMIN: Principal = "admin"
WORKER: Principal = "worker"
PUBLISHER: Principal = "publisher"
CONTROL: Principal = "control"
PRINCIPALS: tuple[Principal, ...] = (ADMIN, WORKER, PUBLISHER, CONTROL)

SECURITY_PROTOCOL = "SASL_PLAINTEXT"   # loopback only: no TLS (see memstream/stack/kafka.py)
MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096                # Kafka's minimum (and `format --add-scram`'s default) for SHA-512

# Topics the publisher principal may write (the SDK's input topics); everything else is read-only to it.
PUBLISHER_WRITES = ("turns", "tasks")
# Consumer groups outside `<ns>.` that never commit (assign() only) but need a group id: the
# publisher's reads (replay/fetch.py, the console) and the workers' offset guard.
PUBLISHER_GROUP_PREFIXES = ("memstream-fetch-", "console-")
WORKER_GROUPS = ("memstream-offset-guard",)


def username(principal: Principal) -> str:
    return f"memstream-{principal}"


def password_file(settings: Settings, principal: Principal) -> Path:
    return settings.stack_dir / "secrets" / f"kafka-{principal}.password"


def _override(settings: Settings, principal: Principal):
    return getattr(settings, f"kafka_{principal}_password")


def password(settings: Settings, principal: Principal) -> str:
    """The principal's password: its setting, else the file `stack up` wrote. Never logged."""
    if principal not in PRINCIPALS:
        raise ConfigError(f"unknown Kafka principal {principal!r} (one of {', '.join(PRINCIPALS)})")
    given = _override(settings, principal)
    if given is not None:
        return given.get_secret_value()
    path = password_file(settings, principal)
    return read_secret(path, f"no Kafka password for {username(principal)}: set MEMSTREAM_KAFKA_{principal.upper()}_PASSWORD "
                             f"or run `memstream stack up` to create {path}", "Kafka password")


def ensure_passwords(settings: Settings) -> str:
    """`stack up`: create each missing password file (O_EXCL, 0600: never readable by others, and
    two concurrent `up`s cannot both write one). Returns a status line, never a password."""
    made = []
    for p in PRINCIPALS:
        if _override(settings, p) is not None:
            continue
        # [A-Za-z0-9_-]: safe inside JAAS quotes and --add-scram
        if write_new_secret(password_file(settings, p), secrets.token_urlsafe(32) + "\n"):
            made.append(p)
    return f"created ({', '.join(made)})" if made else "present"


def fingerprint(settings: Settings) -> str:
    """A digest of every principal's name and password: what the broker's SCRAM users must match."""
    h = hashlib.sha256()
    for p in PRINCIPALS:
        h.update(f"{username(p)}\0{password(settings, p)}\0".encode())
    return h.hexdigest()


LIBRDKAFKA_LOGGER = logging.getLogger("memstream.librdkafka")


def kafka_config(settings: Settings, principal: Principal) -> dict:
    """The confluent-kafka (librdkafka) settings that connect as `principal`: start every client's
    config from this (`{**kafka_config(s, WORKER), "group.id": ...}`)."""
    return {"bootstrap.servers": settings.kafka_bootstrap,
            "security.protocol": SECURITY_PROTOCOL, "sasl.mechanism": MECHANISM,
            "sasl.username": username(principal), "sasl.password": password(settings, principal),
            # librdkafka's own lines ("%4|…|GETPID|…", written raw to stderr by default) go through
            # Python logging instead: into a worker's log with its time and level, and silenced where
            # a command's output is for people (the demo) — see LIBRDKAFKA_LOGGER.
            "logger": LIBRDKAFKA_LOGGER}


def faust_credentials(settings: Settings, principal: Principal):
    """The same principal for faust (aiokafka's SCRAM client): App(broker_credentials=...)."""
    import faust
    cfg = kafka_config(settings, principal)
    return faust.SASLCredentials(username=cfg["sasl.username"], password=cfg["sasl.password"], mechanism=MECHANISM)


# -- ACLs ------------------------------------------------------------------------------------------

def namespace_acls(namespaces: list[str] | tuple[str, ...]) -> list:
    """The ACL bindings that let the worker, publisher and control principals use these namespaces (topics
    and groups named `<ns>.…`). Literal and prefixed bindings only: no wildcard, no cluster rights."""
    from confluent_kafka.admin import AclBinding, AclOperation as Op, AclPermissionType, ResourcePatternType as Pat
    from confluent_kafka.admin import ResourceType as Res

    def allow(principal: Principal, res, name: str, pattern, *ops) -> list:
        return [AclBinding(res, name, pattern, f"User:{username(principal)}", "*", op, AclPermissionType.ALLOW)
                for op in ops]

    out: list = []
    for ns in dict.fromkeys(namespaces):
        prefix = f"{ns}."
        out += allow(WORKER, Res.TOPIC, prefix, Pat.PREFIXED, Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE,
                     Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
        # Groups: the namespace's name without the dot, so a process projecting this log into a
        # namespace derived from it (`<ns>_c`, `<ns>__shadow`: MEMSTREAM_LOG_NAMESPACE) has its groups too.
        out += allow(WORKER, Res.GROUP, ns, Pat.PREFIXED, Op.READ, Op.DESCRIBE)
        out += allow(PUBLISHER, Res.TOPIC, prefix, Pat.PREFIXED, Op.READ, Op.DESCRIBE)
        for name in PUBLISHER_WRITES:
            out += allow(PUBLISHER, Res.TOPIC, prefix + name, Pat.LITERAL, Op.WRITE)
        out += allow(PUBLISHER, Res.GROUP, prefix, Pat.PREFIXED, Op.DESCRIBE)        # lag (/metrics, status)
        out += allow(PUBLISHER, Res.GROUP, f"{ns}.log-ends", Pat.LITERAL, Op.READ)   # bus.LogEnds
        out += allow(CONTROL, Res.TOPIC, prefix + "memory", Pat.LITERAL, Op.WRITE, Op.DESCRIBE)
    for name in WORKER_GROUPS:
        out += allow(WORKER, Res.GROUP, name, Pat.LITERAL, Op.READ, Op.DESCRIBE)
    for prefix in PUBLISHER_GROUP_PREFIXES:
        out += allow(PUBLISHER, Res.GROUP, prefix, Pat.PREFIXED, Op.READ, Op.DESCRIBE)
    return out


def ensure_namespace_acls(admin, settings: Settings, timeout: float = 30.0) -> int:
    """Create the namespace's ACLs (idempotent: the broker keeps one copy of an ACL created twice).
    `admin` is an AdminClient of the admin principal. Returns the number of bindings."""
    bindings = namespace_acls([settings.namespace, settings.log_namespace])
    for fut in admin.create_acls(bindings, request_timeout=timeout).values():
        fut.result(timeout=timeout)
    return len(bindings)
