"""An in-memory log and state for the fast tier: the cores run as the workers run them, without Kafka.

- `InMemoryLog`: topics as per-partition lists of records (offset, key, value, timestamp), a key
  partitioned as Kafka's producers partition it (murmur2, streams/routing.partition_of), values
  encoded and sealed by the real codec (schemas/codec.py).
- `KeyRing`: the key store's protocol (schemas/codec.py KeyRing) over a dict: one AES-GCM data
  key per user, one control key; `erase(user)` deletes a key the way erasure does.
- `Pipeline`: turns → the extraction core (streams/extraction_core.RuleExtractor, the real
  embedder) → facts → the memory core (streams/memory_core.MemoryCore, state in dicts, sealed as
  live) → decisions, each hop through the log as encoded records.

What this does not stand in for: the projectors' stores (Postgres, Neo4j) and Kafka itself; the
stack tier tests those. Only the routing and decoding the workers do is repeated here, in `Pipeline.run` (streams/routing.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kernel.config import Settings
from domain.memory_state import Rules
from adapters.embedding import Embedder
from schemas.codec import DecisionKey, decode, encode, make_envelope
from schemas.envelope import Envelope
from schemas.events import TurnRecorded
from streams.extraction_core import RuleExtractor
from streams.memory_core import MemoryCore, SealedStates
from streams.routing import memory_input, partition_of, partitioner

DECISION_KEY = DecisionKey("d1", bytes(range(32, 64)), 0)   # the pipeline's decision key: every decision signed


class KeyRing:
    """One AES-GCM data key per user and one control key, in memory (the key store minus Postgres)."""

    control = ("c1", bytes(range(32)))

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, bytes]] = {}     # user → (key id, key)
        self.made = 0

    def key_for_write(self, user: str):
        if user not in self.keys:            # a new key after an erasure has a new id, as in the key store
            self.made += 1
            self.keys[user] = (f"k{self.made}", AESGCM.generate_key(bit_length=256))
        kid, key = self.keys[user]
        return kid, AESGCM(key)

    def key_for_read(self, user: str, kid: str):
        held = self.keys.get(user)
        return AESGCM(held[1]) if held and held[0] == kid else None

    def control_key(self, kid: str | None = None):
        return self.control if kid in (None, self.control[0]) else None

    def decision_key(self):
        return DECISION_KEY

    def erase(self, user: str) -> None:
        self.keys.pop(user, None)


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


@dataclass
class InMemoryLog:
    partitions: int = 3
    topics: dict[str, list[list[Record]]] = field(default_factory=dict)

    def topic(self, name: str) -> list[list[Record]]:
        return self.topics.setdefault(name, [[] for _ in range(self.partitions)])

    def append(self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int,
               partition: int | None = None) -> tuple[int, int]:
        """(partition, offset) of the appended record: the key decides the partition unless given."""
        if partition is None:
            partition = partition_of(key, self.partitions) if key is not None else 0
        log = self.topic(topic)[partition]
        log.append(Record(len(log), key, value, timestamp_ms))
        return partition, len(log) - 1

    def read(self, topic: str, partition: int, start: int = 0) -> list[Record]:
        return self.topic(topic)[partition][start:]

    def records(self, topic: str) -> list[tuple[int, Record]]:
        return [(p, r) for p, part in enumerate(self.topic(topic)) for r in part]


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


class Pipeline:
    """The extractor's and the memory processor's cores over an InMemoryLog, one hop at a time."""

    TURNS, FACTS, MEMORY = "turns", "facts", "memory"

    def __init__(self, embedder: Embedder, settings: Settings | None = None, rules: Rules | None = None):
        self.settings = settings or Settings(partitions=3)
        self.rules = rules or Rules.from_settings(self.settings)
        self.keys = KeyRing()
        self.log = InMemoryLog(self.settings.partitions)
        self.extractor = RuleExtractor(embedder)
        self.core = MemoryCore(self.settings, self.rules, self.keys, {}, {}, SealedStates(self.keys),
                               partition_of=partitioner(self.settings.partitions))
        self.positions: dict[tuple[str, int], int] = {}     # each consumer's next offset

    def record_turn(self, user: str, session: str, content: str, at: datetime, role: str = "user") -> Envelope:
        env = make_envelope(TurnRecorded(session=session, role=role, content=content), user=user, time=at,
                            producer="test")
        self.log.append(self.TURNS, user.encode(), encode(env, self.keys), ms(at))
        return env

    def _consume(self, topic: str):
        for p in range(self.log.partitions):
            start = self.positions.get((topic, p), 0)
            for record in self.log.read(topic, p, start):
                self.positions[(topic, p)] = record.offset + 1
                yield p, record

    def run(self) -> None:
        """Every hop until nothing new: turns → facts → decisions → the core's control input."""
        moved = True
        while moved:
            moved = False
            for _, r in self._consume(self.TURNS):
                moved = True
                for fact in self.extractor.events_for([decode(r.value, self.keys)]):
                    self.log.append(self.FACTS, fact.user.encode(), encode(fact, self.keys), ms(fact.time))
            for _, r in self._consume(self.FACTS):
                moved = True
                for out in self.core.on_fact(decode(r.value, self.keys)):
                    self._emit(out)
            for p, r in self._consume(self.MEMORY):
                env = memory_input(r.key, r.value, self.keys, appended_ms=r.timestamp_ms,
                                   max_future_skew_s=self.settings.max_future_skew_s)
                for out in self.core.on_control(env, p) if env is not None else ():
                    moved = True
                    self._emit(out)

    def _emit(self, out) -> None:
        self.log.append(self.MEMORY, out.key.encode(), encode(out.envelope, self.keys), ms(out.envelope.time),
                        partition=out.partition)

    def publish_control(self, env: Envelope) -> None:
        """An event on the memory topic from outside the processor (recall, forget, erase)."""
        self.log.append(self.MEMORY, env.user.encode(), encode(env, self.keys), ms(env.time))

    def events(self, topic: str, user: str | None = None) -> list[Envelope]:
        """The decoded events of a topic, in offset order within each partition."""
        out = [decode(r.value, self.keys) for _, r in self.log.records(topic)]
        return [e for e in out if user is None or e.user == user]

    def decisions(self, user: str) -> list[Envelope]:
        return self.events(self.MEMORY, user)
