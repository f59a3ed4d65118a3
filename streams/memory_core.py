"""The memory processor's core: one event in, decisions out, state saved — no faust, no Kafka.

The live faust agent (streams/memory_processor.py) and what-if (replay/whatif.py) drive this very
class; they differ only in where the state lives (a faust table or a dict), how it is sealed
(with the user's data key, or not at all in a throw-away what-if), and where the out-going
events go (the memory topic, or a what-if topic).

It takes decoded envelopes only: the drivers read the records, pick and decode the ones it acts
on (streams/routing.py memory_input) and route what it returns. No Kafka client, raw record or
partitioner is in here; a tick's "which users are on partition p" is answered by the
`partition_of` function the driver gives it (streams/routing.py partitioner).

Each step is a generator of `Outgoing` records. The driver sends each one before asking for the
next, and the state is saved only after the last one was taken (see the numbered steps in
`on_fact`): if the driver crashes while sending, nothing is saved, the input is re-read, and the
same decisions (same derived ids, absolute values) are emitted again — harmless to every projector.

What it reads (`on_fact`, `on_control`):
  fact.extracted   on the facts topic: decide (create / reinforce / link / supersede /
                   preference.set) and, every `consolidation_every` stores, consolidate;
  relations.extracted  on the facts topic: resolve a turn's mentions to the user's entities and
                   decide entity.observed / relation.asserted / relation.ended (#26,
                   domain/relation_rules.py);
  on the memory topic, its own output comes back and is ignored, except
  user.erased / user.forgotten  drop the user's state and ledger;
  memory.forgotten              the memories leave the window and ledger;
  memory.recalled               refreshes access in the ledger (and may revive memories);
  decay.ticked                  ages every user of that partition at the tick's own event time,
                                `tick_slice_users` users per event, the rest in a continuation tick.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import orjson

from adapters import metrics
from kernel.config import Settings
from domain import aging_schedule
from domain.consolidation import consolidate, consolidation_due, forget, recalled
from domain.ledger import BUCKETS, Ledger
from domain.memory_rules import decide
from domain.memory_state import Decision, Rules, UserState
from domain.relation_rules import GraphState, decide_relations
from domain.rules_profile import rules_hash
from kernel.ids import derived_id
from schemas.codec import KeyRing, kept_bytes, make_envelope, open_bytes, seal_bytes
from schemas.envelope import Envelope
from schemas.events import DecisionData, MemoryCreated
from streams.window_vectors import WindowVectors

log = logging.getLogger("memstream.memory")
PRODUCER = "memory-processor/1"
# Memory-topic events the processor acts on (everything else there is its own output).
CONTROL = frozenset({"memory.recalled", "memory.forgotten", "user.forgotten", "decay.ticked"})
# Every memory-topic event type it takes (`on_control`): the drivers decode only these.
MEMORY_INPUTS = CONTROL | {"user.erased"}
# A state value whose window vectors are stored apart (streams/window_vectors.py): these 4 bytes,
# then to_dict's JSON with each vector's dimension in its place and "vectors": {"at": [[slot, tag],
# ...] in window order, "seq": the next tag}. States stored before (domain/memory_state.py
# UserState.from_bytes: the vectors inline) still read, and are stored this way when next saved.
STATE_SPLIT = b"MSv3"


class StateCodec(Protocol):
    """How a state value is stored: sealed with the user's key live, plain in a what-if."""

    def dump(self, user: str, label: str, data: bytes) -> bytes: ...

    def load(self, user: str, label: str, blob: bytes) -> bytes | None: ...   # None: unreadable (erased)


class SealedStates:
    """State values sealed with the user's data key: the changelog is a Kafka topic, and
    plaintext there would outlive erasure."""

    def __init__(self, keys: KeyRing):
        self.keys = keys

    def dump(self, user: str, label: str, data: bytes) -> bytes:
        return seal_bytes(self.keys, user, label, data)

    def load(self, user: str, label: str, blob: bytes) -> bytes | None:
        return open_bytes(self.keys, user, label, blob)   # values sealed as JSON before 2026-12-07 too


class PlainStates:
    """State values as they are: for a what-if whose state lives only in this process."""

    def dump(self, user: str, label: str, data: bytes) -> bytes:
        return kept_bytes(data)

    def load(self, user: str, label: str, blob: bytes) -> bytes | None:
        return blob


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One record for the memory topic. `partition` is set only where the key does not decide it
    (a tick continuation goes to the tick's own partition)."""
    key: str
    envelope: Envelope
    partition: int | None = None
    continuation: bool = False   # a tick continuation: what-if reads the live one from the log instead


def scoped(decisions: list[Decision], fact) -> list[Decision]:
    """The fact's scope (agent_id, run_id, metadata: issue 25) on the memory it creates. Here, not
    in the pure rules: the scope decides nothing, it only travels with the memory (and a decision
    re-emitted from the applied window after a crash gets it the same way)."""
    scope = {k: getattr(fact, k, None) for k in ("agent_id", "run_id", "metadata")}
    if not any(v is not None for v in scope.values()):
        return decisions
    return [replace(d, data=d.data.model_copy(update=scope))
            if isinstance(d.data, MemoryCreated) and d.data.fact_id == fact.fact_id else d for d in decisions]


class MemoryCore:
    """Per-event steps of the memory processor over a pair of key-value state stores.

    `states` maps user → the user's state; `ledgers` maps (user, bucket) → one ledger bucket
    (domain/ledger.py), so a decision rewrites only the buckets it touched; `vectors` maps
    (user, slot) → one vector of the user's recent window (streams/window_vectors.py), so a
    decision rewrites only the vectors that entered the window or changed (None: a dict of its
    own). Keys and values are bytes: a faust table and a dict both fit.
    """

    def __init__(self, settings: Settings, rules: Rules, keys: KeyRing,
                 states: MutableMapping[bytes, bytes], ledgers: MutableMapping[bytes, bytes],
                 codec: StateCodec, on_user_erased: Callable[[str], None] | None = None,
                 partition_of: Callable[[bytes], int] | None = None,
                 vectors: MutableMapping[bytes, bytes] | None = None):
        # The drivers' decode setting (records dated past the broker's time: poison), kept here
        # so a driver holding only the core decodes as the live processor does.
        self.max_future_skew_s = settings.max_future_skew_s
        # key → its partition on the memory topic (streams/routing.py partitioner): which users a
        # tick for a partition ages. None: a driver that sends no ticks (a tick then fails loudly).
        self.partition_of = partition_of
        self.tick_slice_users = settings.tick_slice_users
        self.rules = rules
        # Stamped on every decision (DecisionData.rules_profile): which settings made it.
        self.rules_profile = rules_hash(rules)
        self.keys = keys
        self.states = states
        self.ledgers = ledgers
        self.codec = codec
        self.window_vectors = WindowVectors({} if vectors is None else vectors, codec,
                                            max_slots=2 * rules.recent_window,
                                            cache_bytes=settings.memory_vector_cache_mb * 1024 * 1024)
        self.on_user_erased = on_user_erased   # e.g. the session summarizer drops its state too

    # -- state ------------------------------------------------------------------------------

    @staticmethod
    def _ledger_key(user: str, bucket: int) -> bytes:
        return f"{user}\x00{bucket}".encode()

    def load_state(self, user: str) -> UserState | None:
        """The user's state with a lazily loaded ledger; None when it exists but is unreadable (erased)."""
        def load_bucket(b: int) -> dict | None:
            blob = self.ledgers.get(self._ledger_key(user, b))
            if blob is None:
                return None
            opened = self.codec.load(user, f"ledger:{user}:{b}", blob)
            return None if opened is None else orjson.loads(opened)

        ledger = Ledger(load_bucket)
        blob = self.states.get(user.encode())
        if blob is None:
            return UserState(ledger=ledger)
        opened = self.codec.load(user, f"state:{user}", blob)
        if opened is None:
            return None
        if not opened.startswith(STATE_SPLIT):
            return UserState.from_bytes(opened, ledger)   # vectors inline: stored apart when next saved
        head = orjson.loads(memoryview(opened)[len(STATE_SPLIT):])
        where = head.pop("vectors")
        refs = self.window_vectors.load(user, where["at"], [x[1] for x in head.get("recent", [])])
        state = UserState.from_dict(head, ledger, [vec for _, _, vec in refs])
        state.stored_vectors = ({r.memory_id: ref for r, ref in zip(state.recent, refs, strict=True)}, where["seq"])
        return state

    def save_state(self, user: str, state: UserState) -> None:
        # 0. When each bucket read or changed is next due for aging, while the ledger still knows
        #    which ones changed (domain/aging_schedule.py): consolidation then reads only those.
        aging_schedule.plan(state, self.rules)
        # 1. The window's vectors that entered it or changed, each into a slot the saved state
        #    does not use: a crash before step 3 leaves the saved state's own slots as they were.
        old, seq = state.stored_vectors or ({}, 0)
        refs, seq = self.window_vectors.save(user, old, [(r.memory_id, r.vec) for r in state.recent], seq)
        for r in state.recent:
            r.vec = refs[r.memory_id][2]   # the stored array (read-only now), so the next save sees it unchanged
        # 2. The ledger's touched buckets, then the state: a crash in between leaves a
        #    state that re-decides the input again, which rewrites the same buckets.
        for b in sorted(state.ledger.dirty):
            data = state.ledger.dump(b)
            if data:
                self.ledgers[self._ledger_key(user, b)] = self.codec.dump(user, f"ledger:{user}:{b}", orjson.dumps(data))
            else:
                self.ledgers.pop(self._ledger_key(user, b), None)
        state.ledger.dirty.clear()
        # 3. The state itself, naming each window vector's slot and tag.
        head = state.to_dict(vectors=False)
        head["vectors"] = {"at": [list(refs[r.memory_id][:2]) for r in state.recent], "seq": seq}
        self.states[user.encode()] = self.codec.dump(user, f"state:{user}", STATE_SPLIT + orjson.dumps(head))
        # 4. Only now the slots no vector of the saved state is in any more.
        self.window_vectors.release(user, old, refs)
        state.stored_vectors = (refs, seq)

    def drop_user(self, user: str, erased: bool = False) -> None:
        self.states.pop(user.encode(), None)
        for b in range(BUCKETS):
            self.ledgers.pop(self._ledger_key(user, b), None)
        self.window_vectors.drop(user)
        if erased and self.on_user_erased is not None:
            self.on_user_erased(user)

    # -- out-going events -------------------------------------------------------------------

    def _out(self, user: str, decisions: list[Decision], cause: Envelope, correlation: str | None,
             tag_prefix: str = "") -> Iterator[Outgoing]:
        for d in decisions:
            when = cause.time if d.at is None else datetime.fromtimestamp(d.at, UTC)
            # Stamped here rather than in the pure rules, so a decision re-emitted from the applied
            # window after a crash carries the profile of the worker that sends it, like a fresh one.
            data = d.data.model_copy(update={"rules_profile": self.rules_profile}) if isinstance(d.data, DecisionData) else d.data
            env = make_envelope(data, user=user, time=when, id=derived_id(cause.id, tag_prefix + d.tag),
                                causation=cause.id, correlation=correlation, producer=PRODUCER)
            yield Outgoing(user, env)

    # -- steps ------------------------------------------------------------------------------

    def on_fact(self, fact: Envelope) -> Iterator[Outgoing]:
        """One decoded event from the facts topic."""
        if fact.erased:
            return
        if fact.type == "relations.extracted":
            yield from self.on_relations(fact)
            return
        if fact.type != "fact.extracted":
            return
        # (a state sealed with a key since erased reads as a fresh start)
        state = self.load_state(fact.user) or UserState(ledger=Ledger())
        # 1. Decide from the user's state (pure; the event's own time, never the clock).
        state, decisions = decide(state, fact.data, self.rules, lambda tag: derived_id(fact.id, tag),
                                  at=fact.time.timestamp(), consolidate=False)
        if fact.data.edits is not None and not decisions:
            # An edit of a memory no longer active (or not the user's): nothing to decide, nothing
            # dead-lettered (the event is well-formed; the memory just moved on before it came).
            metrics.edit_ignored()
            log.info("edit %s of memory %s decided nothing: the memory is not active for its user",
                     fact.id, fact.data.edits)
        decisions = scoped(decisions, fact.data)
        # 2. The decisions go out before the state is saved (see the module's docstring).
        yield from self._out(fact.user, decisions, fact, fact.correlation)
        # 3. Every N stores, consolidation — after the fact's own decisions, so the fact is never
        #    late for it (its cost is bounded: domain/consolidation.py).
        if consolidation_due(state, self.rules):
            yield from self._out(fact.user, consolidate(state, self.rules, state.clock), fact, fact.correlation)
        # 4. Save the state.
        self.save_state(fact.user, state)

    def on_relations(self, claims: Envelope) -> Iterator[Outgoing]:
        """A turn's relation claims (#26): entity and relation decisions from the user's graph state."""
        state = self.load_state(claims.user) or UserState(ledger=Ledger())
        graph = GraphState.from_dict(state.graph)
        # 1. Decide (pure; ids derived from the claims' event id, the turn's time for validity).
        pairs = decide_relations(graph, claims.data.claims, session=claims.data.session, at=claims.time.timestamp(),
                                 source_turn=claims.data.source_turn, new_id=lambda tag: derived_id(claims.id, tag))
        # 2. Out before the state is saved: a crash in between re-decides from the old graph, same ids.
        yield from self._out(claims.user, [Decision(tag, data) for tag, data in pairs], claims, claims.correlation)
        # 3. Save only what changed (a claim that taught nothing leaves the state as it was).
        if pairs or graph.to_dict() != (state.graph or GraphState().to_dict()):
            state.graph = graph.to_dict()
            self.save_state(claims.user, state)

    def on_control(self, env: Envelope, partition: int) -> Iterator[Outgoing]:
        """One decoded event of the memory topic that the processor acts on (MEMORY_INPUTS; the
        driver decodes only those, streams/routing.py memory_input), read from `partition`."""
        if env.type == "user.erased":
            # The erasure's NOTIFY drops cached keys in every process; this covers a listener
            # that is reconnecting right now.
            if hasattr(self.keys, "forget_cached"):
                self.keys.forget_cached(env.user)
            self.drop_user(env.user, erased=True)
            return
        if env.erased or env.type not in CONTROL:
            return
        if env.type == "user.forgotten":
            self.drop_user(env.user)
            return
        if env.type == "decay.ticked":
            yield from self.on_tick(env, partition)
            return
        state = self.load_state(env.user)
        if state is None:
            return
        if env.type == "memory.recalled":
            # refreshed access, and archived memories revived (memory.revived, caused by the recall)
            decisions = recalled(state, env.data.memory_ids, env.time.timestamp(), env.data.archived_ids,
                                 env.data.scores)
            yield from self._out(env.user, decisions, env, env.correlation or env.id)
            changed = bool(decisions) or bool(state.ledger.dirty)
        else:  # memory.forgotten
            changed = sum(forget(state, mid) for mid in env.data.memory_ids)
        if changed:
            self.save_state(env.user, state)

    def on_tick(self, env: Envelope, partition: int) -> Iterator[Outgoing]:
        """Age the users of this partition at the tick's event time (a full ledger sweep each),
        `tick_slice_users` users in key order per event, so facts queued behind a tick wait for
        at most one slice; the rest in a continuation tick to the same partition, behind whatever
        arrived meanwhile."""
        tick = env.data
        if tick.partition != partition:
            return  # a tick is for the partition it was written to
        if self.partition_of is None:
            raise TypeError("a decay tick reached a MemoryCore built without partition_of "
                            "(streams/routing.py partitioner): its driver cannot say which users it ages")
        at = env.time.timestamp()
        after = (tick.after or "").encode()
        users = sorted(k for k in list(self.states.keys())
                       if k > after and self.partition_of(k) == partition)
        users, rest = users[:self.tick_slice_users], users[self.tick_slice_users:]
        for key in users:
            user = key.decode()
            state = self.load_state(user)
            if state is None:
                continue
            now = max(state.clock, at)
            decisions = consolidate(state, self.rules, now, full=True)
            state.clock = now
            # One tick decides for many users: the user is part of each derived id's tag.
            yield from self._out(user, decisions, env, env.id, tag_prefix=f"{user}|")
            self.save_state(user, state)
        if rest:
            last = users[-1].decode()
            more = tick.model_copy(update={"after": last})
            cont = make_envelope(more, user=env.user, time=env.time, id=derived_id(env.id, f"after:{last}"),
                                 causation=env.id, correlation=env.correlation or env.id, producer=PRODUCER)
            yield Outgoing(env.user, cont, partition=partition, continuation=True)
