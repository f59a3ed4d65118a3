"""A namespace's footprint on the stack, and dropping it whole (`memstream namespace list|drop`).

Benchmarks, tests and what-if runs each write into a namespace of their own; this is how an
operator sees what is there and takes one away without touching any other. A namespace `ns` owns:
- Kafka: the topics and consumer groups named `ns.…` (its log, faust's changelogs and leader
  topics, every group of its workers and projectors) and the ACL bindings made for it
  (adapters/kafka_auth.py: namespace_acls);
- Postgres: the read-model schema `ns` and its shadows `ns__…` (rebuild, verify, what-if, time
  travel); in the key-store database the schema `ns` (data keys, erased users, API keys);
- Neo4j: the nodes whose `ns` is `ns` or a generation `ns__…` (memories, positions, erasure
  markers, the graph pointer);
- files under the stack directory: faust's state (`faust/ns/`), the local admin key
  (`secrets/api-ns.key`; `api.key` for the default namespace) and the workers' logs (`logs/ns-….log`).
A name `ns__…` is a shadow of `ns`, never a namespace of its own: dropping `ns` takes its shadows.

Dropping deletes the data keys too, so what the namespace's log sealed is unreadable even from a
copy of the topics (the same crypto-shredding as an erasure, for every user at once). Dropping
refuses while any of the namespace's consumer groups has members: a running worker would recreate
its topics and tables from nothing.
"""
from __future__ import annotations

import functools
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psycopg

from kernel.config import Settings
from kernel.errors import InvalidInput, MemstreamError
from adapters.resilience import TRANSIENT, Unavailable, classify
from replay import stores

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
# A worker's log is `<ns>-<worker label>.log` (memstream/app/workers.py: `memory`, `memory.2`,
# `llm-extractor`): narrow, so that dropping `a` leaves `a-b`'s `a-b-memory.log` alone.
LOG_RE = re.compile(r"^(?:[a-z]+|llm-extractor)(?:\.\d+)?\.log$")
GRAPH_LABELS = ("Memory", "Entity", "ProjectorPosition", "ErasedUser", "GraphPointer")


class NamespaceInUse(MemstreamError):
    """A consumer group of the namespace has members: its workers are running."""
    exit_code = 3


@dataclass
class Footprint:
    namespace: str
    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    active_groups: list[str] = field(default_factory=list)
    acls: int = 0
    schemas: list[str] = field(default_factory=list)
    key_schemas: list[str] = field(default_factory=list)
    graph_nodes: int = 0
    files: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.topics or self.groups or self.acls or self.schemas or self.key_schemas
                    or self.graph_nodes or self.files)

    def as_dict(self) -> dict:
        return asdict(self)


def check_name(namespace: str) -> str:
    if not NAME_RE.match(namespace) or "__" in namespace:
        raise InvalidInput(f"namespace {namespace!r}: 1-100 letters, digits, _ or -, and no '__' "
                           "(a name with '__' is a shadow of the namespace before it)")
    return namespace


def owns(namespace: str, name: str, sep: str) -> bool:
    """Is `name` (a topic or group with `sep` '.', a schema or graph generation with sep '') the
    namespace's or one of its shadows'?"""
    return (name == namespace if not sep else name.startswith(namespace + sep)) or name.startswith(namespace + "__")


def namespace_of(name: str, sep: str) -> str:
    """The namespace a topic / group (sep '.') or schema / generation (sep '') belongs to."""
    base = name.split(sep, 1)[0] if sep else name
    return base.split("__", 1)[0]


def _outage_is_an_error(fn):
    """A store that does not answer is the operator's to fix, not a traceback: Unavailable
    (exit 2) naming it. A drop cut short this way is finished by running it again (drop's steps)."""
    @functools.wraps(fn)
    def wrapper(settings: Settings, *args, **kwargs):
        try:
            return fn(settings, *args, **kwargs)
        except MemstreamError:
            raise
        except Exception as exc:
            if classify(exc) != TRANSIENT:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise Unavailable(f"a store did not answer ({type(exc).__name__}: {first}); nothing past that "
                              "point was dropped: run the command again once it is back") from exc
    return wrapper


# -- finding ------------------------------------------------------------------------------------

def _admin(settings: Settings):
    from confluent_kafka.admin import AdminClient
    from adapters.kafka_auth import ADMIN, kafka_config
    return AdminClient({**kafka_config(settings, ADMIN), "log_level": 0})


def _schemas(settings: Settings, database: str) -> list[str]:
    with psycopg.connect(settings.pg_dsn(database), autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN "
            "('public', 'information_schema') ORDER BY nspname").fetchall()]


def _graph_counts(settings: Settings) -> dict[str, int]:
    """Nodes per generation (`ns` value), over the labels memstream writes."""
    from adapters import neo4j_auth
    out: dict[str, int] = {}
    with neo4j_auth.driver(settings, notifications_min_severity="OFF") as driver, driver.session() as s:
        for label in GRAPH_LABELS:
            for r in s.run(f"MATCH (n:{label}) WHERE n.ns IS NOT NULL RETURN n.ns AS ns, count(*) AS n"):
                out[r["ns"]] = out.get(r["ns"], 0) + r["n"]
    return out


def _files(settings: Settings, namespace: str) -> list[Path]:
    from adapters.privacy.tenants import local_key_file
    d = settings.stack_dir
    ns_settings = settings.model_copy(update={"namespace": namespace})
    found = [p for p in (d / "faust" / namespace, local_key_file(ns_settings)) if p.exists()]
    logs = d / "logs"
    if logs.is_dir():
        found += sorted(p for p in logs.glob(f"{namespace}-*.log") if LOG_RE.match(p.name[len(namespace) + 1:]))
    return found


def _acl_filters(namespace: str) -> list:
    """Filters matching exactly the bindings namespace_acls made for this namespace (not the shared
    ones every namespace gets, which other namespaces still use)."""
    from confluent_kafka.admin import AclBindingFilter
    from adapters.kafka_auth import namespace_acls
    shared = {str(b) for b in namespace_acls([])}
    return [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                             b.permission_type) for b in namespace_acls([namespace]) if str(b) not in shared]


@_outage_is_an_error
def footprint(settings: Settings, namespace: str, timeout: float = 30.0, admin=None) -> Footprint:
    check_name(namespace)
    admin = admin or _admin(settings)
    fp = Footprint(namespace)
    fp.topics = sorted(t for t in admin.list_topics(timeout=timeout).topics if owns(namespace, t, "."))
    listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    fp.groups = sorted(g.group_id for g in listed.valid if owns(namespace, g.group_id, "."))
    if fp.groups:
        for gid, fut in admin.describe_consumer_groups(fp.groups, request_timeout=timeout).items():
            if fut.result(timeout=timeout).members:
                fp.active_groups.append(gid)
        fp.active_groups.sort()
    fp.acls = sum(len(f.result(timeout=timeout)) for f in
                  [admin.describe_acls(flt, request_timeout=timeout) for flt in _acl_filters(namespace)])
    fp.schemas = [s for s in _schemas(settings, settings.pg_database) if owns(namespace, s, "")]
    fp.key_schemas = [s for s in _schemas(settings, settings.pg_keys_database) if owns(namespace, s, "")]
    fp.graph_nodes = sum(n for gen, n in _graph_counts(settings).items() if owns(namespace, gen, ""))
    fp.files = [str(p) for p in _files(settings, namespace)]
    return fp


@_outage_is_an_error
def list_namespaces(settings: Settings, timeout: float = 30.0) -> list[Footprint]:
    """Every namespace with something on the stack (its shadows counted in it), by name."""
    admin = _admin(settings)
    out: dict[str, Footprint] = {}

    def of(name: str) -> Footprint:
        return out.setdefault(name, Footprint(name))

    for t in admin.list_topics(timeout=timeout).topics:
        if "." in t and not t.startswith("_"):
            of(namespace_of(t, ".")).topics.append(t)
    for g in admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout).valid:
        if "." in g.group_id and g.group_id.split(".", 1)[0] in out:   # only next to a namespace's topics
            of(namespace_of(g.group_id, ".")).groups.append(g.group_id)
    for s in _schemas(settings, settings.pg_database):
        of(namespace_of(s, "")).schemas.append(s)
    for s in _schemas(settings, settings.pg_keys_database):
        of(namespace_of(s, "")).key_schemas.append(s)
    for gen, n in _graph_counts(settings).items():
        of(namespace_of(gen, "")).graph_nodes += n
    return [out[k] for k in sorted(out)]


# -- dropping -----------------------------------------------------------------------------------

@_outage_is_an_error
def drop(settings: Settings, namespace: str, force: bool = False, timeout: float = 60.0) -> Footprint:
    """Remove everything the namespace owns (module docstring). Returns what was found and removed.

    Order matters:
    1. Refuse while a group has members (unless `force`): a live worker would recreate its
       topics and tables from nothing, half a namespace nobody asked for.
    2. Topics first: nothing can be read or projected afresh once they are gone, and a publisher
       still holding a client gets errors instead of writing into a namespace being dropped.
    3. Groups, then ACLs: the last Kafka traces.
    4. Read models (Postgres schemas, Neo4j nodes): derived data, rebuilt by nobody now.
    5. The key-store schema last among the stores: until here a failure leaves a namespace whose
       remaining data is still readable and the drop can simply be run again.
    6. Files: state and logs of workers that no longer run.
    """
    admin = _admin(settings)
    fp = footprint(settings, namespace, admin=admin)
    # 1.
    if fp.active_groups and not force:
        raise NamespaceInUse(f"namespace {namespace!r} is in use: {', '.join(fp.active_groups)} "
                             "have members (stop its workers first, or pass --force)")
    # 2.
    if fp.topics:
        for topic, fut in admin.delete_topics(fp.topics, operation_timeout=timeout).items():
            try:
                fut.result(timeout=timeout)
            except Exception as exc:   # a topic another drop removed meanwhile is gone all the same
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise MemstreamError(f"deleting topic {topic}: {exc}") from exc
    # 3.
    if fp.groups:
        for gid, fut in admin.delete_consumer_groups(fp.groups, request_timeout=timeout).items():
            try:
                fut.result(timeout=timeout)
            except Exception as exc:
                if "GROUP_ID_NOT_FOUND" not in str(exc):
                    raise MemstreamError(f"deleting consumer group {gid}: {exc}") from exc
    for fut in admin.delete_acls(_acl_filters(namespace), request_timeout=timeout).values():
        fut.result(timeout=timeout)
    # 4.
    for schema in fp.schemas:
        stores.drop_schema(settings, schema)
    if fp.graph_nodes:
        _drop_graph(settings, namespace)
    # 5.
    for schema in fp.key_schemas:
        stores.drop_schema(settings, schema, settings.pg_keys_database)
        from adapters.privacy.keystore import forget_ddl
        forget_ddl(schema)     # a key store opened here later for the same name makes its tables again
    # 6.
    for p in map(Path, fp.files):
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    return fp


def _drop_graph(settings: Settings, namespace: str, batch: int = 10_000) -> None:
    """In batches: one transaction over a million nodes would hold them all in Neo4j's heap."""
    from adapters import neo4j_auth
    with neo4j_auth.driver(settings, notifications_min_severity="OFF") as driver, driver.session() as s:
        for label in GRAPH_LABELS:
            while s.run(f"MATCH (n:{label}) WHERE n.ns = $ns OR n.ns STARTS WITH $shadow "
                        "WITH n LIMIT $b DETACH DELETE n RETURN count(*) AS n",
                        ns=namespace, shadow=namespace + "__", b=batch).single()["n"] == batch:
                pass
