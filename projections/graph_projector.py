"""Neo4j memory graph: (:Memory) nodes, MERGE on ids; positions stored in Neo4j itself.

The position nodes are written in the same Neo4j transaction as the graph changes — that is
what makes a kill -9 at any moment safe (law 3). Nodes carry `ns` (the namespace) so several
namespaces (tests, what-if runs) can share one Neo4j community database.

No personal content lives in the graph: a node holds ids, the user, category, importance, status
and times, never the memory's text (nor its key, value, tags or embedding). Readers that show text
(the console's graph page) look it up in Postgres by id. Neo4j cannot drop a deleted value's bytes
on demand: a deleted string record keeps them in the store file, every delete writes the value into
the transaction log again, and community edition has no procedure to checkpoint or rotate that log
(measured: see memstream/app/storage_scrub.py). Keeping the text out of the graph is what lets an
erasure reach storage (the Postgres side is rewritten by the storage scrub).

Relational memory (#26): (:Entity {ns, user, id, type}) nodes, the user's own entity (id "self",
type "user") among them, and (:Entity)-[:RELATES {id, predicate, valid_from, valid_to,
recorded_at}]->(:Entity) edges; ended relations keep their edge with valid_to set. As with
memories, no name, alias or evidence is written here: readers look names up in Postgres
(projections/relations.py, query/relations.py).

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import hashlib
from datetime import datetime

import orjson

from adapters import neo4j_auth
from kernel.config import Settings
from adapters.resilience import StalePosition
from projections import graph_generation, tombstones
from projections.batching import Grouping, grouped_runs
from projections.runner import Item, Projector, TopicPart, kind_by_type

SETUP = (
    # (ns, id): one log projected into two namespaces (live and a shadow rebuild) gives two graphs.
    "DROP CONSTRAINT memory_id IF EXISTS",
    "CREATE CONSTRAINT memory_ns_id IF NOT EXISTS FOR (m:Memory) REQUIRE (m.ns, m.id) IS UNIQUE",
    "CREATE CONSTRAINT projector_position IF NOT EXISTS FOR (p:ProjectorPosition) REQUIRE p.key IS UNIQUE",
    "CREATE INDEX memory_user IF NOT EXISTS FOR (m:Memory) ON (m.ns, m.user)",
    "CREATE INDEX erased_user IF NOT EXISTS FOR (e:ErasedUser) ON (e.ns, e.user)",
    # entity ids are a user's own ("self" is every user's): unique per (ns, user, id)
    "CREATE CONSTRAINT entity_ns_user_id IF NOT EXISTS FOR (x:Entity) REQUIRE (x.ns, x.user, x.id) IS UNIQUE",
    "CREATE INDEX relates_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.id)",
    graph_generation.SETUP,
)
# Graphs written before the text left the graph: drop it from their nodes, a batch at a time
# (setup repeats it until none is left; idempotent).
DROP_CONTENT = ("MATCH (m:Memory) USING INDEX m:Memory(ns, user) WHERE m.ns = $ns AND m.user IS NOT NULL "
                "AND m.content IS NOT NULL WITH m LIMIT 5000 REMOVE m.content RETURN count(m) AS n")
# What the projector never writes into the graph: personal content (see the module's note), that
# is every sealed field of an event (schemas/events.py SEALED) and these, whatever the version.
PERSONAL = frozenset({"embedding", "tags", "key", "value", "content"})


class GraphProjector(Projector):
    name = "neo4j-graph"
    topics = ("memory",)
    # A pinned generation (shadow rebuilds, replay/) is written as is. None: the namespace's
    # current generation (projections/graph_generation.py), re-read under its lock every batch.
    generation: str | None = None

    def __init__(self, settings: Settings):
        self.settings = settings
        self.ns = settings.namespace
        self.driver = None
        self.refused_erased = 0   # events of erased users refused by the tombstone check

    def setup(self) -> None:
        if self.driver is not None:  # a retried setup (Neo4j was down): one driver, not one per try
            self.driver.close()
        # The driver reconnects by itself; short timeouts and a short managed-retry window let an
        # outage surface as ServiceUnavailable (transient) to the runner, which waits it out with
        # its own backoff and reports `waiting`, instead of blocking inside one call for 30 s.
        self.driver = neo4j_auth.driver(self.settings, connection_timeout=5.0,
                                           connection_acquisition_timeout=10.0, max_transaction_retry_time=5.0)
        with self.driver.session() as s:
            for stmt in SETUP:
                s.run(stmt).consume()
            self.ns = self.generation or graph_generation.current(s, self.settings.namespace)
            while s.run(DROP_CONTENT, ns=self.ns).single()["n"]:
                pass

    def _key(self, topic: str, partition: int) -> str:
        return f"{self.ns}|{self.name}|{topic}|{partition}"

    def positions(self) -> dict[TopicPart, int]:
        with self.driver.session() as s:
            self.ns = self.generation or graph_generation.current(s, self.settings.namespace)
            rows = s.run("MATCH (p:ProjectorPosition {ns: $ns, projector: $name}) RETURN p.topic AS t, p.partition AS p, p.next_offset AS o",
                         ns=self.ns, name=self.name).data()
        return {(r["t"], r["p"]): r["o"] for r in rows}

    kind_of = staticmethod(kind_by_type({"user.erased": "erase", "memory.created": "create", "memory.reinforced": "reinforce",
                          "memory.linked": "link", "memory.superseded": "supersede", "user.forgotten": "erase",
                          "memory.decayed": "decay", "memory.merged": "merge", "memory.deduped": "dedup",
                          "memory.expired": "archive", "memory.summarized": "summarize", "memory.recalled": "recall",
                          "memory.forgotten": "forget", "memory.revived": "revive",
                          "entity.observed": "entity", "relation.asserted": "relate", "relation.ended": "unrelate"}))
    # Kinds written one statement per batch where log order allows (projections/batching.py).
    # In the graph a reinforcement sets node properties, a supersession a status and an edge, a link
    # another edge: on the same memory they commute.
    GROUPED = Grouping(("create", "reinforce", "supersede", "link"), commute=("reinforce", "supersede", "link"))
    # relational memory's kinds: times as ISO text, like the memories' (`at`)
    RELATIONAL = frozenset({"entity", "relate", "unrelate"})
    # Consolidation and forgetting. A retired memory keeps its node and edges (status merged/deduped,
    # plus an edge to the survivor); an archived one (memory.expired) keeps them too, with status
    # archived, until memory.revived makes it active again; only a forgotten one is DETACH DELETEd.
    # `at` is the event time.
    _LATER = "CASE WHEN m.last_accessed_at IS NULL OR m.last_accessed_at < r.at THEN r.at ELSE m.last_accessed_at END"
    CONSOLIDATION = {
        "decay": "UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) SET m.importance = r.importance",
        "merge": "UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) SET "
                 "m.importance = r.importance, m.category = r.category, m.access_count = r.access_count, "
                 "m.last_accessed_at = " + _LATER + " WITH r, m MATCH (old:Memory {ns: $ns, id: r.retired_id}) "
                 "SET old.status = 'merged' MERGE (old)-[:MERGED_INTO]->(m)",
        "dedup": "UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) SET m.importance = r.importance, "
                 "m.category = r.category, m.access_count = r.access_count "
                 "WITH r, m MATCH (old:Memory {ns: $ns, id: r.retired_id}) SET old.status = 'deduped' "
                 "MERGE (old)-[:DEDUPED_INTO]->(m)",
        "archive": "UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) "
                   "WHERE m.status IN ['active', 'archived', 'expired'] SET m.status = 'archived', "
                   "m.importance = r.importance",
        "revive": "UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) "
                  "WHERE m.status IN ['archived', 'expired'] SET m.status = 'active', m.importance = r.importance, "
                  "m.last_accessed_at = " + _LATER,
        "summarize": "UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) SET m.summarized_at = r.at",
        "recall": "UNWIND $rows AS r UNWIND r.memory_ids AS mid MATCH (m:Memory {ns: $ns, id: mid}) "
                  "WHERE m.user = r.user SET m.last_accessed_at = " + _LATER,
        "forget": "UNWIND $rows AS r UNWIND r.memory_ids AS mid MATCH (m:Memory {ns: $ns, id: mid}) "
                  "WHERE m.user = r.user DETACH DELETE m",
        # relational memory (#26): ids, types and validity only (names stay in Postgres)
        "entity": "UNWIND $rows AS r MERGE (x:Entity {ns: $ns, user: r.user, id: r.entity_id}) "
                  "SET x.type = r.entity_type",
        "relate": "UNWIND $rows AS r "
                  "MERGE (a:Entity {ns: $ns, user: r.user, id: r.subject_id}) "
                  "ON CREATE SET a.type = CASE WHEN r.subject_id = 'self' THEN 'user' ELSE null END "
                  "MERGE (b:Entity {ns: $ns, user: r.user, id: r.object_id}) "
                  "ON CREATE SET b.type = CASE WHEN r.object_id = 'self' THEN 'user' ELSE null END "
                  "MERGE (a)-[e:RELATES {id: r.relation_id}]->(b) ON CREATE SET e.predicate = r.predicate, "
                  "e.valid_from = r.valid_from, e.recorded_at = r.at",
        "unrelate": "UNWIND $rows AS r MATCH (a:Entity {ns: $ns, user: r.user})-[e:RELATES {id: r.relation_id}]->() "
                    "SET e.valid_to = r.valid_to",
    }

    def apply(self, items: list[Item], positions: dict[TopicPart, int],
              expected: dict[TopicPart, int | None] | None = None) -> None:
        refused = [0]

        def work(tx):
            refused[0] = 0
            if self.generation is None:  # a replay swap may have installed a new generation
                self.ns = graph_generation.follow(tx, self.settings.namespace)
            if expected:
                self._fence(tx, expected)
            # Erasure tombstones (projections/tombstones.py): (:ErasedUser {ns, user}) nodes, written
            # with the erasure in this transaction; later events of those users are refused.
            known = {r["u"] for r in tx.run("UNWIND $users AS u MATCH (e:ErasedUser {ns: $ns, user: u}) RETURN u",
                                            users=tombstones.users_of(items), ns=self.ns).data()} if items else set()
            kept, new, refused[0] = tombstones.refuse_erased(items, known)
            if new:
                tx.run("UNWIND $rows AS r MERGE (e:ErasedUser {ns: $ns, user: r.user}) ON CREATE SET e.event_id = r.id",
                       rows=[{"user": i.event.user, "id": i.event.id} for i in new], ns=self.ns).consume()
            for kind, run in grouped_runs(kept, self.kind_of, self.GROUPED):
                if kind == "erase":
                    tx.run("UNWIND $users AS u MATCH (m:Memory {ns: $ns, user: u}) DETACH DELETE m",
                           users=[i.event.user for i in run], ns=self.ns).consume()
                    tx.run("UNWIND $users AS u MATCH (x:Entity {ns: $ns, user: u}) DETACH DELETE x",
                           users=[i.event.user for i in run], ns=self.ns).consume()
                    continue
                rows = [{"user": i.event.user, "at": i.event.time.isoformat(),
                         **i.event.data.model_dump(exclude=PERSONAL | i.event.data.SEALED)}
                        for i in run]
                if kind in self.RELATIONAL:
                    rows = [{k: v.isoformat() if isinstance(v, datetime) else v for k, v in r.items()} for r in rows]
                if kind == "create":
                    tx.run("UNWIND $rows AS r MERGE (m:Memory {ns: $ns, id: r.memory_id}) "
                           "ON CREATE SET m.user = r.user, m.category = r.category, "
                           "m.importance = r.importance, m.status = 'active', m.access_count = 0, m.created_at = r.at",
                           rows=rows, ns=self.ns).consume()
                elif kind == "reinforce":
                    tx.run("UNWIND $rows AS r MATCH (m:Memory {ns: $ns, id: r.memory_id}) SET m.importance = r.importance, "
                           "m.category = r.category, m.access_count = r.access_count, m.last_accessed_at = " + self._LATER,
                           rows=rows, ns=self.ns).consume()
                elif kind == "supersede":
                    tx.run("UNWIND $rows AS r MATCH (old:Memory {ns: $ns, id: r.memory_id}) SET old.status = 'outdated' "
                           "WITH r, old MATCH (new:Memory {ns: $ns, id: r.superseded_by}) MERGE (new)-[:SUPERSEDES]->(old)",
                           rows=rows, ns=self.ns).consume()
                elif kind in self.CONSOLIDATION:
                    tx.run(self.CONSOLIDATION[kind], rows=rows, ns=self.ns).consume()
                else:  # link: relationship types cannot be parameters, so one statement per kind
                    for rel in ("FOLLOWS", "SIMILAR_TO"):
                        sel = [r for r in rows if r["kind"] == rel]
                        if sel:
                            tx.run(f"UNWIND $rows AS r MATCH (a:Memory {{ns: $ns, id: r.from_id}}), (b:Memory {{ns: $ns, id: r.to_id}}) "
                                   f"MERGE (a)-[e:{rel}]->(b) SET e.weight = r.weight", rows=sel, ns=self.ns).consume()
            tx.run("UNWIND $pos AS p MERGE (n:ProjectorPosition {key: p.key}) "
                   "SET n.ns = $ns, n.projector = $name, n.topic = p.topic, n.partition = p.partition, "
                   "n.next_offset = CASE WHEN n.next_offset IS NULL OR n.next_offset < p.o THEN p.o ELSE n.next_offset END",
                   pos=[{"key": self._key(t, p), "topic": t, "partition": p, "o": o} for (t, p), o in positions.items()],
                   ns=self.ns, name=self.name).consume()

        with self.driver.session() as s:
            s.execute_write(work)
        if refused[0]:   # counted once committed (a retried transaction is not counted twice)
            self.refused_erased += refused[0]
            tombstones.log.info("%s: refused %d events of erased users (%d so far)", self.name, refused[0],
                                self.refused_erased)

    def _fence(self, tx, expected: dict[TopicPart, int | None]) -> None:
        """Compare-and-set, part 1: lock this batch's position nodes (a write takes the node's lock
        until the transaction ends, so a second writer waits here), then read them: each must still
        hold the offset the batch started from, or the whole transaction rolls back."""
        keys = [{"key": self._key(t, p), "topic": t, "partition": p} for (t, p) in expected]
        tx.run("UNWIND $pos AS p MERGE (n:ProjectorPosition {key: p.key}) SET n.fence = coalesce(n.fence, 0) + 1",
               pos=keys).consume()
        stored = {(r["t"], r["p"]): r["o"] for r in tx.run(
            "UNWIND $pos AS p MATCH (n:ProjectorPosition {key: p.key}) RETURN p.topic AS t, p.partition AS p, "
            "n.next_offset AS o", pos=keys).data()}
        moved = {tp: (stored.get(tp), want) for tp, want in expected.items() if stored.get(tp) != want}
        if moved:
            raise StalePosition(f"{self.name}: stored position differs from the one this batch started at: "
                                + ", ".join(f"{t}:{p} stored {got} expected {want}" for (t, p), (got, want) in moved.items()))

    def checksum(self) -> str:
        """Digest of the namespace's nodes (with their properties) and edges, in a fixed order."""
        with self.driver.session() as s:
            self.ns = self.generation or graph_generation.current(s, self.settings.namespace)
            nodes = s.run("MATCH (m:Memory {ns: $ns}) RETURN m.id AS id, properties(m) AS p ORDER BY id", ns=self.ns).data()
            edges = s.run("MATCH (a:Memory {ns: $ns})-[e]->(b:Memory) RETURN type(e) AS t, a.id AS a, b.id AS b, "
                          "properties(e) AS p ORDER BY t, a, b", ns=self.ns).data()
            entities = s.run("MATCH (x:Entity {ns: $ns}) RETURN x.user AS u, x.id AS id, properties(x) AS p "
                             "ORDER BY u, id", ns=self.ns).data()
            relates = s.run("MATCH (a:Entity {ns: $ns})-[e:RELATES]->(b:Entity) RETURN a.user AS u, e.id AS id, "
                            "a.id AS a, b.id AS b, properties(e) AS p ORDER BY u, id", ns=self.ns).data()
        for n in nodes + entities:
            n["p"].pop("ns", None)
        blob = orjson.dumps([nodes, edges], option=orjson.OPT_SORT_KEYS)
        out = f"nodes:{len(nodes)} edges:{len(edges)} {hashlib.md5(blob).hexdigest()}"
        if entities or relates:   # a graph without relational memory keeps the checksum it had
            rel = orjson.dumps([entities, relates], option=orjson.OPT_SORT_KEYS)
            out += f" entities:{len(entities)} relates:{len(relates)} {hashlib.md5(rel).hexdigest()}"
        return out

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()

